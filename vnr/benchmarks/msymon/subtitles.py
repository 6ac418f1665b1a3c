"""YouTube subtitles (WebVTT) -> `subtitles/<lang>/<id>.json` for the M-SyMoN builder.

    python -m vnr.benchmarks.msymon.subtitles --vtt_dir VTT --lang ch --out RELEASE \
        [--pause 0.5] [--max_words 30]

Reads every `<id>.<code>.vtt` under `--vtt_dir` (as `yt-dlp --write-auto-subs --sub-langs
<code>.*` names them; `<code>` is ignored, `--lang` says which M-SyMoN language the files
are) with the SYMON builder's WebVTT reader (`tfds_builders.symon.parse_vtt`: rolling duplicates
of auto captions removed, per-word times), groups the words into sentences and writes
`[{begin_time, end_time, text}]`: a sentence ends after a word ending in `. ? ! 。 ？ ！ ।`.
Bracketed non-speech cues (`[Music]`) are dropped (counted). Auto captions carry no
punctuation: then (counted as `no_sentence_punctuation`) sentences
are cut where the narration pauses for at least `--pause` seconds (a word lasts until the
next one starts, at most 1.5 s) or after `--max_words` words (ours), and the
punctuation restoration of Appendix C (`vnr.benchmarks.msymon.punctuation restore`) should
run on the result before the builder. Files that do not parse are counted and named, never
a crash; the counts are printed as JSON.
"""

from __future__ import annotations

import collections
import json
import pathlib
import sys

from absl import flags

from tfds_builders.msymon import LANGUAGES
from tfds_builders.symon import Word, parse_vtt
from vnr import cli

ENDS = (".", "?", "!", "。", "？", "！", "।")
NO_SPACE = ("ch",)
PUNCTUATED_WORDS = 50  # languages written without spaces between words


def sentences(words: list[Word], lang: str, pause: float,
              counts: collections.Counter, max_words: int = 30) -> list[dict]:
    """Timed words -> [{begin_time, end_time, text}] (see the module docstring)."""
    speech = [w for w in words if not (w.text.startswith("[") and w.text.endswith("]"))]
    counts["non_speech_words"] += len(words) - len(speech)  # [Music], [Applause]
    words = speech
    # Punctuated: on average a sentence end per PUNCTUATED_WORDS words at least (an auto
    # caption's rare "dr." does not count).
    ends = sum(w.text.endswith(ENDS) for w in words)
    punctuated = ends > 0 and ends * PUNCTUATED_WORDS >= len(words)
    if words and not punctuated:
        counts["no_sentence_punctuation"] += 1
    sep = "" if lang in NO_SPACE else " "
    out, cur = [], []
    for k, w in enumerate(words):
        cur.append(w)
        nxt = words[k + 1] if k + 1 < len(words) else None
        end = w.text.endswith(ENDS) if punctuated else (
            nxt is None or nxt.start - w.end >= pause or len(cur) >= max_words)
        if end or nxt is None:
            out.append({"begin_time": round(cur[0].start, 3), "end_time": round(cur[-1].end, 3),
                        "text": sep.join(x.text for x in cur).strip()})
            cur = []
    return [s for s in out if s["text"]]


def convert(vtt_dir: pathlib.Path, lang: str, out: pathlib.Path, pause: float = 0.5,
            max_words: int = 30) -> collections.Counter:
    """Every `<id>.*.vtt` of `vtt_dir` -> `out/subtitles/<lang>/<id>.json`; the counts."""
    if lang not in LANGUAGES:
        raise ValueError(f"--lang {lang!r}: use one of {LANGUAGES}")
    counts: collections.Counter = collections.Counter()
    dest = out / "subtitles" / lang
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(vtt_dir.glob("*.vtt")):
        vid = path.name.split(".")[0]
        try:
            words = parse_vtt(path.read_text(encoding="utf-8"), counts)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            counts["bad_vtt"] += 1
            print(f"skipped {path}: bad_vtt ({e})", file=sys.stderr)
            continue
        sents = sentences(words, lang, pause, counts, max_words)
        if not sents:
            counts["no_words"] += 1
            print(f"skipped {path}: no_words", file=sys.stderr)
            continue
        (dest / f"{vid}.json").write_text(json.dumps(sents, ensure_ascii=False, indent=0),
                                          encoding="utf-8")
        counts["written"] += 1
    return counts


def _flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("vtt_dir", None, "the WebVTT captions", required=True, flag_values=fv)
    flags.DEFINE_enum("lang", None, LANGUAGES, "their language", required=True, flag_values=fv)
    flags.DEFINE_string("out", None, "the release folder (gets subtitles/<lang>/)",
                        required=True, flag_values=fv)
    flags.DEFINE_float("pause", 0.5, "seconds of silence that end a sentence in unpunctuated "
                       "captions", flag_values=fv)
    flags.DEFINE_integer("max_words", 30, "longest sentence of unpunctuated captions",
                         lower_bound=1, flag_values=fv)


def main(argv: list[str] | None = None) -> int:
    a = cli.parse(argv, "python -m vnr.benchmarks.msymon.subtitles", __doc__, _flags)
    print(json.dumps(convert(pathlib.Path(a.vtt_dir), a.lang, pathlib.Path(a.out), a.pause,
                             a.max_words)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

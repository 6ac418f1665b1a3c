"""TFDS builder for YMS (YouTube Movie Summaries, NeuMATCH; as in SYMON §7.3).

Each video is a sequence of annotated time spans, `<vid>_<hh.mm.ss.mmm>-<hh.mm.ss.mmm>\\t<text>`:
a sentence (or phrase) matched to that footage, `UNMATCHED` (footage no sentence describes)
or `UNMATCHED: <sentence>` (a sentence with no footage). Clips come from
`clip_segmentation.txt`. See README.md for the layout and rules.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import common, schema
from tfds_builders.msymon import parse

VERSION = tfds.core.Version("1.0.0")
SPLIT_FILES = {"train": "training_split.txt", "val": "val_split.txt", "test": "test_split.txt"}
_TS = r"(\d+)\.(\d\d)\.(\d\d)\.(\d{1,3})"
_LINE = re.compile(rf"^\s*(\w+?)_{_TS}-{_TS}\s*\t\s*(.*?)\s*$")
_CLIP = re.compile(rf"^\s*(?:[^/\s]+/)?(\w+?)_{_TS}-{_TS}\s*$")
_UNMATCHED = re.compile(r"^UNMATCHED\s*(?::\s*(.*))?$", re.IGNORECASE)

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Point --manual_dir at the YMS folder (RubbyJ/Data-efficient-Alignment `YMS_dataset/YMS/`):
annotations_sentences.txt, annotations_phrases.txt, clip_segmentation.txt, training_split.txt,
val_split.txt, test_split.txt; for feature configs also features/<video_id>.npy [T, dim];
for the videos configs videos/<video_id>.<ext> (the YouTube videos, e.g. from yt-dlp)."""


@dataclasses.dataclass(eq=False)
class YmsConfig(tfds.core.BuilderConfig):
    text: str = "sentences"  # or "phrases"
    features: bool = True
    dim: int = 512
    fps: float = 1.0
    videos: bool = False  # each video's file under videos/ and its duration (frames, §5.1)


def builder_config(text: str, features: bool, dim: int = 512, fps: float = 1.0,
                   videos: bool = False) -> YmsConfig:
    if text not in ("sentences", "phrases"):
        raise ValueError(f"yms text granularity {text!r}: use 'sentences' or 'phrases'")
    if videos:
        return YmsConfig(name=f"{text}_videos", text=text, features=False, dim=0, videos=True)
    if not features:
        return YmsConfig(name=f"{text}_text_only", text=text, features=False, dim=0)
    return YmsConfig(name=f"{text}_d{dim}_fps{fps:g}".replace(".", "p"), text=text, dim=dim,
                     fps=fps)


def seconds(h: str, m: str, s: str, ms: str, reason: str = "malformed_annotation_line"
            ) -> float:
    """`hh.mm.ss.mmm` fields (digit strings) as seconds, checked as a `schema.Clock`
    (minutes and seconds below 60, at most a day); `schema.Invalid(reason)` otherwise."""
    return schema.clock(reason, hours=int(h), minutes=int(m), seconds=int(s),
                        fraction=int(ms.ljust(3, "0")) / 1000)


def read_split(path: pathlib.Path, counts: collections.Counter | None = None) -> list[str]:
    """Video ids of a split file; `#` starts a comment (whole-line or trailing). A file that
    is not UTF-8 text stops the build with one line naming it (`schema.Unreadable`)."""
    out = []
    for line in schema.read_text(path).splitlines():
        if "#" in line and counts is not None:
            counts["kept_split_comment_lines"] += 1
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def _matches(path: pathlib.Path, pattern: re.Pattern, reason: str,
             counts: collections.Counter) -> Iterator[tuple[str, re.Match]]:
    """("<path>:<line no>", match) of every non-blank line of `path`; a line that does not
    match `pattern` is counted under `reason` (a file that is not UTF-8 text is one line,
    `schema.Unreadable`)."""
    for n, line in enumerate(schema.read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        m = pattern.match(line)
        if m:
            yield f"{path}:{n}", m
        else:
            common.record_skip(counts, reason, f"{path}:{n}", line[:60])


def read_annotations(path: pathlib.Path, counts: collections.Counter) -> dict[str, dict]:
    """{video id: {sentences, begin, end, matched, last}} from an annotations_*.txt file; a
    line whose times are out of range is `malformed_annotation_line`."""
    videos: dict[str, dict] = {}
    for where, m in _matches(path, _LINE, "malformed_annotation_line", counts):
        vid, t = m.group(1), m.group(10)
        try:
            b, e = seconds(*m.group(2, 3, 4, 5)), seconds(*m.group(6, 7, 8, 9))
        except schema.Invalid as err:
            common.record_skip(counts, err.reason, where, f"{err}; {m.string[:60]}")
            continue
        v = videos.setdefault(vid, {"sentences": [], "begin": [], "end": [], "matched": [],
                                    "last": 0.0})
        v["last"] = max(v["last"], e)
        if e < b:
            counts["kept_as_unmatched_end_before_begin"] += 1
        um = _UNMATCHED.match(t)
        if um is not None:
            counts["kept_unmatched_clip_spans" if um.group(1) is None
                   else "kept_unmatched_sentences"] += 1
            if t not in ("UNMATCHED",) and not re.match(r"^UNMATCHED: \S", t):
                counts["kept_unmatched_marker_spacing"] += 1
            if um.group(1):
                v["sentences"].append(um.group(1).strip())
                v["begin"].append(0.0), v["end"].append(0.0), v["matched"].append(False)
            continue
        if not t:
            common.record_skip(counts, "empty_text", where, m.string[:60])
            continue
        v["sentences"].append(t)
        v["begin"].append(b), v["end"].append(e), v["matched"].append(e >= b)
    return videos


def read_clips(path: pathlib.Path, counts: collections.Counter) -> dict[str, np.ndarray]:
    """{video id: [C, 2] sorted clip (begin, end) seconds} from clip_segmentation.txt."""
    clips: dict[str, list] = collections.defaultdict(list)
    for where, m in _matches(path, _CLIP, "malformed_clip_line", counts):
        try:
            b = seconds(*m.group(2, 3, 4, 5), reason="malformed_clip_line")
            e = seconds(*m.group(6, 7, 8, 9), reason="malformed_clip_line")
        except schema.Invalid as err:
            common.record_skip(counts, err.reason, where, f"{err}; {m.string[:60]}")
            continue
        if e <= b:
            common.record_skip(counts, "empty_clip", where, m.string[:60])
            continue
        clips[m.group(1)].append((b, e))
    return {k: np.asarray(sorted(v), np.float32) for k, v in clips.items()}


def check_manual_dir(manual_dir: Any, text: str) -> pathlib.Path:
    need = f"annotations_{text}.txt and {', '.join(SPLIT_FILES.values())}"
    if not manual_dir:
        raise common.ManualDirError(f"yms needs --manual_dir: the YMS folder with {need}")
    root = pathlib.Path(manual_dir)
    missing = [f for f in (f"annotations_{text}.txt", *SPLIT_FILES.values())
               if not (root / f).is_file()]
    if missing:
        raise common.ManualDirError(f"manual_dir {root} lacks {', '.join(missing)}")
    return root


def scan(root: pathlib.Path, cfg: YmsConfig, counts: collections.Counter) -> dict[str, list]:
    ann = read_annotations(root / f"annotations_{cfg.text}.txt", counts)
    clip_path = root / "clip_segmentation.txt"
    clips = read_clips(clip_path, counts) if clip_path.is_file() else {}
    if not clip_path.is_file():
        common.log.warning("%s is missing: every video is cut into fixed-length clips", clip_path)
    out: dict[str, list] = {}
    listed: set[str] = set()
    for split, fname in SPLIT_FILES.items():
        vids = read_split(root / fname, counts)
        listed |= set(vids)
        for vid in vids:
            if vid not in ann:
                common.record_skip(counts, "missing_annotations", root / fname,
                                   f"{split} video {vid} has no line in annotations_{cfg.text}")
                continue
            video = _video(root, cfg, vid, ann[vid], clips.get(vid), counts)
            if video is not None:
                out.setdefault(split, []).append(video)
    for vid in sorted(set(ann) - listed):
        common.record_skip(counts, "video_in_no_split", root, vid)
    return out


def _video(root: pathlib.Path, cfg: YmsConfig, vid: str, a: dict, clips: np.ndarray | None,
           counts: collections.Counter) -> dict | None:
    if not a["sentences"]:
        common.record_skip(counts, "no_sentences", root, vid)
        return None
    n = len(a["sentences"])
    video = {"video_id": vid, "language": "en", "sentences": a["sentences"],
             "begin": np.asarray(a["begin"], np.float32), "end": np.asarray(a["end"], np.float32),
             "matched": np.asarray(a["matched"], bool),
             "narr_begin": np.full(n, np.nan, np.float32),
             "narr_end": np.full(n, np.nan, np.float32)}
    if clips is None:
        counts["kept_no_clip_segmentation"] += 1
        clips = np.zeros((0, 2), np.float32)
    video["clip_begin"], video["clip_end"] = clips[:, 0], clips[:, 1]
    need = max(a["last"], float(clips[:, 1].max()) if len(clips) else 0.0)
    if cfg.features:
        feats = parse.video_features(root, vid, cfg.dim, cfg.fps, need, counts, f"video {vid}")
        if feats is None:
            return None
        video["features"], need = feats, len(feats) / cfg.fps
    elif cfg.videos:  # missing, unreadable or shorter than its spans: counted, left out
        got = parse.video_duration(root, vid, need, counts, f"video {vid}")
        if got is None:
            return None
        video["video_file"], need = got
    video["duration"] = np.float32(need)
    return video


class Yms(common.SummaryBuilder, tfds.core.GeneratorBasedBuilder):
    """YMS videos: sentences (or phrases) with spans and matched flags, clip boundaries,
    optional per-second features or each video's file (`*_videos`)."""

    name = "yms"
    VERSION = VERSION
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
    BUILDER_CONFIGS = [
        builder_config("sentences", False), builder_config("phrases", False),
        YmsConfig(name="sentences", text="sentences", dim=512, fps=1.0),
        YmsConfig(name="phrases", text="phrases", dim=512, fps=1.0),
        builder_config("sentences", False, videos=True),
        builder_config("phrases", False, videos=True),
    ]
    DEFAULT_CONFIG_NAME = "sentences_text_only"

    @classmethod
    def check_inputs(cls, config: str | YmsConfig, manual_dir: Any) -> None:
        cfg = config if isinstance(config, YmsConfig) else next(
            c for c in cls.BUILDER_CONFIGS if c.name == config)
        check_manual_dir(manual_dir, cfg.text)

    def _info(self) -> tfds.core.DatasetInfo:
        from tfds_builders.msymon.msymon import feature_specs

        f32 = tfds.features.Tensor(shape=(None,), dtype=np.float32)
        feats = dict(feature_specs(self.builder_config, shots=False), clip_begin=f32,
                     clip_end=f32)
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(feats),
            homepage="https://github.com/RubbyJ/Data-efficient-Alignment")

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        cfg: YmsConfig = self.builder_config
        root = check_manual_dir(common.manual_dir(dl_manager), cfg.text)
        self.skips = common.Counts()  # names the first inputs behind each count
        videos = scan(root, cfg, self.skips)
        if not videos:
            raise common.ManualDirError(f"{root}: no usable video in any split")
        return {split: self._generate_examples(v) for split, v in videos.items()}

    def _generate_examples(self, videos: list[dict]) -> Iterator[tuple[str, dict]]:
        from tfds_builders.msymon.msymon import make_example

        for v in videos:
            ex = make_example(v, self.builder_config.features, shots=False)
            ex["clip_begin"] = np.asarray(v["clip_begin"], np.float32)
            ex["clip_end"] = np.asarray(v["clip_end"], np.float32)
            yield v["video_id"], ex


Builder = Yms

"""WebVTT (yt-dlp auto subtitles) -> subtitles/<lang>/<id>.json the builder reads."""

import collections
import json
import shutil

from tfds_builders.msymon import parse
from vnr.benchmarks.msymon import subtitles

PUNCTUATED = """WEBVTT

00:00:01.000 --> 00:00:03.000
Он вошёл в дом. Там

00:00:03.000 --> 00:00:06.000
никого не было!
"""


def test_punctuated_bad_and_real_auto_captions(tmp_path, shared_data):
    vtt_dir = tmp_path / "vtt"
    vtt_dir.mkdir()
    (vtt_dir / "abc.ru.vtt").write_text(PUNCTUATED, encoding="utf-8")
    (vtt_dir / "bad.ru.vtt").write_text("not a vtt", encoding="utf-8")
    counts = subtitles.convert(vtt_dir, "ru", tmp_path / "release")
    assert counts["written"] == 1 and counts["bad_vtt"] == 1
    out = json.loads((tmp_path / "release/subtitles/ru/abc.json").read_text(encoding="utf-8"))
    assert [s["text"] for s in out] == ["Он вошёл в дом.", "Там никого не было!"]
    assert out[0]["begin_time"] == 1.0 and out[1]["end_time"] == 6.0
    # A real YouTube auto caption (SYMON sample): no punctuation -> cut at pauses, counted.
    real = tmp_path / "real"
    real.mkdir()
    src = sorted((shared_data / "symon" / "timestamped_text").glob("*.en.vtt"))[0]
    shutil.copy(src, real / src.name)
    counts = subtitles.convert(real, "en", tmp_path / "release")
    assert counts["written"] == 1 and counts["no_sentence_punctuation"] == 1
    assert counts["non_speech_words"] >= 1  # [Music]
    c = collections.Counter()
    subs = parse.read_subtitles(tmp_path / "release/subtitles/en" / f"{src.name.split('.')[0]}"
                                ".json", c)
    assert subs is not None and not c and len(subs["sentences"]) > 5
    assert (subs["begin"] <= subs["end"]).all() and (subs["begin"][1:] >= subs["begin"][:-1]).all()
    assert not any("[music]" in s.lower() for s in subs["sentences"])

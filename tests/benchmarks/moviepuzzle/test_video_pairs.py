"""MoviePuzzle Table 1's VideoMAE / TimeSformer pair rows (task moviepuzzle.video_pairs):
Hugging Face-layout checkpoints through the trainer's `pretrained` hook, frames as
VideoMAEImageProcessor makes them, NSP / SOP pairs, every ordered pair scored, one-line
errors before anything compiles."""

import io
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs.moviepuzzle import video_pairs as configs
from tests.helpers import params_under
from vnr import train
from vnr.benchmarks.moviepuzzle import smoke_inputs, video_pairs_data
from vnr.benchmarks.moviepuzzle import video_pairs as task
from vnr.benchmarks.moviepuzzle.video_pairs_model import Pixels, preprocessing
from vnr.models.encoders import videomae

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
METRICS = {"lsd", "lmd", "sd", "ssd", "os2", "os3", "pair_acc", "clips"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tfds"))


def _config(family: str, checkpoint: Path, data_dir: str, extra: str = ""):
    c = configs.get_config(f"{family},smoke,checkpoint={checkpoint}{extra}")
    c.data.data_dir = data_dir
    return c


def _one_line(c) -> str:
    with pytest.raises(train.ConfigError) as e:
        train.setup(c)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("family, golden", [("videomae", GOLDEN / "videomae" / "pretraining"),
                                            ("timesformer", GOLDEN / "timesformer")])
def test_tiny_writer_has_the_keys_and_shapes_of_transformers_checkpoints(tmp_path, family,
                                                                         golden):
    """The smoke checkpoints are the layout `save_pretrained` writes: the encoder keys and
    torch shapes of the golden fixtures (made by transformers' own classes, same sizes)."""
    from safetensors.numpy import load_file

    frames = json.loads((golden / "config.json").read_text())["num_frames"]
    smoke_inputs.write_checkpoint(tmp_path, family, num_frames=frames)
    ours, ref = load_file(str(tmp_path / "model.safetensors")), load_file(
        str(golden / "model.safetensors"))
    enc = f"{family}."
    assert {k: v.shape for k, v in ours.items() if k.startswith(enc)} == \
        {k: v.shape for k, v in ref.items() if k.startswith(enc)}
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == family


# The Table 1 rows trained with their checkpoint loaded (every encoder parameter equal to
# the file's, two steps that change it, the test clips ordered and scored):
# tests/reproduce/test_smoke_moviepuzzle.py::test_video_pair_rows_train_with_the_checkpoint_loaded.


def test_golden_videomae_checkpoint_loads_as_the_golden_tested_loader_reads_it(data_dir):
    """transformers' own VideoMAEForPreTraining files (tests/golden) through the hook: the
    encoder equals `videomae.from_pretrained` (checked against transformers' outputs)."""
    d = GOLDEN / "videomae" / "pretraining"
    s = train.setup(_config("videomae", d, data_dir))
    ref = {".".join(map(str, p)): np.asarray(v.get_value()) for p, v in
           nnx.to_flat_state(nnx.state(videomae.from_pretrained(d), nnx.Param))}
    got = params_under(s.state, "encoder")
    assert set(got) == set(ref)
    for k, v in ref.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def test_bad_checkpoints_are_one_line_before_anything_compiles(data_dir, tmp_path,
                                                               monkeypatch):
    def no_model(config, rngs):
        raise AssertionError("validate must stop the run before the model is built")

    monkeypatch.setattr(task, "make_model", no_model)
    missing = tmp_path / "no-such-videomae"
    msg = _one_line(_config("videomae", missing, data_dir))
    assert f"model.checkpoint='{missing}': no such directory" in msg
    assert "nothing is downloaded" in msg
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    assert "no weights in it" in _one_line(_config("videomae", empty, data_dir))
    # transformers' TimeSformer fixture has 3 frames: no even split of a pair clip
    assert "num_frames=3 is odd" in _one_line(_config("timesformer", GOLDEN / "timesformer",
                                                      data_dir))
    assert "a VideoMAE classification checkpoint" in _one_line(_config(
        "videomae", GOLDEN / "videomae" / "classification", data_dir))
    ckpt = tmp_path / "vm"
    smoke_inputs.write_checkpoint(ckpt, "videomae")
    c = _config("videomae", ckpt, data_dir)
    c.data.image_size = 224
    assert "data.image_size=224" in _one_line(c) and "set data.image_size=32" in _one_line(c)
    assert "model_type 'videomae'" in _one_line(_config("timesformer", ckpt, data_dir))
    (ckpt / "preprocessor_config.json").write_text('{"image_mean": [0.5, 0.5]}')
    assert "preprocessor_config.json" in _one_line(_config("videomae", ckpt, data_dir))
    empty = _config("videomae", ckpt, data_dir)
    empty.model.checkpoint = ""
    assert "model.checkpoint is empty" in _one_line(empty)
    assert configs.get_config("smoke").model.encoder == "videomae"  # the default row
    with pytest.raises(ValueError, match="pick one row"):
        configs.get_config(f"videomae,timesformer,checkpoint={ckpt}")


def test_pixel_constants_come_from_the_preprocessor_config_else_imagenet(tmp_path):
    assert preprocessing(str(tmp_path)) == Pixels()  # no file: ImageNet mean / std
    assert Pixels().mean == videomae.IMAGENET_MEAN
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_mean": [0.45, 0.45, 0.45], "image_std": [0.225, 0.225, 0.225],
         "rescale_factor": 1 / 255, "size": {"shortest_edge": 224}, "resample": 2}))
    px = preprocessing(str(tmp_path), 224)
    assert px.mean == (0.45,) * 3 and px.std == (0.225,) * 3
    assert "preprocessor_config.json" in px.source
    table = px.table()  # float32 per uint8 level, as the processor computes it
    assert table.shape == (256, 3) and table[0, 0] == np.float32(-0.45 / 0.225)
    with pytest.warns(UserWarning, match="resample=3"):
        (tmp_path / "preprocessor_config.json").write_text('{"resample": 3}')
        preprocessing(str(tmp_path), 224)


def test_frames_match_videomae_image_processor_on_real_frames(shared_data):
    """Resize, crop, rescale and normalisation equal transformers' VideoMAEImageProcessor
    bit for bit on real 240p MoviePuzzle frames (not square)."""
    tf = pytest.importorskip("transformers")
    from PIL import Image

    files = sorted((shared_data / "moviepuzzle_public" / "in_domain").glob("*/*.jpg"))[:12]
    if not files:
        pytest.skip("no public MoviePuzzle frames")
    raw = [f.read_bytes() for f in files]
    px = Pixels((0.45, 0.45, 0.45), (0.225, 0.225, 0.225))
    proc = tf.VideoMAEImageProcessor(size={"shortest_edge": 224}, image_mean=list(px.mean),
                                     image_std=list(px.std),
                                     crop_size={"height": 224, "width": 224})
    ref = proc([Image.open(io.BytesIO(r)).convert("RGB") for r in raw],
               return_tensors="np")["pixel_values"][0].transpose(0, 2, 3, 1)
    ours = px.table()[video_pairs_data.decode_frames(raw, 224).astype(np.int32), np.arange(3)]
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("head", ["nsp", "sop"])
def test_nsp_and_sop_pairs_are_labelled_by_true_succession(head):
    mask = np.array([[True] * 6, [True] * 3 + [False] * 3])
    pos = np.array([[3, 0, 5, 1, 4, 2], [2, 0, 1, 3, 4, 5]], np.int32)
    first, second, labels, valid = map(np.asarray, task.sample_pairs(
        jax.random.key(1), jnp.asarray(mask), jnp.asarray(pos), 200, head))
    assert valid.all()
    p1, p2 = np.take_along_axis(pos, first, 1), np.take_along_axis(pos, second, 1)
    assert (mask[np.arange(2)[:, None], first] & mask[np.arange(2)[:, None], second]).all()
    assert (first != second).all()
    np.testing.assert_array_equal(labels, (p2 == p1 + 1).astype(np.int32))
    if head == "sop":
        assert (np.abs(p2 - p1) == 1).all()
    assert 0.3 < labels.mean() < 0.7


def test_every_ordered_pair_is_scored_in_chunks_as_one_pair_at_a_time(tmp_path):
    smoke_inputs.write_checkpoint(tmp_path, "videomae", seed=4)
    c = configs.get_config(f"videomae,smoke,checkpoint={tmp_path}")
    model = task.make_model(c, nnx.Rngs(0))
    frames = model.normalise(jnp.asarray(np.random.default_rng(0).integers(
        0, 255, (2, 4, 32, 32, 3), dtype=np.uint8)))
    got = np.asarray(model.all_pair_logits(frames, 5))  # 12 pairs in chunks of 5
    for i in range(4):
        for j in range(4):
            if i == j:
                assert (got[:, i, j] == 0).all()
                continue
            want = model.pair_logits(frames[:, i], frames[:, j], train=False)
            np.testing.assert_allclose(got[:, i, j], np.asarray(want), rtol=1e-5, atol=1e-6)
    clip = np.asarray(model.pair_clips(frames[:, 0], frames[:, 1]))
    assert clip.shape == (2, 4, 32, 32, 3)  # num_frames 4: 2 of frame i, then 2 of frame j
    np.testing.assert_array_equal(clip[:, 1], np.asarray(frames[:, 0]))
    np.testing.assert_array_equal(clip[:, 2], np.asarray(frames[:, 1]))

"""Movie101's RNL grounding model (vnr.benchmarks.movie101.rnl) against upstream's PyTorch
code (yuezih/Movie101 `CNCLIP+RNL/RNL/models_/gcn_final.py`).

Golden files (tests/golden/make_rnl.py, run by hand with torch): a tiny random model saved as
upstream's runner saves it, three samples built by upstream's loader, its eval-mode outputs
and losses, and the full-size state dict's {key: shape} from train.sh's settings."""

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.benchmarks.movie101 import rnl
from vnr.models.encoders.loading import CheckpointError
from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "rnl"
META = json.loads((GOLDEN / "meta.json").read_text())
TINY = META["tiny"]
CFG = rnl.RNLConfig(clip_dim=TINY["frame_dim"], face_dim=TINY["face_dim"],
                    word_dim=TINY["word_dim"], width=TINY["d_model"], heads=TINY["num_heads"],
                    attn_layers=TINY["num_attn_layers"], dropout=TINY["dropout"])
TOL = 1e-5


@pytest.fixture(scope="module")
def io() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def model() -> rnl.RNL:
    return rnl.from_checkpoint(GOLDEN / "rnl.pth", CFG)


def inputs(io: dict, cfg: rnl.RNLConfig = CFG) -> dict:
    frames = io["frames"]
    return dict(clips=frames[..., :cfg.clip_dim], clip_mask=io["frame_mask"],
                words=io["words"], word_mask=io["word_mask"],
                faces=frames[..., cfg.clip_dim:] if cfg.face_dim else None,
                portraits=io["face_feats"] if cfg.portraits else None,
                portrait_mask=io["face_mask"] if cfg.portraits else None)


def close(name: str, got, want, tol: float = TOL) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    diff = float(np.abs(got - want).max())
    print(f"{name}: max |diff| {diff:.3g} (max |ref| {np.abs(want).max():.3g})")
    assert diff <= tol * max(1.0, float(np.abs(want).max())), (name, diff)


def test_forward_matches_upstream(model, io):
    out = nnx.jit(lambda m, x: m(**x))(model, inputs(io))
    for name in ("video", "query", "attended", "fused", "scores", "boxes"):
        close(name, out[name], io[name])
    # the masked scores are upstream's sigmoid x label_mask (illegal proposals exactly 0)
    assert np.all(np.asarray(out["scores"])[io["label_mask"] == 0] == 0)


def test_targets_match_upstream_loader(io):
    n = io["frames"].shape[1]
    y, legal, keep = rnl.targets(io["gt"], n, CFG.anchors)
    close("score targets", y, io["label"])
    np.testing.assert_array_equal(np.broadcast_to(legal, y.shape), io["label_mask"] == 1)
    np.testing.assert_array_equal(np.asarray(keep), io["adj_mat"] > 0)


def test_loss_matches_upstream(model, io):
    @nnx.jit
    def losses(m, x, gt):  # the forward and both losses: one program
        out = m(**x)
        return rnl.loss(out, gt, CFG, train=False), rnl.loss(out, gt, CFG, train=True)

    eval_loss, train_loss = losses(model, inputs(io), io["gt"])
    close("loss (eval)", eval_loss, io["loss_eval"])
    # upstream's training-mode loss with every dropout rate at 0: the regression term on
    # the adj_mat > 0 proposals only
    close("loss (train)", train_loss, io["loss_train"])


def test_full_size_key_set():
    """The model train.sh builds: every upstream tensor but the unused `tran_face`."""
    want = {k.removeprefix("module."): tuple(v)
            for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}
    got = rnl.upstream_shapes(rnl.RNLConfig())
    spare = {k for k in want if k.startswith(rnl.UNUSED_PREFIXES)}
    assert spare == {"sentence_encoder.tran_face.weight", "sentence_encoder.tran_face.bias"}
    assert got == {k: v for k, v in want.items() if k not in spare}
    assert sum(np.prod(s) for s in got.values()) == 30_970_380  # read (tran_face: 262,656 more)


def test_ablations_build_and_load(io):
    """f_v off reads no `video_encoder.tran`; f_t off changes only the query."""
    tensors = read_torch_checkpoint(GOLDEN / "rnl.pth")
    for cfg in (dataclasses.replace(CFG, face_dim=0), dataclasses.replace(CFG, portraits=False),
                dataclasses.replace(CFG, face_dim=0, portraits=False)):
        arrays = rnl.match(tensors, cfg, "rnl.pth")
        assert ("video_encoder.tran.kernel" in arrays) == bool(cfg.face_dim)
        m = rnl.RNL(cfg, nnx.Rngs(0))
        out = nnx.jit(lambda m, x: m(**x))(m, inputs(io, cfg))
        width = io["words"].shape[1] + (io["face_feats"].shape[1] if cfg.portraits else 0)
        assert out["query"].shape == (3, width, cfg.width)
        assert np.isfinite(np.asarray(out["boxes"])).all()
    with pytest.raises(ValueError, match="faces missing"):
        rnl.RNL(CFG, nnx.Rngs(0))(**{**inputs(io), "faces": None})


def test_checkpoint_errors():
    tensors = read_torch_checkpoint(GOLDEN / "rnl.pth")
    bad = dict(tensors)
    del bad["module.co2.linears_re.1.0.bias"]
    with pytest.raises(CheckpointError, match=r"^x: missing key 'co2\.linears_re\.1\.0\.bias'"):
        rnl.match(bad, CFG, "x")
    bad = {**tensors, "module.extra.weight": np.zeros(3, np.float32)}
    with pytest.raises(CheckpointError, match="unexpected key 'extra.weight'"):
        rnl.match(bad, CFG, "x")
    with pytest.raises(CheckpointError, match=r"fc_reg\.bias' has shape \(8,\), RNL expects \(6,\) "
                       r"\(and 3 more problems\)$"):
        rnl.match(tensors, dataclasses.replace(CFG, anchors=(8, 16, 32)), "x")


def test_train_step_runs(model, io):
    """A jitted training-mode gradient (dropout on) is finite and reaches every parameter."""
    x = inputs(io)

    @nnx.jit
    def grad(m, x):
        def f(m):
            out = m(**x, train=True, rngs=nnx.Rngs(dropout=1))
            return rnl.loss(out, io["gt"], CFG, train=True)
        return nnx.value_and_grad(f)(m)

    value, g = grad(model, x)
    assert float(value) != pytest.approx(float(io["loss_train"]), abs=1e-6)  # dropout on
    leaves = jax.tree.leaves(g)
    assert np.isfinite(float(value)) and all(bool(jnp.isfinite(v).all()) for v in leaves)
    assert all(float(jnp.abs(v).max()) > 0 for v in leaves)


def test_portrait_fc_reads_tran_face(io):
    """§5.2's FC on the portraits is upstream's defined-but-unused `tran_face`."""
    tensors = read_torch_checkpoint(GOLDEN / "rnl.pth")
    cfg = dataclasses.replace(CFG, portrait_fc=True, portrait_dim=TINY["portrait_dim"])
    arrays = rnl.match(tensors, cfg, "rnl.pth")
    np.testing.assert_array_equal(arrays["sentence_encoder.tran_face.kernel"],
                                  tensors["module.sentence_encoder.tran_face.weight"].T)
    m = rnl.RNL(cfg, nnx.Rngs(0))
    nnx.update(m, nnx.state(rnl.from_checkpoint(GOLDEN / "rnl.pth", cfg), nnx.Param))
    words = io["words"].shape[1]
    got = np.asarray(nnx.jit(lambda m, x: m(**x)["query"])(m, inputs(io))[:, words:])
    want = io["face_feats"] @ arrays["sentence_encoder.tran_face.kernel"] + arrays[
        "sentence_encoder.tran_face.bias"]
    close("portrait tokens through tran_face", got, want)


def test_window_model_and_box_scoring():
    """`WindowRNL` on a tng_data-shaped batch, and upstream's box evaluation."""
    from vnr.benchmarks.movie101 import tng

    cfg = dataclasses.replace(CFG, portrait_fc=True, portrait_dim=5)
    b, n = 2, 72
    rng = np.random.default_rng(0)
    batch = {"clips": rng.normal(size=(b, n, CFG.clip_dim)).astype(np.float32),
             "faces": rng.normal(size=(b, n, 3, 2)).astype(np.float32),
             "tokens": np.array([[5, 9, 3] + [0] * 7, [7] * 10], np.int32),
             "portraits": rng.normal(size=(b, 3, 5)).astype(np.float32),
             "portrait_mask": np.array([[1, 1, 0], [0, 0, 0]], bool)}
    m = rnl.WindowRNL(cfg, 32, nnx.Rngs(0))
    out = nnx.jit(lambda m, x: m(x))(m, batch)
    assert out["boxes"].shape == (b, n * 4, 2) and out["query"].shape == (b, 13, CFG.width)
    # index boxes: rounded half to even, starts >= 0, ends <= n - 1
    np.testing.assert_array_equal(rnl.index_boxes(np.array([[-1.5, 2.5], [3.5, 80.0]]), n),
                                  [[0, 2], [4, n - 1]])
    gt = np.array([[10, 20], [0, 5]])
    props, legal = rnl.proposals(n, CFG.anchors)
    boxes = np.broadcast_to(props, (b, *props.shape)).copy()
    boxes[:, 0] = gt  # proposal 0 refined exactly onto the ground truth, scored best
    scores = np.zeros((b, len(props)))
    scores[:, 0] = 1.0
    got = tng.score_boxes(scores, boxes, gt, n)
    assert got["R@1,IoU@0.7"] == 100.0 and got["narrations"] == 2
    assert 0 < got["random_R@1,IoU@0.1"] < 100


def test_release_row_configs():
    """Table 5's RNL / IA-Net rows: upstream's model and train.sh's settings (real data)."""
    from configs.movie101 import tng as tng_config
    from vnr.benchmarks.movie101 import tng

    want = {"release": (1536, True), "release,no_portraits": (1536, False),
            "release,no_faces": (0, True), "release,no_faces,no_portraits": (0, False)}
    for args, (face_dim, portraits) in want.items():
        c = tng_config.get_config(f"v1,{args}")
        cfg = tng.release_config(c)
        assert cfg == rnl.RNLConfig(face_dim=face_dim, portraits=portraits, portrait_fc=True)
        assert (c.data.window, c.data.n_clips, c.data.max_tokens, c.data.max_roles) == (
            200, 200, 80, 3)
        assert c.data.s3d_only and c.data.index_gt
        assert (c.batch_size, c.lr, c.optimizer, c.weight_decay, c.warmup_steps, c.grad_clip,
                c.epochs) == (64, 8e-4, "adamw", 1e-7, 300, 0.0, 15)

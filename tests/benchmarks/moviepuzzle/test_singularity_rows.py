"""MoviePuzzle's Singularity rows (Table 1 "Singularity +fusion": task
moviepuzzle.singularity_pairs; Table 4 "Singularity" / "+reordering": task
moviepuzzle.singularity_synopsis) on the golden tiny checkpoint (tests/golden/singularity,
made with upstream's own classes): the wrappers compute what `Singularity` itself computes,
inputs as upstream prepares them, one-line errors, and the row configs end to end."""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs.moviepuzzle import singularity_pairs as pair_configs
from configs.moviepuzzle import singularity_synopsis as syn_configs
from vnr import train
from vnr.benchmarks.moviepuzzle import singularity_inputs as inputs
from vnr.benchmarks.moviepuzzle import singularity_pairs as pairs
from vnr.benchmarks.moviepuzzle import singularity_synopsis as synopsis
from vnr.benchmarks.moviepuzzle import smoke_inputs
from vnr.models.encoders import singularity as sg
from vnr.models.encoders import tokenizers

PT = smoke_inputs.GOLDEN_SINGULARITY
TEXTS = ["a bag", "cab", "", "hi, dad"]  # a few WordPieces each in the tiny vocab


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> str:
    return str(smoke_inputs.tiny_bert_vocab(tmp_path_factory.mktemp("vocab")))


@pytest.fixture(scope="module")
def reference() -> sg.Singularity:
    return sg.from_checkpoint(PT)


def _load(model: nnx.Module, ref: sg.Singularity) -> None:
    """The checkpoint's parameters into `model.encoder` (everything but `temp`)."""
    state = nnx.state(ref, nnx.Param)
    state = nnx.State({k: v for k, v in state.items() if k not in ("temp", "itm_head")})
    nnx.update(model.encoder, state)


def _frames(seed: int, *lead: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (*lead, 16, 16, 3), dtype=np.uint8)


def test_pair_logits_are_singularity_fusing_the_pair(vocab, reference):
    """A pair (i, j) is Singularity's fused [CLS] of the 2-frame video (i, j) over the
    tokenizer's own pair encoding "[CLS] u_i [SEP] u_j [SEP]", then the head."""
    c = pair_configs.get_config(f"smoke,checkpoint={PT},tokenizer={vocab}")
    c.data.max_tokens = 12  # a pair: 23 tokens, within the tiny model's 24 positions
    model = pairs.make_model(c, nnx.Rngs(0))
    _load(model, reference)
    tok = tokenizers.load_tokenizer(vocab)
    ids, mask = tokenizers.encode(vocab, TEXTS, c.data.max_tokens)
    first, second = _frames(0, 4), _frames(1, 4)
    order = np.array([1, 3, 0, 2])  # the second utterance of each pair
    length = 2 * c.data.max_tokens - 1
    enc = tok(TEXTS, [TEXTS[k] for k in order], padding="max_length", max_length=length,
              truncation=False)
    pair_ids, pair_mask = np.asarray(enc["input_ids"]), np.asarray(enc["attention_mask"])
    # the utterances are short enough here for the tokenizer's pair input to be ours exactly
    assert (mask.sum(1) < c.data.max_tokens).all()
    video = (np.stack([first, second], 1).astype(np.float32) / 255 - 0.5) / 0.5

    @nnx.jit
    def fused(model, reference, first, second, ids, mask, video, pair_ids, pair_mask):
        got = model.pair_logits(inputs.normalise(first), inputs.normalise(second), ids, mask,
                                ids[order], mask[order], train=False)
        cls = reference.pair_cls(video, pair_ids, pair_mask, deterministic=True)
        return got, model.head(cls), pairs.pair_text(ids, mask, ids[order], mask[order])

    got, want, (ours_ids, ours_mask) = fused(model, reference, first, second, ids, mask,
                                             video, pair_ids, pair_mask)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(ours_ids) * np.asarray(ours_mask),
                                  pair_ids * pair_mask)
    np.testing.assert_array_equal(np.asarray(ours_mask), pair_mask.astype(bool))

    # every ordered pair of a clip, in chunks, is the same pair scored alone
    frames, ids, mask = _frames(2, 1, 4), ids[None], mask[None]
    every = nnx.jit(lambda m, f, t, k: m.all_pair_logits(inputs.normalise(f), t, k, 5))
    all_ = np.asarray(every(model, frames, ids, mask))

    @nnx.jit
    def alone(model, frames, ids, mask, i, j):  # one program for every pair (i, j)
        x = inputs.normalise(frames)
        return model.pair_logits(x[:, i], x[:, j], ids[:, i], mask[:, i], ids[:, j],
                                 mask[:, j], train=False)

    for i in range(4):
        for j in range(4):
            if i == j:
                assert (all_[:, i, j] == 0).all()
                continue
            one = alone(model, frames, ids, mask, i, j)
            np.testing.assert_allclose(all_[:, i, j], np.asarray(one), rtol=1e-5, atol=1e-6)


def test_synopsis_scores_are_singularity_retrieval_scores(vocab, reference):
    c = syn_configs.get_config(f"smoke,checkpoint={PT},tokenizer={vocab}")
    model = synopsis.make_model(c, nnx.Rngs(0))
    _load(model, reference)
    assert float(model.temp[...]) == pytest.approx(float(reference.temp[...]))
    frames = _frames(3, 4, 3)
    ids, mask = tokenizers.encode(vocab, TEXTS, c.data.synopsis_tokens)
    norm = (frames.astype(np.float32) / 255 - 0.5) / 0.5

    @nnx.jit
    def embeds(model, reference, frames, ids, mask, norm):  # one program for all of them
        video, text = model.embed(frames, ids, mask, train=False)
        want_t = reference.text_embed(ids, mask, deterministic=True)
        # upstream's score at evaluation: mean over frames of per-frame cosine similarities
        frame_feats = reference.frame_embeds(reference.encode_video(norm, deterministic=True)[1])
        return (video, text, reference.video_embed(norm, deterministic=True), want_t,
                jnp.einsum("btd,sd->bts", frame_feats, want_t).mean(1))

    video, text, want_v, want_t, per_frame = map(np.asarray, embeds(model, reference, frames,
                                                                    ids, mask, norm))
    np.testing.assert_allclose(video, want_v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(text, want_t, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(video @ text.T, per_frame, atol=1e-6)


def _upstream_middle(num_frames: int, vlen: int) -> list[int]:
    """jayleicn/singularity dataset/video_utils.get_frame_indices(sample="middle")."""
    acc_samples = min(num_frames, vlen)
    intervals = np.linspace(start=0, stop=vlen, num=acc_samples + 1).astype(int)
    ranges = [(interv, intervals[idx + 1] - 1) for idx, interv in enumerate(intervals[:-1])]
    frame_indices = [(x[0] + x[1]) // 2 for x in ranges]
    if len(frame_indices) < num_frames:
        padded = [frame_indices[-1]] * num_frames
        padded[:len(frame_indices)] = frame_indices
        frame_indices = padded
    return frame_indices


def test_frames_and_sampling_are_upstreams():
    for n in range(1, 25):
        for k in (1, 4, 12):
            assert synopsis.middle_indices(n, k).tolist() == _upstream_middle(k, n), (n, k)
    levels = np.arange(256, dtype=np.uint8)  # upstream: x.float().div(255.), Normalize(0.5, 0.5)
    want = (levels.astype(np.float32) / np.float32(255) - np.float32(0.5)) / np.float32(0.5)
    np.testing.assert_allclose(np.asarray(inputs.normalise(jnp.asarray(levels))), want,
                               rtol=0, atol=1e-7)
    import io

    from PIL import Image

    img = Image.fromarray(_frames(4)[:, :, :].repeat(3, 0).repeat(5, 1))  # 48 x 80, not square
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    got = inputs.resize(buf.getvalue(), 16)
    np.testing.assert_array_equal(got, np.asarray(img.resize((16, 16), Image.BICUBIC)))


def _one_line(c) -> str:
    with pytest.raises(train.ConfigError) as e:
        train.setup(c)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_bad_inputs_are_one_line_before_anything_compiles(vocab, tmp_path, monkeypatch):
    def no_model(config, rngs):
        raise AssertionError("validate must stop the run before the model is built")

    monkeypatch.setattr(pairs, "make_model", no_model)
    monkeypatch.setattr(synopsis, "make_model", no_model)

    def cfg(module, extra="", **data):
        c = module.get_config(f"smoke{extra}")
        c.data.data_dir = str(tmp_path / "tfds")
        c.data.update(data)
        return c

    ok = f",checkpoint={PT},tokenizer={vocab}"
    assert "model.checkpoint is empty" in _one_line(cfg(pair_configs, f",tokenizer={vocab}"))
    missing = tmp_path / "nope.pth"
    assert "no such file" in _one_line(cfg(pair_configs, f",checkpoint={missing},tokenizer=x"))
    assert "data.tokenizer is empty" in _one_line(cfg(syn_configs, f",checkpoint={PT}"))
    assert "set data.image_size=16" in _one_line(cfg(pair_configs, ok, image_size=224))
    assert "positions" in _one_line(cfg(pair_configs, ok, max_tokens=16))  # 31 > 24
    assert "positions" in _one_line(cfg(syn_configs, ok, synopsis_tokens=25))
    big = tmp_path / "big"
    big.mkdir()
    (big / "vocab.txt").write_text("\n".join([*smoke_inputs.TINY_VOCAB, "extra"]) + "\n")
    assert "51 tokens" in _one_line(cfg(pair_configs, f",checkpoint={PT},tokenizer={big}"))
    not_pth = tmp_path / "x.pth"
    not_pth.write_bytes(b"not a checkpoint")
    assert f"model.checkpoint='{not_pth}'" in _one_line(
        cfg(pair_configs, f",checkpoint={not_pth},tokenizer={vocab}"))


# Table 1's row trained with the checkpoint loaded, and Table 4's +reordering starting from
# it: tests/reproduce/test_smoke_moviepuzzle.py::test_singularity_rows_run_end_to_end.


@pytest.mark.e2e  # builds the corpus and scores it
def test_singularity_zero_shot_scores_every_test_clip(vocab, tmp_path):
    """Table 4's zero-shot scoring (no row runs it: the paper reports no number) evaluates
    the checkpoint as loaded on every test clip."""
    c = syn_configs.get_config(f"smoke,checkpoint={PT},tokenizer={vocab},zero_shot")
    c.data.data_dir, c.select.metric = str(tmp_path / "tfds"), ""
    out = train.run(c, str(tmp_path / "zero_shot"))
    for split in ("test_in_domain", "test_out_domain"):
        assert out[split]["clips"] == 10
        assert 0 <= out[split]["r1"] <= out[split]["r5"] <= out[split]["r10"] <= 1
    assert Path(tmp_path / "zero_shot" / "results.json").is_file()

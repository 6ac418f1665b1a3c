"""M2M100 / NLLB-200 (`vnr.models.encoders.m2m100`) against transformers' PyTorch
`M2M100ForConditionalGeneration` (golden files from tests/golden/make_m2m100.py: a tiny random
model saved as the hub's pytorch_model.bin, its logits and its greedy and beam `generate`
outputs with a forced first token, on a model that never ends a sentence and on one that
does), and the key set of transformers' class at nllb-200-distilled-600M's sizes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from vnr.models.encoders import loading, m2m100
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "m2m100"


@pytest.fixture(scope="module")
def golden():
    with np.load(GOLDEN / "io.npz") as f:
        io = dict(f)
    return m2m100.from_pretrained(GOLDEN), io


def test_logits_match_transformers(golden) -> None:
    model, io = golden
    enc = np.asarray(model.encode(io["input_ids"], io["attention_mask"]))
    real = io["attention_mask"].astype(bool)
    np.testing.assert_allclose(enc[real], io["encoder_last_hidden_state"][real], atol=2e-6)
    logits = np.asarray(model(io["input_ids"], io["attention_mask"], io["decoder_input_ids"]))
    diff = float(np.abs(logits - io["logits"]).max())
    print(f"logits: max |diff| {diff:.3g} (max |ref| {np.abs(io['logits']).max():.3g})")
    assert diff <= 1e-6


@pytest.mark.parametrize("fixture", ["", "eos"])
@pytest.mark.parametrize("beams,key", [(1, "greedy"), (3, "beam")])
def test_generate_matches_transformers(beams, key, fixture) -> None:
    """Greedy and 3-beam search (summed log-probabilities: transformers' length_penalty 0)
    with the forced first token give transformers' sequences (its start token dropped;
    max_length 12 counts it): on the tiny model that never ends a sentence, and on `eos/`,
    where </s> ends rows at different steps and ranks second elsewhere (an </s> outside
    the best K candidates must not end a hypothesis: beam 1 is exactly greedy)."""
    d = GOLDEN / fixture
    with np.load(d / "io.npz") as f:
        io = dict(f)
    meta = json.loads((GOLDEN / "meta.json").read_text())
    seqs, lengths = m2m100.generate(m2m100.from_pretrained(d), io["input_ids"],
                                    io["attention_mask"], max_len=11, beam_size=beams,
                                    forced_bos=meta["forced_bos"])
    want = io[key][:, 1:]  # transformers stops once every row has ended: pad the rest
    want = np.pad(want, [(0, 0), (0, 11 - want.shape[1])], constant_values=1)
    np.testing.assert_array_equal(seqs, want)
    ends = [int(np.argmax(r == 2)) + 1 if (r == 2).any() else 11 for r in want]
    np.testing.assert_array_equal(lengths, ends)
    assert (seqs[:, 0] == meta["forced_bos"]).all()
    if fixture:
        assert len(set(ends)) >= 3 and max(ends) < 11  # rows end at different steps


def test_full_size_key_set_is_nllb_600m() -> None:
    """Every parameter the port builds at nllb-200-distilled-600M's sizes is a key of the
    published layout with its shape, and every key left is a tied copy of `model.shared`."""
    full = json.loads((GOLDEN / "full_keys.json").read_text())
    meta = json.loads((GOLDEN / "meta.json").read_text())["full"]
    fields = {f for f in m2m100.M2M100Config.__dataclass_fields__}
    cfg = m2m100.M2M100Config(**{k: v for k, v in meta.items() if k in fields})
    shapes = loading.param_shapes(lambda r: m2m100.M2M100(cfg, rngs=r))
    got = {loading.torch_key(n, "model."): list(loading.torch_shape(n, s))
           for n, s in shapes.items()}
    assert {k: full[k] for k in got} == got
    assert sorted(set(full) - set(got)) == sorted(
        ["lm_head.weight", "model.encoder.embed_tokens.weight",
         "model.decoder.embed_tokens.weight"])
    assert sum(int(np.prod(s)) for s in got.values()) == 615_073_792


def test_bad_checkpoints_are_one_line(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="config.json: no such file"):
        m2m100.from_pretrained(tmp_path)
    bad = tmp_path / "bart"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "bart"}))
    with pytest.raises(CheckpointError, match="model_type='bart', not 'm2m_100'"):
        m2m100.from_pretrained(bad)
    # a checkpoint whose decoder has a layer fewer than its config says
    short = tmp_path / "short"
    shutil.copytree(GOLDEN, short)
    cfg = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps(dict(cfg, decoder_layers=4)))
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin.*decoder.layers.3"):
        m2m100.from_pretrained(short)


def test_a_sharded_bin_checkpoint_loads_the_same_model(golden, tmp_path) -> None:
    """nllb-200-3.3B ships its weights as pytorch_model-0000k-of-0000n.bin shards and an index
    (save_pretrained's layout): read without torch, the same logits as the one-file model;
    a missing shard or a tensor its shard lacks is one line naming it."""
    from vnr.benchmarks.sc2st.smoke_inputs import save_torch
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    model, io = golden
    tensors = read_torch_checkpoint(GOLDEN / "pytorch_model.bin")
    keys = sorted(tensors)
    shards = {"pytorch_model-00001-of-00002.bin": keys[: len(keys) // 2],
              "pytorch_model-00002-of-00002.bin": keys[len(keys) // 2:]}
    d = tmp_path / "sharded"
    d.mkdir()
    shutil.copy(GOLDEN / "config.json", d / "config.json")
    for name, part in shards.items():
        save_torch({k: np.asarray(tensors[k], np.float32) for k in part}, d / name)
    index = {"metadata": {}, "weight_map": {k: n for n, part in shards.items() for k in part}}
    (d / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    sharded = m2m100.from_pretrained(d)
    args = (io["input_ids"], io["attention_mask"], io["decoder_input_ids"])
    np.testing.assert_array_equal(np.asarray(sharded(*args)), np.asarray(model(*args)))
    index["weight_map"]["model.extra.weight"] = "pytorch_model-00001-of-00002.bin"
    (d / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="model.extra.weight is not in its shard "
                                              "pytorch_model-00001-of-00002.bin"):
        m2m100.from_pretrained(d)
    (d / "pytorch_model-00002-of-00002.bin").unlink()
    with pytest.raises(CheckpointError, match="its shard pytorch_model-00002-of-00002.bin "
                                              "is missing"):
        m2m100.from_pretrained(d)

"""Table 5's RNL rows read BERT-base-Chinese word features (§5.3): the tokenizer's ids in the
windows, the frozen tower's last-layer states as RNL's words, one line for a bad checkpoint."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs.movie101 import tng as tng_config
from vnr import pretrained, sharding
from vnr.benchmarks.movie101 import rnl, tng, tng_bert, tng_data


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> str:
    return tng_bert.smoke_checkpoint(tmp_path_factory.mktemp("bert") / "bert")


def _config(bert: str, args: str = "release,smoke"):
    c = tng_config.get_config(args)
    c.data.text_encoder = bert
    return c


def test_release_rows_need_the_checkpoint_and_freeze_it():
    c = tng_config.get_config("v1,release")
    assert c.data.text_encoder == tng_bert.REQUIRED and c.frozen == (tng_bert.FROZEN,)
    with pytest.raises(ValueError, match="bert-base-chinese directory"):
        tng_bert.check(c)
    hashed = tng_config.get_config("v1,release,hashed_words")
    assert hashed.data.text_encoder == "" and hashed.frozen == ()
    tng_bert.check(hashed)  # nothing to check
    with pytest.raises(ValueError, match="add release"):
        tng_config.get_config("v1,hashed_words")


def test_words_are_the_frozen_towers_last_layer_states(bert):
    c = _config(bert)
    tng_bert.check(c)
    model = tng.make_model(c, nnx.Rngs(0))
    assert isinstance(model, rnl.WindowRNL) and tng.release_config(c).word_dim == 16
    narration = "老李走进房间" * 16  # 96 characters: longer than the 80 words RNL reads
    batch = tng_data.query_tokens(narration, c.data.text_encoder, c.data.vocab_size,
                                  c.data.max_tokens, tng_bert.tokens(c))
    ids, mask = batch["tokens"], batch["token_mask"]
    assert ids.shape == mask.shape == (96,) and mask.all()  # the tower reads it whole
    assert ids[0] == 2 and ids[1:3].tolist() == tng_bert.encode(bert, "老李", 4)[0][1:3].tolist()
    words, got_mask = model.words({k: jnp.asarray(v)[None] for k, v in batch.items()})
    want = model.text(jnp.asarray(ids)[None], jnp.asarray(mask, jnp.int32)[None],
                      deterministic=True).last_hidden_state[:, :c.data.max_tokens]
    assert words.shape == (1, 80, 16)  # its first 80 states, as upstream cuts its features
    np.testing.assert_array_equal(np.asarray(words), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got_mask)[0], mask[:80])
    # the hook loads the checkpoint into `text`, and the optimizer never sees it
    assert tng.pretrained(c) == {"text": (bert, None)}
    trainable = nnx.state(model, pretrained.trainable(c))
    paths = [".".join(map(str, p)) for p, _ in nnx.to_flat_state(trainable)]
    assert paths and not any(p.startswith("text.") for p in paths)
    assert pretrained.check_frozen(nnx.state(model), c, root=()) > 0


def test_bad_text_encoders_are_one_line(bert, tmp_path):
    from vnr.models.encoders.testing import write_tiny_checkpoint

    c = _config(bert)
    c.frozen = ()
    with pytest.raises(ValueError, match=r"config.frozen must hold 'text\\\\.'"):
        tng_bert.check(c)
    c = _config(bert)
    c.data.text_encoder_tokens = 200
    with pytest.raises(ValueError, match="exceeds the 128 positions of data.text_encoder"):
        tng_bert.check(c)
    c.data.text_encoder_tokens = 40  # below the 80 words RNL reads
    with pytest.raises(ValueError, match="below data.max_tokens=80"):
        tng_bert.check(c)
    c = _config(bert, "smoke")  # not the release RNL: BERT ids would index a hashed table
    c.data.text_encoder = bert
    with pytest.raises(ValueError, match="read by the RNL rows only"):
        tng_bert.check(c)
    (tmp_path / "no_vocab").mkdir()
    for f in ("config.json", "model.safetensors"):
        (tmp_path / "no_vocab" / f).write_bytes((pathlib.Path(bert) / f).read_bytes())
    with pytest.raises(ValueError, match="no_vocab'?: no usable tokenizer"):
        tng_bert.check(_config(str(tmp_path / "no_vocab")))
    c = _config(bert)
    c.data.text_encoder = tng_bert.REQUIRED
    with pytest.raises(ValueError, match="bert-base-chinese directory"):
        tng.make_model(c, nnx.Rngs(0))  # never a silent hashed-word model
    write_tiny_checkpoint("albert", tmp_path / "albert", "flax-safetensors")
    with pytest.raises(ValueError, match="is a 'albert' checkpoint"):
        tng_bert.check(_config(str(tmp_path / "albert")))


def test_the_hook_loads_the_checkpoint_into_the_tower(bert):
    from safetensors.numpy import load_file

    c = _config(bert)
    model = tng.make_model(c, nnx.Rngs(0))
    state = nnx.state(model)
    mesh = sharding.make_mesh((1, 1), devices=jax.devices()[:1])
    loaded = pretrained.load(state, sharding.state_shardings(state, mesh), tng.pretrained(c),
                             root=(), say=lambda m: None)
    flat = {".".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(loaded)}
    table = load_file(str(pathlib.Path(bert) / "model.safetensors"))
    key = next(k for k in table if k.endswith("word_embeddings.weight"))
    got = next(v for k, v in flat.items() if k.startswith("text.") and "word_embeddings" in k)
    np.testing.assert_array_equal(np.asarray(got), table[key])

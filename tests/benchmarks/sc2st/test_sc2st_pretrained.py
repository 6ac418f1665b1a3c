"""Sc2St's pretrained text encoder: built from config.json by make_model, weights through
the trainer's `pretrained` hook (never read inside make_model)."""

import numpy as np
from flax import nnx

from configs.sc2st.main import get_config
from vnr import train
from vnr.benchmarks.sc2st import storyboard as task
from vnr.models import encoders
from vnr.models.encoders.testing import write_tiny_checkpoint


def _params(state: nnx.State, under: str) -> dict[str, np.ndarray]:
    """Model parameters below `under` of a (model, optimizer) state, by local dotted name."""
    return {".".join(map(str, p[2:])): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(state)
            if p[:2] == (0, under) and isinstance(v, nnx.Param)}


def test_text_encoder_weights_arrive_through_the_hook(tmp_path):
    write_tiny_checkpoint("bert", tmp_path / "bert", "pt-safetensors", seed=5)
    cfg = get_config("smoke")
    cfg.model.text_encoder = str(tmp_path / "bert")
    assert task.pretrained(cfg) == {"text": (str(tmp_path / "bert"), None)}
    assert task.pretrained(get_config("smoke")) == {}  # scratch encoders load nothing
    ref, _, _ = encoders.load_pretrained(tmp_path / "bert")
    want = {".".join(map(str, p)): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(nnx.state(ref, nnx.Param))}
    loaded = _params(train.setup(cfg, load_pretrained=True).state, "text")
    fresh = _params(train.setup(cfg, load_pretrained=False).state, "text")
    assert loaded.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(loaded[k], want[k], err_msg=k)
    assert not np.array_equal(fresh["embeddings.word_embeddings.embedding"],
                              want["embeddings.word_embeddings.embedding"])

"""M-SYMON's text encoder: a checkpoint is built from config.json by make_model, its
weights come through the trainer's `pretrained` hook (never read inside make_model) and the
pipeline tokenizes with its own tokenizer (`data.tokenizer`)."""

import numpy as np
import pytest
from flax import nnx

from configs.msymon.main import get_config
from vnr import train
from vnr.benchmarks.msymon import alignment as task
from vnr.benchmarks.msymon import data, frames
from vnr.models import encoders
from vnr.models.encoders.testing import write_tiny_checkpoint


def _params(state: nnx.State, under: str) -> dict[str, np.ndarray]:
    """Model parameters below `under` of a (model, optimizer) state, by local dotted name."""
    return {".".join(map(str, p[2:])): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(state)
            if p[:2] == (0, under) and isinstance(v, nnx.Param)}


def _write_word_tokenizer(directory) -> None:
    """A BERT-style word-level tokenizer of two of the generated corpus's words (others
    become [UNK])."""
    frames.write_tokenizer(directory, ["the", "and"], bert=True)


def test_text_encoder_weights_arrive_through_the_hook(tmp_path, monkeypatch):
    write_tiny_checkpoint("bert", tmp_path / "bert", "pt-safetensors", seed=7)
    cfg = get_config("smoke")
    cfg.data.data_dir = str(tmp_path / "tfds")
    assert task.pretrained(cfg) == {}  # hashed-token encoders load nothing
    cfg.model.text_encoder = str(tmp_path / "bert")
    assert task.pretrained(cfg) == {"text": (str(tmp_path / "bert"), None)}
    with pytest.raises(ValueError, match="needs its own tokenizer: set data.tokenizer"):
        task.validate(cfg)  # the data side must tokenize with the checkpoint's tokenizer
    cfg.data.tokenizer = cfg.model.text_encoder
    _write_word_tokenizer(tmp_path / "bert")
    nan = np.full(2, np.nan, np.float32)
    rec = {"video_id": "v", "language": "en", "sentences": ["the cat and", "and the"],
           "begin": np.array([0, 2], np.float32), "end": np.array([2, 4], np.float32),
           "matched": np.ones(2, bool), "narr_begin": nan, "narr_end": nan, "duration": 4.0,
           "features": np.zeros((4, cfg.data.dim), np.float32)}
    enc = data._encode(cfg.data, 4, 3, False).random_map(rec, np.random.default_rng(0))
    assert enc["tokens"][:2, :5].tolist() == [[2, 4, 1, 5, 3], [2, 5, 4, 3, 0]]
    assert enc["token_mask"][:2].sum(-1).tolist() == [5, 4] and not enc["token_mask"][2].any()
    monkeypatch.setattr(task, "validate", lambda config: None)  # the dataset is built
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

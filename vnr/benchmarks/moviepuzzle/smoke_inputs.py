"""Tiny random VideoMAE / TimeSformer checkpoints in the Hugging Face layout, for the video
pair rows at smoke scale (`rows.toml` [smoke.vars]) and their tests.

A directory as `save_pretrained` writes it for the hub's classes: `config.json` (the
class's `model_type`, `architectures` and sizes) and a PyTorch-layout `model.safetensors`
written with the `safetensors` numpy API. Keys are the state-dict keys of
`VideoMAEForPreTraining` (`videomae.` prefix, plus the pre-training head's `mask_token` and
`encoder_to_decoder.weight`, which the loader skips) or `TimesformerForVideoClassification`
(`timesformer.` prefix, plus `classifier.*`); linear weights (out, in), the VideoMAE
tubelet conv (C, 3, t, p, p), TimeSformer's patch conv (C, 3, p, p). Every value is random
(LayerNorm affines and biases too), so a wrong mapping cannot hide. No torch, no
transformers. Optionally a `preprocessor_config.json` as VideoMAEImageProcessor saves it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from vnr.models.encoders import loading, timesformer, videomae

TINY = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, hidden_act="gelu", qkv_bias=True,
            initializer_range=0.02, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
FAMILIES: dict[str, dict[str, Any]] = {
    "videomae": dict(cls=videomae.VideoMAEConfig, model=videomae.VideoMAEModel,
                     prefix="videomae.", architectures=["VideoMAEForPreTraining"],
                     config=dict(TINY, num_frames=4, tubelet_size=2, layer_norm_eps=1e-12,
                                 use_mean_pooling=False, norm_pix_loss=True,
                                 decoder_hidden_size=16, decoder_num_hidden_layers=1,
                                 decoder_num_attention_heads=2,
                                 decoder_intermediate_size=32)),
    "timesformer": dict(cls=timesformer.TimesformerConfig, model=timesformer.TimesformerModel,
                        prefix="timesformer.",
                        architectures=["TimesformerForVideoClassification"],
                        config=dict(TINY, num_frames=4, layer_norm_eps=1e-6,
                                    attention_type="divided_space_time", drop_path_rate=0.0,
                                    id2label={"0": "LABEL_0", "1": "LABEL_1"},
                                    label2id={"LABEL_0": 0, "LABEL_1": 1})),
}


def to_torch_layout(name: str, x: np.ndarray) -> np.ndarray:
    """An NNX parameter in the layout torch stores it (`loading.torch_shape`)."""
    if not name.endswith(".kernel"):
        return np.ascontiguousarray(x)
    return np.ascontiguousarray(x.transpose(x.ndim - 1, x.ndim - 2, *range(x.ndim - 2)))


def write_checkpoint(directory: str | Path, family: str, *, seed: int = 0,
                     preprocessor: dict[str, Any] | None = None,
                     **overrides: Any) -> dict[str, np.ndarray]:
    """Writes a tiny random `family` checkpoint to `directory` (created); `overrides`
    change config.json values (e.g. num_frames=8); `preprocessor`, when given, is written
    as preprocessor_config.json. Returns {NNX parameter name: array in the NNX layout} of
    the encoder, what a correct loader must produce."""
    from safetensors.numpy import save_file

    spec = FAMILIES[family]
    raw = dict(spec["config"], **overrides)
    cfg = spec["cls"](**{k: v for k, v in raw.items()
                         if k in spec["cls"].__dataclass_fields__})
    shapes = loading.param_shapes(lambda rngs: spec["model"](cfg, rngs=rngs))
    rng = np.random.default_rng(seed)
    nnx_arrays, tensors = {}, {}
    for name, shape in sorted(shapes.items()):
        base = 1.0 if name.endswith(".scale") else 0.0
        x = (base + rng.normal(size=shape) * (0.2 if len(shape) < 2 else 0.05)).astype(
            np.float32)
        nnx_arrays[name] = x
        tensors[loading.torch_key(name, spec["prefix"])] = to_torch_layout(name, x)
    h = cfg.hidden_size
    if family == "videomae":  # the pre-training head the loader leaves
        tensors["mask_token"] = rng.normal(size=(1, 1, raw["decoder_hidden_size"])).astype(
            np.float32)
        tensors["encoder_to_decoder.weight"] = rng.normal(
            size=(raw["decoder_hidden_size"], h)).astype(np.float32)
    else:
        tensors["classifier.weight"] = rng.normal(size=(len(raw["id2label"]), h)).astype(
            np.float32)
        tensors["classifier.bias"] = np.zeros(len(raw["id2label"]), np.float32)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    config = dict(raw, model_type=family, architectures=spec["architectures"],
                  torch_dtype="float32", transformers_version="4.46.3")
    (d / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    if preprocessor is not None:
        (d / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    return nnx_arrays


def tiny_videomae(path: Path) -> Path:
    """[smoke.vars] VIDEOMAE: a tiny VideoMAE pre-training checkpoint at `path`."""
    write_checkpoint(path, "videomae", seed=1)
    return path


def tiny_timesformer(path: Path) -> Path:
    """[smoke.vars] TIMESFORMER: a tiny TimeSformer (4 frames) checkpoint at `path`."""
    write_checkpoint(path, "timesformer", seed=2)
    return path


GOLDEN_SINGULARITY = (Path(__file__).resolve().parents[3] / "tests" / "golden" / "singularity"
                      / "singularity_tiny_pt.pth")
TINY_VOCAB = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
              *"abcdefghijklmnopqrstuvwxyz", *(f"##{c}" for c in "abcdefghijklmnopqrs"))


def tiny_singularity(path: Path) -> Path:
    """[smoke.vars] SINGULARITY: the golden tiny pre-training checkpoint (upstream's own
    classes, tests/golden/singularity: 16 px frames, a 50-token vocabulary) copied to
    `path`."""
    import shutil

    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(GOLDEN_SINGULARITY, path)
    return path


def tiny_bert_vocab(path: Path) -> Path:
    """[smoke.vars] BERT: a WordPiece vocab.txt of 50 entries (read as BERT-uncased), inside
    the golden tiny Singularity's vocabulary."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    return path

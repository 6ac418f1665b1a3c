"""Chinese-CLIP's own training checkpoints (OFA-Sys/Chinese-CLIP, `cn_clip/training/main.py`)
as the Hugging Face layout that `chinese_clip.match` reads.

Movie101 publishes its Movie101-fine-tuned ChineseCLIP-huge this way
(`cnclip-huge-movie101.pt`): `torch.save({"epoch", "step", "name", "state_dict",
"optimizer"})` with the state dict of the DistributedDataParallel-wrapped `cn_clip.clip.model.
CLIP` (keys under `module.`). That model is OpenAI CLIP's `VisualTransformer` plus a BERT in
transformers' own names:

    visual.conv1 / class_embedding / positional_embedding / ln_pre / ln_post / proj [W, P]
    visual.transformer.resblocks.<i>.attn.in_proj_{weight,bias} (q, k, v stacked),
      attn.out_proj, ln_1, mlp.c_fc, mlp.c_proj, ln_2
    bert.embeddings.* / bert.encoder.layer.<i>.*  (no pooler: upstream's is commented out)
    text_projection [Dt, P], logit_scale

`to_hugging_face` renames them as transformers' `ChineseCLIPModel` names its parameters
(`vision_model.encoder.layers.<i>.self_attn.{q,k,v}_proj`, `layer_norm1`, `mlp.fc1`, ...,
`visual_projection.weight` = proj.T, `text_projection.weight` = text_projection.T), so the
one matcher checks shapes and completeness; an unknown key is one `CheckpointError` line. The
architecture (sizes, heads, positions) comes from a Hugging Face config, e.g. the
`OFA-Sys/chinese-clip-vit-huge-patch14` directory for the huge checkpoint: the training file
holds no config. The optimizer state beside the weights is not read.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from vnr.models.encoders.loading import CheckpointError

_VISION = {  # OpenAI CLIP names -> transformers' CLIPVisionTransformer names
    "conv1.weight": "embeddings.patch_embedding.weight",
    "class_embedding": "embeddings.class_embedding",
    "positional_embedding": "embeddings.position_embedding.weight",
    "ln_pre.weight": "pre_layrnorm.weight", "ln_pre.bias": "pre_layrnorm.bias",
    "ln_post.weight": "post_layernorm.weight", "ln_post.bias": "post_layernorm.bias",
}
_BLOCK = {"attn.out_proj": "self_attn.out_proj", "ln_1": "layer_norm1", "ln_2": "layer_norm2",
          "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2"}
_RESBLOCK = re.compile(r"^transformer\.resblocks\.(\d+)\.(.+)\.(weight|bias)$")


def to_hugging_face(state: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """A cn_clip CLIP state dict (with or without `module.`) in transformers' names."""
    out: dict[str, np.ndarray] = {}
    for key, value in state.items():
        name = key.removeprefix("module.")
        if name.startswith("bert."):
            out["text_model." + name.removeprefix("bert.")] = value
        elif name == "text_projection":
            out["text_projection.weight"] = np.ascontiguousarray(value.T)
        elif name == "logit_scale":
            out[name] = value
        elif name == "visual.proj":
            out["visual_projection.weight"] = np.ascontiguousarray(value.T)
        elif name.startswith("visual."):
            out.update(_vision(name.removeprefix("visual."), value, where, key))
        else:
            raise CheckpointError(f"{where}: {key!r} is not a key of Chinese-CLIP's CLIP "
                                  "(visual.*, bert.*, text_projection, logit_scale)")
    return out


def _vision(name: str, value: np.ndarray, where: str, key: str) -> dict[str, np.ndarray]:
    if name in _VISION:
        return {"vision_model." + _VISION[name]: value}
    m = re.match(r"^transformer\.resblocks\.(\d+)\.attn\.in_proj_(weight|bias)$", name)
    if m:
        i, kind = m.groups()
        if value.shape[0] % 3:
            raise CheckpointError(f"{where}: {key!r} has {value.shape[0]} rows, not q, k and v "
                                  "stacked")
        q, k, v = np.split(value, 3, axis=0)
        base = f"vision_model.encoder.layers.{i}.self_attn."
        return {f"{base}{p}_proj.{kind}": np.ascontiguousarray(x)
                for p, x in zip("qkv", (q, k, v), strict=True)}
    m = _RESBLOCK.match(name)
    if m and m.group(2) in _BLOCK:
        i, part, kind = m.groups()
        return {f"vision_model.encoder.layers.{i}.{_BLOCK[part]}.{kind}": value}
    raise CheckpointError(f"{where}: {key!r} is not a key of Chinese-CLIP's ViT (the ResNet "
                          "image towers are not ported)")


def read_tensors(path: str | Path) -> tuple[dict[str, np.ndarray], str]:
    """(transformers-named tensors, where) of a Chinese-CLIP training checkpoint, read
    without torch; its pickled bookkeeping beside the tensors is skipped."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    state = read_torch_checkpoint(path, foreign="skip")  # unwraps `state_dict`
    if not {"visual.class_embedding", "text_projection"} <= {
            k.removeprefix("module.") for k in state}:
        raise CheckpointError(f"{path}: no visual.class_embedding / text_projection: not a "
                              "Chinese-CLIP training checkpoint (a Hugging Face directory is "
                              "the `chinese_clip` port)")
    return to_hugging_face(state, str(path)), str(path)

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
    bert.embeddings.* / bert.encoder.layer.<i>.*  (a `bert.pooler.*` of files saved before
      upstream commented the pooler out is dropped, as its own loaders drop it)
    text_projection [Dt, P], logit_scale

`to_hugging_face` renames them as transformers' `ChineseCLIPModel` names its parameters
(`vision_model.encoder.layers.<i>.self_attn.{q,k,v}_proj`, `layer_norm1`, `mlp.fc1`, ...,
`visual_projection.weight` = proj.T, `text_projection.weight` = text_projection.T), so the
one matcher checks shapes and completeness; an unknown key is one `CheckpointError` line. The
architecture (sizes, heads, positions) comes from a Hugging Face config, e.g. the
`OFA-Sys/chinese-clip-vit-huge-patch14` directory for the huge checkpoint: the training file
holds no config (and a wrong head count there keeps every shape: it must be that model's).
The optimizer state beside the weights is not read (`torch_checkpoint` reads only the
weights' storages).
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
        if name.startswith("bert.pooler."):
            continue  # saved before upstream commented the pooler out; its loaders drop it
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
    raise CheckpointError(f"{where}: {key!r} is not a key of Chinese-CLIP's ViT")


def read_tensors(path: str | Path) -> tuple[dict[str, np.ndarray], str]:
    """(transformers-named tensors, where) of a Chinese-CLIP training checkpoint, read
    without torch; its pickled bookkeeping beside the tensors is skipped."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    if Path(path).is_dir():
        raise CheckpointError(f"{path}: a directory; a Hugging Face Chinese-CLIP directory is "
                              "read by the `chinese_clip` port (Movie101: model.cnclip)")
    state = read_torch_checkpoint(path, foreign="skip")  # unwraps `state_dict`
    _check_names(state, path)
    return to_hugging_face(state, str(path)), str(path)


def read_shapes(path: str | Path) -> tuple[dict[str, np.ndarray], str]:
    """As `read_tensors`, but every tensor a zero-stride view of its shape, from the file's
    pickle alone (its storages are not read): what a config check needs, in seconds."""
    from vnr.models.encoders.torch_checkpoint import read_torch_shapes

    if Path(path).is_dir():
        return read_tensors(path)  # the directory's one-line error
    shapes = read_torch_shapes(path, foreign="skip")
    state = {k: np.broadcast_to(np.zeros((), np.float32), s) for k, s in shapes.items()}
    _check_names(state, path)
    return to_hugging_face(state, str(path)), str(path)


def _check_names(state: dict, path: str | Path) -> None:
    names = {k.removeprefix("module.") for k in state}
    if any(n.startswith(("visual.attnpool.", "visual.layer1.")) for n in names):
        raise CheckpointError(f"{path}: a ResNet Chinese-CLIP (visual.attnpool.*): only the ViT "
                              "image towers are ported")
    if not {"visual.class_embedding", "text_projection"} <= names:
        raise CheckpointError(f"{path}: no visual.class_embedding / text_projection (first keys: "
                              f"{', '.join(sorted(state)[:2])}): not a Chinese-CLIP training "
                              "checkpoint")

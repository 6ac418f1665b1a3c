"""Writes tests/golden/chinese_clip/: Hugging Face Chinese-CLIP (`ChineseCLIPModel`, the
PyTorch class of `transformers`) outputs for tests/models/test_chinese_clip.py. Run by hand
with torch and transformers==4.46.3 (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_chinese_clip.py

The published checkpoint (OFA-Sys/chinese-clip-vit-huge-patch14: ViT-H/14 image tower and
RoBERTa-wwm-ext-large text tower, 958M parameters, `pytorch_model.bin` on the hub's main
branch) is far too big for the repository, so the fixture is the same class at toy widths
(text: hidden 32, vision: hidden 40, 2 layers each, 4 heads, 16x16 images, patch 4,
vocabulary 100, projection 24; the widths differ so a swapped or untransposed matrix cannot
fit), every parameter random at a scale where each part matters (LayerNorm affines, biases,
class / position embeddings, `logit_scale`), saved with `save_pretrained(...,
safe_serialization=False)` as `pytorch_model.bin` like the hub's file (the tests write the
safetensors copy themselves).

`preprocessor_config.json` is the hub file's settings (CLIP mean / std, resized to the
square, no centre crop) at 16 px. Inputs: random normalised images in upstream's layout
[B, 3, H, W] (the tests transpose to channels-last) and token ids with a padded row
(attention mask 0 at its tail). Outputs: the normalised `text_embeds` / `image_embeds`,
`logits_per_image`, the unnormalised `get_text_features` / `get_image_features`, both
towers' last hidden states and the vision pooler output. `full_keys.json` is the full-size
checkpoint's {key: shape}, built on torch's meta device from the published config values
below (no weights are made or saved).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from torch import nn
from transformers import ChineseCLIPConfig, ChineseCLIPImageProcessor, ChineseCLIPModel

HERE = Path(__file__).resolve().parent / "chinese_clip"
IMAGES, TEXTS, LENGTH = 2, 3, 7
# Published sizes of OFA-Sys/chinese-clip-vit-huge-patch14 (the original repository's
# ViT-H-14.json and RoBERTa-wwm-ext-large-chinese.json; the hub config.json carries them).
HUGE = dict(
    projection_dim=1024,
    text_config=dict(vocab_size=21128, hidden_size=1024, num_hidden_layers=24,
                     num_attention_heads=16, intermediate_size=4096, hidden_act="gelu",
                     max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12,
                     pad_token_id=0),
    vision_config=dict(hidden_size=1280, num_hidden_layers=32, num_attention_heads=16,
                       intermediate_size=5120, patch_size=14, image_size=224,
                       hidden_act="quick_gelu", layer_norm_eps=1e-5, projection_dim=1024),
)
TINY = dict(
    projection_dim=24,
    text_config=dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64, hidden_act="gelu",
                     max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-12,
                     pad_token_id=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    vision_config=dict(hidden_size=40, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, patch_size=4, image_size=16,
                       hidden_act="quick_gelu", layer_norm_eps=1e-5, projection_dim=24),
)


def randomise(net: nn.Module, gen: torch.Generator) -> None:
    """Linears/convs ~ N(0, 1/fan_in), LayerNorm scales 1 + N(0, 0.2^2), other vectors and
    the embeddings ~ N(0, 0.1^2) (tables N(0, 0.5^2)); logit_scale = log(20)."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name == "logit_scale":
                p.fill_(float(np.log(20.0)))
            elif "embedding" in name and p.ndim == 2:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p[0].numel()))
            elif "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    net.eval()


def meta_keys(config: ChineseCLIPConfig) -> dict[str, list[int]]:
    """{key: shape} of the full-size state dict, built on the meta device (no memory)."""
    with torch.device("meta"):
        model = ChineseCLIPModel(config)
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    HERE.mkdir(exist_ok=True)
    cfg = ChineseCLIPConfig(**TINY, attn_implementation="eager")
    net = ChineseCLIPModel(cfg)
    randomise(net, gen)
    size = TINY["vision_config"]["image_size"]
    pixels = torch.randn((IMAGES, 3, size, size), generator=gen)
    ids = torch.randint(1, TINY["text_config"]["vocab_size"], (TEXTS, LENGTH), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0  # a padded row: its pads are id 0 and masked out
    ids[1, 4:] = 0
    with torch.no_grad():
        out = net(input_ids=ids, pixel_values=pixels, attention_mask=mask)
        text_features = net.get_text_features(input_ids=ids, attention_mask=mask)
        image_features = net.get_image_features(pixel_values=pixels)
    arrays = dict(
        pixel_values=pixels.numpy(), input_ids=ids.numpy(), attention_mask=mask.numpy(),
        text_embeds=out.text_embeds.numpy(), image_embeds=out.image_embeds.numpy(),
        logits_per_image=out.logits_per_image.numpy(),
        text_features=text_features.numpy(), image_features=image_features.numpy(),
        text_hidden=out.text_model_output.last_hidden_state.numpy(),
        vision_hidden=out.vision_model_output.last_hidden_state.numpy(),
        vision_pooled=out.vision_model_output.pooler_output.numpy(),
    )
    net.save_pretrained(HERE / "tiny", safe_serialization=False)
    # The hub's processor settings (no centre crop: frames are resized to the square).
    ChineseCLIPImageProcessor(size={"height": size, "width": size}, do_center_crop=False,
                              resample=3).save_pretrained(HERE / "tiny")
    np.savez_compressed(HERE / "io.npz", **arrays)
    full = meta_keys(ChineseCLIPConfig(**HUGE))
    (HERE / "full_keys.json").write_text(json.dumps(full, indent=0))
    stats = {k: [float(np.abs(v).max()), float(v.std())] for k, v in arrays.items()
             if v.dtype == np.float32}
    meta = dict(transformers=transformers.__version__, torch=torch.__version__, tiny=TINY,
                full=HUGE, outputs=stats)
    (HERE / "meta.json").write_text(json.dumps(meta, indent=1))
    for p in sorted(HERE.rglob("*")):
        if p.is_file():
            print(f"{p.relative_to(HERE.parent)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()

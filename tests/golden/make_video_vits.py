"""Writes tests/golden/videomae/ and tests/golden/timesformer/: Hugging Face VideoMAE and
TimeSformer (the PyTorch classes of `transformers`) outputs for tests/models/test_videomae.py
and tests/models/test_timesformer.py. Run by hand with torch and transformers==4.46.3 (never
imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_video_vits.py

The published checkpoints (MCG-NJU/videomae-base: `VideoMAEForPreTraining`, 94M encoder
parameters plus a decoder; facebook/timesformer-base-finetuned-k400:
`TimesformerForVideoClassification`, 121M) are too big for the repository, so the fixtures are
the same classes at toy widths (hidden 32, 2 layers, 4 heads, 32x32 frames, patch 8), every
parameter random at a scale where each part matters (LayerNorm affines, biases, the zero-
initialised time embeddings included), saved with `save_pretrained` as the hub stores them:

* videomae/pretraining/: `VideoMAEForPreTraining` (use_mean_pooling false: final
  `videomae.layernorm`; decoder, `encoder_to_decoder`, `mask_token` left for the loader to
  skip), `model.safetensors`;
* videomae/classification/: `VideoMAEForVideoClassification` (use_mean_pooling true:
  `fc_norm` over the token mean; `classifier`), `pytorch_model.bin` (safe_serialization
  False), the torch-pickle path of the loader;
* timesformer/: `TimesformerForVideoClassification` (divided space-time attention, 3 frames,
  drop path off), `model.safetensors`.

Inputs are random normalised clips in upstream's layout [B, T, 3, H, W] (the tests transpose
to channels-last). `full_keys.json` is the full-size checkpoint's {key: shape}, built on
torch's meta device from the published config values below (no weights are made or saved).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from torch import nn
from transformers import (
    TimesformerConfig,
    TimesformerForVideoClassification,
    VideoMAEConfig,
    VideoMAEForPreTraining,
    VideoMAEForVideoClassification,
)

HERE = Path(__file__).resolve().parent
BATCH = 2
# Published config values (config.json of the hub checkpoints; transformers' conversion
# scripts build them as the class defaults plus these fields).
VIDEOMAE_BASE = dict(image_size=224, patch_size=16, num_channels=3, num_frames=16,
                     tubelet_size=2, hidden_size=768, num_hidden_layers=12,
                     num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                     layer_norm_eps=1e-12, qkv_bias=True, use_mean_pooling=False,
                     decoder_num_attention_heads=6, decoder_hidden_size=384,
                     decoder_num_hidden_layers=4, decoder_intermediate_size=1536,
                     norm_pix_loss=True)
TIMESFORMER_BASE_K400 = dict(image_size=224, patch_size=16, num_channels=3, num_frames=8,
                             hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                             intermediate_size=3072, hidden_act="gelu", layer_norm_eps=1e-6,
                             qkv_bias=True, attention_type="divided_space_time",
                             drop_path_rate=0.0, num_labels=400)
TINY_VIDEOMAE = dict(image_size=32, patch_size=8, num_channels=3, num_frames=4, tubelet_size=2,
                     hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, hidden_act="gelu", layer_norm_eps=1e-12,
                     qkv_bias=True, decoder_num_attention_heads=2, decoder_hidden_size=16,
                     decoder_num_hidden_layers=1, decoder_intermediate_size=32)
TINY_TIMESFORMER = dict(image_size=32, patch_size=8, num_channels=3, num_frames=3,
                        hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, hidden_act="gelu", layer_norm_eps=1e-6,
                        qkv_bias=True, attention_type="divided_space_time", num_labels=3)


def randomise(net: nn.Module, gen: torch.Generator) -> None:
    """Linears/convs ~ N(0, 1/fan_in), LayerNorm scales 1 + N(0, 0.2^2), other vectors and
    the cls / position / time embeddings ~ N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim >= 2 and not name.endswith(("_token", "_embeddings")):
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p[0].numel()))
            elif "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    net.eval()


def clip(cfg: dict, gen: torch.Generator) -> torch.Tensor:
    """A random normalised clip in upstream's layout [B, T, 3, H, W]."""
    s = cfg["image_size"]
    return torch.randn((BATCH, cfg["num_frames"], 3, s, s), generator=gen)


def stats(x: torch.Tensor) -> list[float]:
    return [float(x.abs().max()), float(x.std())]


def meta_keys(model_cls: type, config: transformers.PretrainedConfig) -> dict[str, list[int]]:
    """{key: shape} of the full-size state dict, built on the meta device (no memory).
    TimeSformer's constructor calls `.item()` on a tensor (its drop-path schedule), which the
    meta device refuses: then the model is built on the CPU with each parameter moved to
    meta as it is registered (one layer's weights at a time are ever allocated)."""
    try:
        with torch.device("meta"):
            model = model_cls(config)
    except RuntimeError:
        register = nn.Module.register_parameter

        def to_meta(self: nn.Module, name: str, p: nn.Parameter | None) -> None:
            register(self, name, None if p is None else nn.Parameter(p.to("meta")))

        nn.Module.register_parameter = to_meta
        try:
            model = model_cls(config)
        finally:
            nn.Module.register_parameter = register
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def videomae(gen: torch.Generator) -> None:
    out = HERE / "videomae"
    arrays, outputs = {}, {}
    pixels = clip(TINY_VIDEOMAE, gen)
    arrays["pixel_values"] = pixels.numpy()
    # Pre-training checkpoint (the published base): final LayerNorm, decoder to skip.
    cfg = VideoMAEConfig(**TINY_VIDEOMAE, use_mean_pooling=False, attn_implementation="eager")
    pre = VideoMAEForPreTraining(cfg)
    randomise(pre, gen)
    with torch.no_grad():
        hidden = pre.videomae(pixels).last_hidden_state
    arrays["pretraining_hidden"] = hidden.numpy()
    outputs["pretraining_hidden"] = stats(hidden)
    pre.save_pretrained(out / "pretraining", safe_serialization=True)
    # Fine-tuned layout: mean pooling + fc_norm, saved as a torch pickle.
    cfg = VideoMAEConfig(**TINY_VIDEOMAE, use_mean_pooling=True, num_labels=3,
                         attn_implementation="eager")
    cls = VideoMAEForVideoClassification(cfg)
    randomise(cls, gen)
    with torch.no_grad():
        hidden = cls.videomae(pixels).last_hidden_state
        pooled = cls.fc_norm(hidden.mean(1))
    arrays.update(classification_hidden=hidden.numpy(), classification_pooled=pooled.numpy())
    outputs.update(classification_hidden=stats(hidden), classification_pooled=stats(pooled))
    cls.save_pretrained(out / "classification", safe_serialization=False)
    np.savez_compressed(out / "io.npz", **arrays)
    full = meta_keys(VideoMAEForPreTraining, VideoMAEConfig(**VIDEOMAE_BASE))
    (out / "full_keys.json").write_text(json.dumps(full, indent=0))
    meta = dict(transformers=transformers.__version__, torch=torch.__version__,
                tiny=TINY_VIDEOMAE, full=VIDEOMAE_BASE, outputs=outputs)
    (out / "meta.json").write_text(json.dumps(meta, indent=1))


def timesformer(gen: torch.Generator) -> None:
    out = HERE / "timesformer"
    pixels = clip(TINY_TIMESFORMER, gen)
    cfg = TimesformerConfig(**TINY_TIMESFORMER)
    net = TimesformerForVideoClassification(cfg)
    randomise(net, gen)
    with torch.no_grad():
        hidden = net.timesformer(pixels).last_hidden_state
        logits = net(pixels).logits
    net.save_pretrained(out, safe_serialization=True)
    np.savez_compressed(out / "io.npz", pixel_values=pixels.numpy(), hidden=hidden.numpy(),
                        logits=logits.numpy())
    full = meta_keys(TimesformerForVideoClassification,
                     TimesformerConfig(**TIMESFORMER_BASE_K400))
    (out / "full_keys.json").write_text(json.dumps(full, indent=0))
    meta = dict(transformers=transformers.__version__, torch=torch.__version__,
                tiny=TINY_TIMESFORMER, full=TIMESFORMER_BASE_K400,
                outputs=dict(hidden=stats(hidden), logits=stats(logits)))
    (out / "meta.json").write_text(json.dumps(meta, indent=1))


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    videomae(gen)
    timesformer(gen)
    for d in ("videomae", "timesformer"):
        for p in sorted((HERE / d).rglob("*")):
            if p.is_file():
                print(f"{p.relative_to(HERE)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()

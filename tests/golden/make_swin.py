"""Writes tests/golden/swin/: CCLM's Swin image tower (zengyan-97/CCLM
`models/swin_transformer.py`) and text encoder (`models/xbert.py`) outputs for
tests/models/test_swin.py. Run by hand with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_swin.py [--upstream DIR_WITH_models/]

Without --upstream the script copies upstream's files out of the mirrored git repository
(`git show HEAD:<path>`, default mirror below) into a temporary directory and imports them
from there, so no upstream code is committed here. Upstream's Swin imports three helpers
from timm (`DropPath`, `to_2tuple`, `trunc_normal_`); timm pulls in torchvision, so a
three-function stand-in package `timm` is written next to the copy (DropPath is the identity
in eval mode and the initialiser is overwritten below, so outputs do not depend on it).
Upstream's Swin also imports scipy (`pip install scipy`); the text part needs `transformers`
(xbert's imports; 4.46.3 works), without it only the image tower's fixture is written.

Fixture: a small Swin from upstream's class with CCLM's arguments (`build_vision_encoder`)
but 64x64 images, width 8, depths (2, 3, 2, 2), heads (1, 2, 4, 8), window 4, so stages 0
and 1 have shifted windows over several windows (masks), stage 2 is exactly one window (no
shift) and stage 3 (2x2) gets a window shrunk to the grid; random weights of a useful scale
(LayerNorm affine, position-bias tables, linear biases), saved as CCLM saves
(`torch.save({"model": state_dict, "config": ...})`, `.th`) with CCLM's prefixes, buffers
included, next to a few head tensors. Text: xbert's `BertForMaskedLM` (XLM-R style: pad 1,
one token type) with 4 layers, fusion_layer 2, run in `mode="text"`. `full_keys.json` is the
full-size Swin-B's {key: shape} as CCLM stores it (from `configs/config_swinB_224.json`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
from torch import nn

MIRROR = "/work/.mirror/zengyan-97+CCLM/repo"
OUT = Path(__file__).resolve().parent / "swin"
SMALL = dict(img_size=64, embed_dim=8, depths=[2, 3, 2, 2], num_heads=[1, 2, 4, 8],
             window_size=4)
TEXT = dict(vocab_size=40, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=20, type_vocab_size=1,
            pad_token_id=1, layer_norm_eps=1e-5, hidden_act="gelu", fusion_layer=2,
            encoder_width=64)
TIMM_STANDIN = '''
import collections.abc
import torch
from torch import nn


def to_2tuple(x):
    return tuple(x) if isinstance(x, collections.abc.Iterable) else (x, x)


def trunc_normal_(tensor, std=1.0):
    return nn.init.trunc_normal_(tensor, std=std, a=-2 * std, b=2 * std)


class DropPath(nn.Module):
    def __init__(self, p=0.0):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = torch.rand(x.shape[0], *([1] * (x.ndim - 1))) >= self.p
        return x * keep / (1 - self.p)
'''


def git_show(path: str) -> str:
    return subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:{path}"],
                          check=True, capture_output=True, text=True).stdout


def import_upstream(directory: str | None):
    tmp = Path(tempfile.mkdtemp(prefix="cclm_"))
    (tmp / "models").mkdir()
    (tmp / "models" / "__init__.py").write_text("")
    for name in ("swin_transformer.py", "xbert.py"):
        src = (Path(directory) / "models" / name).read_text() if directory else git_show(
            f"models/{name}")
        (tmp / "models" / name).write_text(src)
    (tmp / "timm" / "models").mkdir(parents=True)
    (tmp / "timm" / "__init__.py").write_text("")
    (tmp / "timm" / "models" / "__init__.py").write_text("")
    (tmp / "timm" / "models" / "layers.py").write_text(TIMM_STANDIN)
    swin_cfg = json.loads((Path(directory) / "configs" / "config_swinB_224.json").read_text()
                          if directory else git_show("configs/config_swinB_224.json"))
    sys.path.insert(0, str(tmp))
    from models import swin_transformer

    return swin_transformer, swin_cfg


def build_swin(module, img_size, embed_dim, depths, num_heads, window_size) -> nn.Module:
    """Upstream's SwinTransformer with the arguments CCLM's build_vision_encoder passes."""
    return module.SwinTransformer(
        img_size=img_size, patch_size=4, in_chans=3, embed_dim=embed_dim, depths=depths,
        num_heads=num_heads, window_size=window_size, mlp_ratio=4., qkv_bias=True,
        drop_rate=0.0, drop_path_rate=0.1, ape=False, patch_norm=True, use_checkpoint=False)


def randomise(net: nn.Module, gen: torch.Generator) -> None:
    """Weights at a scale where every part matters: linears ~ N(0, 1/fan_in), random
    biases and LayerNorm affines, position-bias tables ~ N(0, 1)."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("relative_position_bias_table"):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p[0].numel()))
            elif "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    net.eval()


def text_part(gen: torch.Generator, arrays: dict, outputs: dict) -> dict:
    """xbert's text encoder (tiny, random) -> its state dict under `text_encoder.`; its
    `mode="text"` output on padded ids goes to `arrays`."""
    from models import xbert

    cfg = xbert.BertConfig(**TEXT)
    mlm = xbert.BertForMaskedLM(cfg)
    randomise(mlm, gen)
    ids = np.array([[0, 5, 9, 33, 7, 2, 1, 1], [0, 12, 3, 25, 39, 18, 4, 2]], np.int64)
    mask = (ids != 1).astype(np.int64)
    with torch.no_grad():
        out = mlm.bert(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                       return_dict=True, mode="text").last_hidden_state
    arrays.update(text_ids=ids, text_mask=mask, text_hidden=out.numpy())
    outputs["text_hidden"] = [float(out.abs().max()), float(out.std())]
    return {f"text_encoder.{k}": v for k, v in mlm.state_dict().items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a CCLM checkout (holding models/ and configs/)")
    args = ap.parse_args()
    module, swin_cfg = import_upstream(args.upstream)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)

    full = build_swin(module, swin_cfg["image_res"], swin_cfg["embed_dim"], swin_cfg["depths"],
                      swin_cfg["num_heads"], swin_cfg["window_size"])
    keys = {f"vision_encoder.{k}": list(v.shape) for k, v in full.state_dict().items()}
    (OUT / "full_keys.json").write_text(json.dumps(keys, indent=0) + "\n")
    del full

    gen = torch.Generator().manual_seed(0)
    net = build_swin(module, **SMALL)
    randomise(net, gen)
    rng = np.random.default_rng(0)
    images = rng.standard_normal((2, 3, SMALL["img_size"], SMALL["img_size"])).astype(np.float32)
    with torch.no_grad():
        out = net(torch.from_numpy(images))
    arrays = {"images": images, "image_embeds": out.numpy()}
    outputs = {"image_embeds": [float(out.abs().max()), float(out.std())]}

    sd = OrderedDict((f"vision_encoder.{k}", v) for k, v in net.state_dict().items())
    width = net.num_features
    sd["vision_proj.weight"] = torch.randn(16, width, generator=gen)
    sd["vision_proj.bias"] = torch.zeros(16)
    sd["temp"] = torch.tensor(0.07)
    try:
        import transformers  # noqa: F401
        sd.update(text_part(gen, arrays, outputs))
    except ImportError:
        print("transformers is not installed: no text-tower fixture")
    config = {"use_swin": True, "image_res": SMALL["img_size"], "patch_size": 32,
              "vision_config": "small", "text_encoder": "data/xlm-roberta-large",
              "text_num_hidden_layers": TEXT["num_hidden_layers"], "embed_dim": 16,
              "temp": 0.07, "optimizer": {"opt": "adamW", "lr": 1e-4}}
    torch.save({"model": sd, "config": config}, OUT / "model_state_epoch_0.th")
    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"swin": SMALL, "text": TEXT, "torch": torch.__version__,
            "output_abs_max_std": outputs}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print(json.dumps(outputs, indent=1))


if __name__ == "__main__":
    main()

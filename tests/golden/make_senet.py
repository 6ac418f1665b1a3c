"""Writes tests/golden/senet/: Cadene's SENet (pretrained-models.pytorch
`pretrainedmodels/models/senet.py`) on small random weights, for tests/models/test_senet.py.
Run by hand with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_senet.py [--upstream DIR_WITH_senet.py]

Without --upstream the script copies `senet.py` out of the mirrored git repository (`git
show HEAD:pretrainedmodels/models/senet.py`, default mirror path below) into a temporary
directory and imports it from there, so no upstream code is committed here.

SENet-154 (115M parameters) is too big for the repository, so the fixture network is built
from upstream's own `SEBottleneck` and `SENet._make_layer` with narrow widths and the same
structure: the three-convolution stem (`input_3x3`), ceil-mode max-pool, grouped 3x3
convolutions, squeeze-and-excitation with reduction 16, 3x3 projection shortcuts in layers
2-4 and a 1x1 one in layer1, two blocks in layer1 (an identity shortcut) and one in the
others. Widths: stem 8, layer0 output 16, planes (8, 8, 16, 16), 8 groups (SENet-154: 64
groups, which would need planes >= 32). BN affine and running statistics random (eval-mode
BN exercised). Saved as Cadene's file is: a plain state dict, `torch.save` (zip format).

Inputs (uint8 RGB, normalised in float32 NumPy with the release's mean / std, as the test
does): `full`, 220 x 220, through upstream's `forward` (its fixed 7x7 average pool needs a
7x7 last map; 220 also makes the ceil-mode pool overhang); `odd`, 57 x 43, through upstream's
`features` then a global mean and `last_linear` (what vnr computes for any size).
`full_keys.json`: `senet154(pretrained=None)`'s state dict {key: shape}, built on the meta
device.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

# torch is no vnr dependency (see make_torch_checkpoint.py): imported by name.
torch = importlib.import_module("torch")
nn = torch.nn

MIRROR = "/work/.mirror/Cadene+pretrained-models.pytorch/repo"
OUT = Path(__file__).resolve().parent / "senet"
SMALL = {"layers": [2, 1, 1, 1], "planes": [8, 8, 16, 16], "groups": 8, "reduction": 16,
         "stem_width": 8, "inplanes": 16, "downsample_kernel_size": 3,
         "downsample_padding": 1, "num_classes": 10}
INPUTS = {"full": (1, 3, 220, 220), "odd": (2, 3, 57, 43)}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def import_upstream(directory: str | None):
    tmp = Path(tempfile.mkdtemp(prefix="senet_"))
    if directory:
        shutil.copy(Path(directory) / "senet.py", tmp / "senet.py")
    else:
        src = subprocess.run(["git", f"--git-dir={MIRROR}", "show",
                              "HEAD:pretrainedmodels/models/senet.py"],
                             check=True, capture_output=True, text=True).stdout
        (tmp / "senet.py").write_text(src)
    sys.path.insert(0, str(tmp))
    import senet

    return senet


def small_senet(senet, c: dict) -> nn.Module:
    """Upstream's SENet with narrow widths (its constructor hard-codes them), built from
    upstream's blocks and `_make_layer`; `features`, `logits` and `forward` are upstream's."""

    class SmallSENet(senet.SENet):
        def __init__(self):
            nn.Module.__init__(self)
            w, self.inplanes = c["stem_width"], c["inplanes"]
            self.layer0 = nn.Sequential(OrderedDict([
                ("conv1", nn.Conv2d(3, w, 3, stride=2, padding=1, bias=False)),
                ("bn1", nn.BatchNorm2d(w)), ("relu1", nn.ReLU(inplace=True)),
                ("conv2", nn.Conv2d(w, w, 3, stride=1, padding=1, bias=False)),
                ("bn2", nn.BatchNorm2d(w)), ("relu2", nn.ReLU(inplace=True)),
                ("conv3", nn.Conv2d(w, c["inplanes"], 3, stride=1, padding=1, bias=False)),
                ("bn3", nn.BatchNorm2d(c["inplanes"])), ("relu3", nn.ReLU(inplace=True)),
                ("pool", nn.MaxPool2d(3, stride=2, ceil_mode=True)),
            ]))
            for i, (n, planes) in enumerate(zip(c["layers"], c["planes"], strict=True)):
                first = i == 0
                setattr(self, f"layer{i + 1}", self._make_layer(
                    senet.SEBottleneck, planes=planes, blocks=n, stride=1 if first else 2,
                    groups=c["groups"], reduction=c["reduction"],
                    downsample_kernel_size=1 if first else c["downsample_kernel_size"],
                    downsample_padding=0 if first else c["downsample_padding"]))
            self.avg_pool = nn.AvgPool2d(7, stride=1)
            self.dropout = nn.Dropout(0.2)
            self.last_linear = nn.Linear(c["planes"][-1] * senet.SEBottleneck.expansion,
                                         c["num_classes"])

    return SmallSENet()


def randomise(net, gen) -> None:
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(0.5 + torch.rand(n, generator=gen))
                m.bias.copy_(0.2 * torch.randn(n, generator=gen))
                m.running_mean.copy_(0.2 * torch.randn(n, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(n, generator=gen))
            elif isinstance(m, nn.Conv2d) and m.bias is not None:  # SE gates: spread out
                m.bias.copy_(0.5 * torch.randn(m.out_channels, generator=gen))
    net.eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a directory holding upstream's senet.py")
    args = ap.parse_args()
    senet = import_upstream(args.upstream)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)

    with torch.device("meta"):
        full = senet.senet154(num_classes=1000, pretrained=None)
    keys = {k: list(v.shape) for k, v in full.state_dict().items()}
    (OUT / "full_keys.json").write_text(
        "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in keys.items())
        + "\n}\n")
    n_params = sum(p.numel() for p in full.parameters())

    gen = torch.Generator().manual_seed(0)
    net = small_senet(senet, SMALL)
    randomise(net, gen)
    torch.save(net.state_dict(), OUT / "senet_small.pth")

    rng = np.random.default_rng(0)
    arrays, outputs = {}, {}
    mean = np.array(MEAN, np.float32)[:, None, None]
    std = np.array(STD, np.float32)[:, None, None]
    for name, shape in INPUTS.items():
        u8 = rng.integers(0, 256, size=shape, dtype=np.uint8)
        x = torch.from_numpy((u8.astype(np.float32) / np.float32(255) - mean) / std)
        with torch.no_grad():
            fmap = net.features(x)
            if name == "full":
                assert fmap.shape[-2:] == (7, 7), fmap.shape
                pooled = net.avg_pool(fmap).flatten(1)
                logits = net(x)
            else:
                pooled = fmap.mean((2, 3))
                logits = net.last_linear(pooled)
        arrays[f"{name}_images"] = u8
        for k, v in {"pooled": pooled, "logits": logits}.items():
            arrays[f"{name}_{k}"] = v.numpy()
            outputs[f"{name}_{k}"] = [float(v.abs().max()), float(v.std())]
    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"small": SMALL, "inputs": INPUTS, "mean": MEAN, "std": STD,
            "torch": torch.__version__, "full_params": n_params,
            "small_params": sum(p.numel() for p in net.parameters()),
            "output_abs_max_std": outputs}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print(json.dumps(outputs, indent=1), f"full-size parameters {n_params}")


if __name__ == "__main__":
    main()

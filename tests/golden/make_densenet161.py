"""Writes tests/golden/densenet161/: torchvision's DenseNet on small random weights, saved the
way CSAIL's `densenet161_places365.pth.tar` is, for tests/models/test_densenet.py. Run by hand
with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_densenet161.py

The reference is torchvision's DenseNet (`torchvision/models/densenet.py` of torchvision
0.28.0: `_DenseLayer`, `_DenseBlock`, `_Transition`, `DenseNet`), used from torchvision when
it imports; otherwise (the CPU torch 2.13 scratch venv: PyPI's torchvision 0.28.0 wheel
fails to register its C++ ops against the CPU torch) the same four classes re-typed below,
module names and forward unchanged (drop-out and memory-efficient checkpointing left out:
inference with drop_rate 0).

The Places365 file format, from CSAILVision/places365 (`train_placesCNN.py`: the model is
wrapped in `torch.nn.DataParallel` and saved as `{'epoch', 'arch', 'state_dict',
'best_prec1'}`; `run_placesCNN_basic.py` strips `module.` before `load_state_dict`; trained
with PyTorch 0.2, whose torchvision named dense-layer modules `norm.1`, `relu.1`, `conv.1`,
...; BatchNorm had no `num_batches_tracked` yet): the fixture is written the same way,
legacy `torch.save` format at pickle protocol 2 (torch 0.2's default).

Fixture network: growth 8, blocks (1, 2, 2, 1), 16 initial features, bn_size 4, 365 classes,
BN affine and running statistics random (eval-mode BN exercised). `full_keys.json`: the
full-size DenseNet-161 Places365 state dict's {key: shape} in the file's naming, built on
the meta device. Inputs are uint8 images normalised with ImageNet's mean / std in float32
NumPy (the test does the same).
"""

from __future__ import annotations

import importlib
import json
import re
from collections import OrderedDict
from pathlib import Path

import numpy as np

# torch is no vnr dependency (see make_torch_checkpoint.py): imported by name.
torch = importlib.import_module("torch")
nn, F = torch.nn, torch.nn.functional

OUT = Path(__file__).resolve().parent / "densenet161"
SMALL = {"growth_rate": 8, "block_config": (1, 2, 2, 1), "num_init_features": 16,
         "bn_size": 4, "num_classes": 365}
FULL = {"growth_rate": 48, "block_config": (6, 12, 36, 24), "num_init_features": 96,
        "bn_size": 4, "num_classes": 365}
INPUTS = {"odd": (1, 3, 45, 61), "even": (2, 3, 64, 48)}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


# ---------------------------------------------------- torchvision 0.28.0's classes, re-typed
class _DenseLayer(nn.Module):
    def __init__(self, num_input_features, growth_rate, bn_size, drop_rate=0.0):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1,
                               stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1,
                               padding=1, bias=False)

    def forward(self, inputs):
        prev = [inputs] if isinstance(inputs, torch.Tensor) else inputs
        bottleneck = self.conv1(self.relu1(self.norm1(torch.cat(prev, 1))))
        return self.conv2(self.relu2(self.norm2(bottleneck)))


class _DenseBlock(nn.ModuleDict):
    _version = 2

    def __init__(self, num_layers, num_input_features, bn_size, growth_rate):
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", _DenseLayer(
                num_input_features + i * growth_rate, growth_rate, bn_size))

    def forward(self, init_features):
        features = [init_features]
        for _, layer in self.items():
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1,
                              stride=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    def __init__(self, growth_rate=32, block_config=(6, 12, 24, 16), num_init_features=64,
                 bn_size=4, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3,
                                bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
        ]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            block = _DenseBlock(num_layers, num_features, bn_size, growth_rate)
            self.features.add_module(f"denseblock{i + 1}", block)
            num_features = num_features + num_layers * growth_rate
            if i != len(block_config) - 1:
                trans = _Transition(num_features, num_features // 2)
                self.features.add_module(f"transition{i + 1}", trans)
                num_features = num_features // 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)

    def forward(self, x):
        out = F.relu(self.features(x), inplace=True)
        out = torch.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


def densenet_class():
    """torchvision's DenseNet when torchvision imports, else the re-typed one above."""
    try:
        from torchvision.models.densenet import DenseNet as Upstream

        return Upstream, "torchvision"
    except Exception:  # noqa: BLE001 - missing, or its C++ ops fail against this torch
        return DenseNet, "re-typed torchvision 0.28.0"


# ------------------------------------------------------------------ the Places365 layout
_MODERN = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))([12]\.(?:weight|bias|"
                     r"running_mean|running_var))$")


def places365_layout(sd: dict) -> OrderedDict:
    """A modern state dict as the PyTorch-0.2 DataParallel checkpoint names it."""
    out = OrderedDict()
    for k, v in sd.items():
        if k.endswith("num_batches_tracked"):
            continue
        m = _MODERN.match(k)
        out["module." + (f"{m[1]}.{m[2]}" if m else k)] = v
    return out


def randomise(net, gen) -> None:
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(0.5 + torch.rand(n, generator=gen))
                m.bias.copy_(0.2 * torch.randn(n, generator=gen))
                m.running_mean.copy_(0.2 * torch.randn(n, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(n, generator=gen))
            elif isinstance(m, nn.Linear):
                m.bias.copy_(0.1 * torch.randn(m.out_features, generator=gen))
    net.eval()


def main() -> None:
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    cls, source = densenet_class()

    with torch.device("meta"):
        full = cls(**FULL)
    keys = {k: list(v.shape) for k, v in places365_layout(full.state_dict()).items()}
    (OUT / "full_keys.json").write_text(
        "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in keys.items())
        + "\n}\n")
    n_params = sum(int(np.prod(v)) for k, v in keys.items() if "running" not in k)

    gen = torch.Generator().manual_seed(0)
    net = cls(**SMALL)
    randomise(net, gen)
    ckpt = {"epoch": 90, "arch": "densenet161", "state_dict": places365_layout(net.state_dict()),
            "best_prec1": 56.1}
    torch.save(ckpt, OUT / "densenet161_places365.pth.tar", _use_new_zipfile_serialization=False,
               pickle_protocol=2)

    rng = np.random.default_rng(0)
    arrays, outputs = {}, {}
    mean = np.array(MEAN, np.float32)[:, None, None]
    std = np.array(STD, np.float32)[:, None, None]
    for name, shape in INPUTS.items():
        u8 = rng.integers(0, 256, size=shape, dtype=np.uint8)
        x = torch.from_numpy((u8.astype(np.float32) / np.float32(255) - mean) / std)
        with torch.no_grad():
            fmap = F.relu(net.features(x))
            pooled = torch.flatten(F.adaptive_avg_pool2d(fmap, (1, 1)), 1)
            logits = net(x)
        arrays[f"{name}_images"] = u8
        for k, v in {"feature_map": fmap, "pooled": pooled, "logits": logits}.items():
            arrays[f"{name}_{k}"] = v.numpy()
            outputs[f"{name}_{k}"] = [float(v.abs().max()), float(v.std())]
    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"small": SMALL, "full": FULL, "inputs": INPUTS, "mean": MEAN, "std": STD,
            "reference": source, "torch": torch.__version__, "full_params": n_params,
            "output_abs_max_std": outputs}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print(f"reference: {source}; full-size parameters {n_params}")


if __name__ == "__main__":
    main()

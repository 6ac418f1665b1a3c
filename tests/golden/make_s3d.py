"""Writes tests/golden/s3d/: upstream S3D-G (antoine77340/S3D_HowTo100M `s3dg.py`) outputs
for tests/models/test_s3d.py. Run by hand with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_s3d.py [--upstream DIR_WITH_s3dg.py]

Without --upstream the script fetches nothing itself: it copies `s3dg.py` out of the mirrored
git repository (`git show HEAD:s3dg.py`, default mirror path below) into a temporary directory
and imports it from there, so no upstream code is committed here.

The full network (9.7M video parameters, plus a 66250x300 word table) is too big for the
repository, so the fixture network is upstream's own classes at 1/8 of every channel width
(every layer, pool and gate still present; the text tower shrunk to a 50-word list: 51 rows
with padding),
weights from torch's initialisers, batch-norm running statistics measured in train mode on
random clips then perturbed (so eval-mode BN is exercised), saved with `torch.save` in both
the zip and the legacy format. Inputs are uint8 frames (the test divides by 255 the same way);
the text tower's token ids and embeddings of a few sentences are saved too.
`full_keys.json` is the full-size state dict's {key: shape}.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

MIRROR = "/work/.mirror/antoine77340+S3D_HowTo100M/repo/.git"
OUT = Path(__file__).resolve().parent / "s3d"
DIVISOR = 8
# (name, shape [B, 3, T, H, W]): odd lengths make upstream's ceil-mode pools overhang on
# time (T=10: maxpool_4a and 5a), height and width (58, 50: maxpool_2a, 3a, 4a).
INPUTS = {"odd": (1, 3, 10, 58, 50), "even": (2, 3, 8, 32, 32)}
# The fixture's word list is w0..w49; unknown words, punctuation, case, apostrophes, an empty
# sentence and one of more than 16 known words (truncated).
SENTENCES = ["w3 w7 zzz", "W1, w2's w49 w0 w0!", "", "nothing known here", "w5's w6",
             " ".join(f"w{i}" for i in range(20))]


def import_upstream(directory: str | None):
    tmp = Path(tempfile.mkdtemp(prefix="s3dg_"))
    if directory:
        shutil.copy(Path(directory) / "s3dg.py", tmp / "s3dg.py")
    else:
        src = subprocess.run(["git", f"--git-dir={MIRROR}", "show", "HEAD:s3dg.py"],
                             check=True, capture_output=True, text=True).stdout
        (tmp / "s3dg.py").write_text(src)
    np.save(tmp / "dict.npy", np.array([f"w{i}" for i in range(50)]))
    sys.path.insert(0, str(tmp))
    import s3dg

    return s3dg, tmp / "dict.npy"


def small_s3d(s3dg, dict_path: Path, d: int) -> nn.Module:
    """Upstream's S3D with every width divided by `d`, built from upstream's own blocks
    (S3D's constructor hard-codes the widths); `forward` is upstream's."""

    class SmallS3D(s3dg.S3D):
        def __init__(self):
            nn.Module.__init__(self)
            self.num_classes, self.space_to_depth = 512 // d, True
            w = lambda n: n // d  # noqa: E731
            self.conv1 = s3dg.STConv3D(24, w(64), [2, 4, 4], stride=1, padding=(1, 2, 2))
            self.conv_2b = s3dg.STConv3D(w(64), w(64), [1, 1, 1])
            self.conv_2c = s3dg.STConv3D(w(64), w(192), [3, 3, 3], padding=1, separable=True)
            self.gating = s3dg.SelfGating(w(192))
            pool = s3dg.MaxPool3dTFPadding
            self.maxpool_2a = pool(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding="SAME")
            self.maxpool_3a = pool(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding="SAME")
            self.maxpool_4a = pool(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding="SAME")
            self.maxpool_5a = pool(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding="SAME")
            c = w(192)
            mixed = {"3b": (64, 96, 128, 16, 32, 32), "3c": (128, 128, 192, 32, 96, 64),
                     "4b": (192, 96, 208, 16, 48, 64), "4c": (160, 112, 224, 24, 64, 64),
                     "4d": (128, 128, 256, 24, 64, 64), "4e": (112, 144, 288, 32, 64, 64),
                     "4f": (256, 160, 320, 32, 128, 128), "5b": (256, 160, 320, 32, 128, 128),
                     "5c": (384, 192, 384, 48, 128, 128)}
            for name, widths in mixed.items():
                block = s3dg.InceptionBlock(c, *[w(x) for x in widths])
                setattr(self, f"mixed_{name}", block)
                c = block.output_dim
            self.fc = nn.Linear(c, self.num_classes)
            self.text_module = s3dg.Sentence_Embedding(
                self.num_classes, num_embeddings=51, word_embedding_dim=12,
                token_to_word_path=str(dict_path), output_dim=24)

    return SmallS3D()


def randomise(net: nn.Module, gen: torch.Generator) -> None:
    """BN: random affine, then running statistics from train-mode passes on random clips
    (so activations stay in a sane range), perturbed so they differ from any batch's."""
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm3d):
                m.weight.copy_(0.5 + torch.rand(m.num_features, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.num_features, generator=gen))
                m.momentum = None  # cumulative average over the passes
                m.reset_running_stats()
            elif isinstance(m, nn.Linear):  # gates: keep sigmoid away from saturation
                m.bias.copy_(0.1 * torch.randn(m.out_features, generator=gen))
        net.train()
        for shape in [*INPUTS.values(), (2, 3, 8, 48, 48)]:
            net(torch.rand(*shape, generator=gen))
        for m in net.modules():
            if isinstance(m, nn.BatchNorm3d):
                n = m.num_features
                m.running_mean.add_(0.1 * m.running_var.sqrt() * torch.randn(n, generator=gen))
                m.running_var.clamp_(min=1e-2).mul_(0.8 + 0.4 * torch.rand(n, generator=gen))
    net.eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a directory holding upstream's s3dg.py")
    args = ap.parse_args()
    s3dg, dict_path = import_upstream(args.upstream)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)

    full = s3dg.S3D(str(dict_path), 512)
    keys = {k: list(v.shape) for k, v in full.state_dict().items()}
    (OUT / "full_keys.json").write_text(json.dumps(keys, indent=0) + "\n")
    del full

    gen = torch.Generator().manual_seed(0)
    net = small_s3d(s3dg, dict_path, DIVISOR)
    randomise(net, gen)
    sd = net.state_dict()
    torch.save(sd, OUT / "weights_zip.pth")
    torch.save(sd, OUT / "weights_legacy.pth", _use_new_zipfile_serialization=False)

    rng = np.random.default_rng(0)
    arrays, outputs = {}, {}
    for name, shape in INPUTS.items():
        frames = rng.integers(0, 256, size=shape, dtype=np.uint8)
        x = torch.from_numpy(frames.astype(np.float32) / np.float32(255))
        with torch.no_grad():
            out = net(x)
        arrays[f"{name}_frames"] = frames
        for k, v in out.items():
            arrays[f"{name}_{k}"] = v.numpy()
            outputs[f"{name}_{k}"] = [float(v.abs().max()), float(v.std())]
    with torch.no_grad():
        arrays["text_ids"] = net.text_module._words_to_ids(SENTENCES).numpy()
        text = net.text_module(SENTENCES)["text_embedding"]
    arrays["text_embedding"] = text.numpy()
    outputs["text_embedding"] = [float(text.abs().max()), float(text.std())]
    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"divisor": DIVISOR, "num_classes": 512 // DIVISOR, "inputs": INPUTS,
            "sentences": SENTENCES, "words": [f"w{i}" for i in range(50)],
            "torch": torch.__version__, "output_abs_max_std": outputs}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print(json.dumps(outputs, indent=1))


if __name__ == "__main__":
    main()

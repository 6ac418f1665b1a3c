"""Writes tests/golden/netvlad/: MoEE's NetVLAD, gated embedding unit and max-margin ranking
loss (antoine77340/Mixture-of-Embedding-Experts: `loupe.py`, `model.py`, `loss.py`) on random
weights, for tests/models/test_netvlad.py. Run by hand with torch (never imported by vnr or
the tests):

    /work/scratch/torch/bin/python tests/golden/make_netvlad.py [--upstream DIR]

Without --upstream the script copies the three files out of the mirrored git repository
(`git show HEAD:<file>`, default mirror path below) into a temporary directory and imports
them from there, so no upstream code is committed here (upstream targets PyTorch 0.3; these
three run unchanged on torch 2.13).

`io.npz` holds, under upstream's parameter names:
* NetVLAD(cluster_size=5, feature_size=12) with random clusters and random batch-norm
  affine / running statistics; word vectors [4, 7, 12], the tail of three sentences zero (as
  upstream's `make_tensor` pads); the eval-mode output; the train-mode output, the running
  statistics after that pass, and the gradients of sum(train output * R) (R random) with
  respect to the inputs and every parameter.
* Gated_Embedding_Unit(60, 8) (context gating with batch norm) on the NetVLAD output: the
  eval- and train-mode outputs, running statistics after, and gradients of sum(out * R2).
* MaxMarginRankingLoss on a random 6 x 6 score matrix, margins 0.2 (train.py's default)
  and 1 (the class default): the losses and their gradients.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

# torch is no vnr dependency (see make_torch_checkpoint.py): imported by name.
torch = importlib.import_module("torch")

MIRROR = "/work/.mirror/antoine77340+Mixture-of-Embedding-Experts/repo/.git"
OUT = Path(__file__).resolve().parent / "netvlad"
FILES = ("loupe.py", "model.py", "loss.py")
B, N, D, K, E = 4, 7, 12, 5, 8  # sentences, word slots, word width, clusters, embedding
LENGTHS = (7, 4, 1, 5)  # words per sentence; the rest are zero padding


def import_upstream(directory: str | None):
    tmp = Path(tempfile.mkdtemp(prefix="moee_"))
    for name in FILES:
        if directory:
            shutil.copy(Path(directory) / name, tmp / name)
        else:
            src = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:{name}"],
                                 check=True, capture_output=True, text=True).stdout
            (tmp / name).write_text(src)
    sys.path.insert(0, str(tmp))
    return (importlib.import_module(n[:-3]) for n in FILES)


def randomise_bn(bn, gen) -> None:
    n = bn.num_features
    bn.weight.copy_(0.5 + torch.rand(n, generator=gen))
    bn.bias.copy_(0.3 * torch.randn(n, generator=gen))
    bn.running_mean.copy_(0.3 * torch.randn(n, generator=gen))
    bn.running_var.copy_(0.5 + torch.rand(n, generator=gen))


def state(prefix: str, module) -> dict[str, np.ndarray]:
    return {f"{prefix}{k}": v.detach().clone().numpy() for k, v in module.state_dict().items()
            if not k.endswith("num_batches_tracked")}


def grads(prefix: str, module, x: torch.Tensor, xname: str) -> dict[str, np.ndarray]:
    out = {f"grad_{prefix}{k}": p.grad.numpy().copy() for k, p in module.named_parameters()}
    out[f"grad_{xname}"] = x.grad.numpy().copy()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a directory holding loupe.py, model.py and loss.py")
    args = ap.parse_args()
    loupe, model, loss = import_upstream(args.upstream)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}

    # NetVLAD
    vlad = loupe.NetVLAD(cluster_size=K, feature_size=D)
    with torch.no_grad():
        randomise_bn(vlad.batch_norm, gen)
    arrays |= state("vlad.", vlad)
    x = torch.randn(B, N, D, generator=gen)
    for i, n in enumerate(LENGTHS):
        x[i, n:] = 0
    arrays["x"] = x.numpy().copy()
    vlad.eval()
    with torch.no_grad():
        arrays["vlad_eval"] = vlad(x).numpy()
    vlad.train()
    xg = x.clone().requires_grad_(True)
    out = vlad(xg)
    r = torch.randn(out.shape, generator=gen)
    (out * r).sum().backward()
    arrays |= {"vlad_train": out.detach().numpy(), "vlad_r": r.numpy()}
    arrays |= {f"after_{k}": v for k, v in state("vlad.", vlad).items() if "running" in k}
    arrays |= grads("vlad.", vlad, xg, "x")

    # Gated embedding unit on the NetVLAD descriptors (eval-mode ones, fixed)
    geu = model.Gated_Embedding_Unit(D * K, E)
    with torch.no_grad():
        randomise_bn(geu.cg.batch_norm, gen)
    arrays |= state("geu.", geu)
    v = torch.from_numpy(arrays["vlad_eval"]) * 10  # spread the pre-activations
    arrays["geu_in"] = v.numpy().copy()
    geu.eval()
    with torch.no_grad():
        arrays["geu_eval"] = geu(v).numpy()
    geu.train()
    vg = v.clone().requires_grad_(True)
    out = geu(vg)
    r2 = torch.randn(out.shape, generator=gen)
    (out * r2).sum().backward()
    arrays |= {"geu_train": out.detach().numpy(), "geu_r": r2.numpy()}
    arrays |= {f"after_{k}": v for k, v in state("geu.", geu).items() if "running" in k}
    arrays |= grads("geu.", geu, vg, "geu_in")

    # Max-margin ranking loss
    s = torch.randn(6, 6, generator=gen) * 0.3
    s += torch.eye(6) * 0.2  # some positives clear the margin, some do not
    arrays["scores"] = s.numpy().copy()
    for margin in (0.2, 1.0):
        sg = s.clone().requires_grad_(True)
        value = loss.MaxMarginRankingLoss(margin=margin)(sg)
        value.backward()
        arrays[f"loss_{margin}"] = value.detach().numpy()
        arrays[f"grad_scores_{margin}"] = sg.grad.numpy().copy()

    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"B": B, "N": N, "D": D, "K": K, "E": E, "lengths": LENGTHS,
            "torch": torch.__version__, "margins": [0.2, 1.0]}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print({k: v.shape for k, v in arrays.items()})


if __name__ == "__main__":
    main()

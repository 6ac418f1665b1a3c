"""Generated inputs of Sc2St's MoEE rows at smoke scale (`rows.toml` [smoke.vars]) and tests.

Each function writes at the path it is given and returns it (a checkpoint's directory, which
the loaders read as holding the published file name).

* `tiny_places365`: a DenseNet (`experts.arch("scene", "tiny")`) with random weights saved as
  CSAIL's `densenet161_places365.pth.tar` is: `{"epoch", "arch", "state_dict",
  "best_prec1"}`, the state dict of a `DataParallel` wrapper (`module.` prefixes) with the
  old torchvision's dense-layer names (`norm.1`, `conv.1`, ...), 365 classes;
* `tiny_senet154`: an SENet (`experts.arch("object", "tiny")`) saved as Cadene's
  `senet154-c7b49a05.pth`: a plain state dict with `num_batches_tracked` counters;
* `tiny_word_vectors`: a 16-d GloVe text file over the generated corpus's words;
* `frames_corpus`: the tiny generated corpus (`tfds_builders/sc2st/synthetic.py`) in the
  LSMDC layout with JPEG frames instead of feature arrays (each frame draws its 32-d
  feature as a 4 x 8 grid), for the experts, which read pixels.

The checkpoints are `torch.save`'s zip format (`archive/data.pkl` plus one raw little-endian
storage per tensor under `archive/data/`), written here without torch: the pickle names
torch's `_rebuild_tensor_v2` and `FloatStorage` as globals, as torch's own files do. Every
value is random (batch-norm statistics too), so a wrong mapping cannot hide.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from vnr.benchmarks.sc2st import experts


class _Global:
    """A name pickled as a global (`module.name`) without importing it."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> Any:  # pickle's save_reduce wants a callable
        raise TypeError(f"{self.module}.{self.name} is a name only")


class _StorageRef:
    def __init__(self, key: str, numel: int):
        self.key, self.numel = key, numel


class _Tensor:
    def __init__(self, storage: _StorageRef, shape: tuple[int, ...], dtype: str):
        self.storage, self.shape, self.dtype = storage, shape, dtype

    def __reduce_ex__(self, protocol: int) -> tuple:
        stride = tuple(int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape)))
        return (_Global("torch._utils", "_rebuild_tensor_v2"),
                (self.storage, 0, self.shape, stride, False, collections.OrderedDict()))


class _Pickler(pickle._Pickler):  # the Python pickler: its dispatch table can be extended
    dispatch = pickle._Pickler.dispatch.copy()

    def _save_name(self, obj: _Global) -> None:
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("ascii"))

    dispatch[_Global] = _save_name

    def __init__(self, f: Any, storages: dict[int, str]):
        super().__init__(f, protocol=2)
        self.storage_types = storages

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _StorageRef):
            kind = self.storage_types[id(obj)]
            return ("storage", _Global("torch", kind), obj.key, "cpu", obj.numel)
        return None


STORAGE = {np.dtype(np.float32): "FloatStorage", np.dtype(np.int64): "LongStorage"}


def save_torch(obj: Any, path: str | Path) -> Path:
    """`torch.save(obj, path)` (zip format) for dicts of NumPy arrays (float32, int64)."""
    blobs: dict[str, bytes] = {}
    kinds: dict[int, str] = {}

    def convert(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            x = np.ascontiguousarray(x)
            ref = _StorageRef(str(len(blobs)), x.size)
            kinds[id(ref)] = STORAGE[x.dtype]
            blobs[ref.key] = x.astype(x.dtype.newbyteorder("<")).tobytes()
            return _Tensor(ref, tuple(int(n) for n in x.shape), str(x.dtype))
        if isinstance(x, dict):
            return type(x)((k, convert(v)) for k, v in x.items())
        return x

    tree = convert(obj)
    buf = io.BytesIO()
    _Pickler(buf, kinds).dump(tree)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", "little")
        for key, raw in blobs.items():
            z.writestr(f"archive/data/{key}", raw)
        z.writestr("archive/version", "3\n")
    return path


def random_state_dict(ctor: Any, seed: int) -> dict[str, np.ndarray]:
    """torch-layout random tensors for every parameter of the NNX model `ctor` builds."""
    from vnr.models.encoders import loading

    rng = np.random.default_rng(seed)
    out = collections.OrderedDict()
    for name, shape in sorted(loading.param_shapes(ctor).items()):
        leaf = name.rpartition(".")[2]
        if leaf == "running_var":
            x = rng.uniform(0.5, 1.5, shape)
        elif leaf == "scale":
            x = rng.uniform(0.5, 1.5, shape)
        elif leaf == "kernel":
            fan_in = int(np.prod(shape[:-1]))
            x = rng.normal(size=shape) / np.sqrt(fan_in)
        else:
            x = rng.normal(scale=0.1, size=shape)
        x = x.astype(np.float32)
        if leaf == "kernel":
            x = x.transpose(x.ndim - 1, x.ndim - 2, *range(x.ndim - 2))
        out[loading.torch_key(name)] = np.ascontiguousarray(x)
    return out


def tiny_places365(path: Path, seed: int = 0) -> Path:
    """[smoke.vars] PLACES365: a tiny DenseNet saved as CSAIL's Places365 checkpoint."""
    import re

    from vnr.models.encoders import densenet

    cfg = experts.arch("scene", "tiny")
    sd = random_state_dict(lambda r: densenet.DenseNet(cfg, r), seed)
    legacy = re.compile(r"(denselayer\d+\.(?:norm|conv))([12])\.")
    state = collections.OrderedDict(("module." + legacy.sub(r"\1.\2.", k), v)
                                    for k, v in sd.items())
    path = Path(path)
    file = path / experts.PLACES365_FILE if not path.suffix else path
    save_torch({"epoch": 90, "arch": "densenet161", "state_dict": state, "best_prec1": 0.0},
               file)
    return path  # a directory holding the file names it for the loader as well


def tiny_senet154(path: Path, seed: int = 1) -> Path:
    """[smoke.vars] SENET154: a tiny SENet saved as Cadene's SENet-154 state dict."""
    from vnr.models.encoders import senet

    cfg = experts.arch("object", "tiny")
    sd = random_state_dict(lambda r: senet.SENet(cfg, r), seed)
    for k in [k for k in sd if k.endswith(".running_var")]:
        sd[k.replace("running_var", "num_batches_tracked")] = np.array(3, np.int64)
    path = Path(path)
    save_torch(sd, path / experts.SENET154_FILE if not path.suffix else path)
    return path


def tiny_word_vectors(path: Path, dim: int = 16, seed: int = 2) -> Path:
    """[smoke.vars] WORD_VECTORS: a `dim`-d GloVe text file of the generated corpus's words."""
    from tfds_builders.sc2st import synthetic

    words = ["someone", "SOMEONE", "the", "then", "closely", *synthetic.OBJECTS,
             *(f"{v}s" for v in synthetic.VERBS)]
    rng = np.random.default_rng(seed)
    path = Path(path)  # the file itself (GloVe text: no `.bin` suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{w} " + " ".join(f"{x:.5f}" for x in rng.normal(size=dim)) + "\n"
                            for w in words))
    return path


def frames_corpus(path: Path, seed: int = 0) -> Path:
    """[smoke.vars] SC2ST_FRAMES: the tiny generated corpus with JPEG frames (docstring)."""
    from PIL import Image

    from tfds_builders.sc2st import synthetic

    path = Path(path)
    synthetic.write_corpus(path, seed=seed, sizes="tiny")
    for npy in sorted((path / "features").glob("*/*.npy")):
        clip = path / "frames" / npy.parent.name / npy.stem
        clip.mkdir(parents=True, exist_ok=True)
        for k, v in enumerate(np.load(npy), 1):
            grid = np.clip(v.reshape(4, 8) * 4.0, -1.0, 1.0)
            rgb = np.stack([grid, -grid, np.abs(grid)], -1)
            img = Image.fromarray(((rgb + 1.0) * 127.5).astype(np.uint8))
            img.resize((64, 48), Image.NEAREST).save(clip / f"{k}.jpg", quality=95)
        npy.unlink()
    for d in sorted((path / "features").glob("*")):
        d.rmdir()
    (path / "features").rmdir()
    return path

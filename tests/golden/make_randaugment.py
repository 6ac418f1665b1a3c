"""Writes tests/golden/randaugment/io.npz: CCLM's training-image transform run by upstream's own
code, for tests/ops/test_randaugment.py. Run by hand (never imported by vnr or the tests) from a
scratch environment with numpy, Pillow and OpenCV (no torch):

    python3.11 -m venv /tmp/cvenv
    /tmp/cvenv/bin/pip install numpy pillow opencv-python-headless==4.10.0.84
    /tmp/cvenv/bin/python tests/golden/make_randaugment.py [--upstream FILE]

Without --upstream, CCLM's `dataset/randaugment.py` is read out of the mirrored git repository
(`git show HEAD:...`) into a temporary directory and imported from there (no upstream code is
committed here). The crop is torchvision's `resized_crop` on a PIL image, which is PIL's
`crop` then `resize(..., BICUBIC)`: run here with Pillow itself.

`io.npz`:
* `images` uint8 [3, 40, 56, 3]: smooth gradients, edges and noise; image 0 reaches 0 and
  255 in every channel, images 1 and 2 do not (their channels' darkest values are above 0,
  where upstream's autocontrast differs from PIL's);
* `op_<name>_<sign>` uint8 [3, 40, 56, 3]: upstream's `func_dict[name]` (the ten of `AUGS`)
  on each image with the arguments its `arg_dict[name](7)` gives, the sign drawn until it is
  + or - (geometric operations); `args.json` records the arguments;
* `sharp_in_range` bool [3, 38, 54, 3]: where upstream's sharpness stays within 0-255 before its
  uint8 cast (elsewhere its bytes wrap);
* `autocontrast_pil` uint8: PIL's `ImageOps.autocontrast`, which upstream says it equals;
* `boxes` int [6, 4] (top, left, height, width) and `crops` uint8 [3, 6, 48, 48, 3]: each image
  cropped to each box and resized to 48 x 48 by PIL's bicubic.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

MIRROR = "/work/.mirror/zengyan-97+CCLM/repo"
OUT = Path(__file__).resolve().parent / "randaugment"
H, W, SIZE = 40, 56, 48
# the operations CCLM's train_transform lists (RandomAugment's `augs`)
AUGS = ("Identity", "AutoContrast", "Equalize", "Brightness", "Sharpness", "ShearX", "ShearY",
        "TranslateX", "TranslateY", "Rotate")
BOXES = [(0, 0, 40, 56), (5, 7, 20, 30), (0, 8, 40, 40), (10, 20, 30, 36), (39, 55, 1, 1),
         (3, 0, 37, 56)]


def load_upstream(path: str | None):
    if path is None:
        src = subprocess.run(["git", f"--git-dir={MIRROR}", "show", "HEAD:dataset/randaugment.py"],
                             check=True, capture_output=True, text=True).stdout
        path = str(Path(tempfile.mkdtemp(prefix="cclm_")) / "randaugment.py")
        Path(path).write_text(src)
    spec = importlib.util.spec_from_file_location("randaugment", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_images(rng: np.random.Generator) -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    base = np.stack([x / (W - 1) * 255, y / (H - 1) * 255, (x + y) / (W + H - 2) * 255], -1)
    images = []
    for k, (lo, hi) in enumerate([(0, 255), (30, 200), (90, 140)]):
        img = base.copy()
        img[8:20, 10:30] = 255 - img[8:20, 10:30]  # a block with sharp edges
        img[25:, 40:] = rng.uniform(0, 255, (H - 25, W - 40, 3))  # a noisy corner
        img = lo + (img - img.min()) / (img.max() - img.min()) * (hi - lo)
        if k == 0:
            img[0, 0], img[-1, -1] = 0, 255
        images.append(np.clip(np.round(img), 0, 255).astype(np.uint8))
    return np.stack(images)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", help="CCLM's dataset/randaugment.py (default: the mirror)")
    args = ap.parse_args()
    up = load_upstream(args.upstream)
    rng = np.random.default_rng(0)
    images = make_images(rng)
    out: dict[str, np.ndarray] = {"images": images}
    record = {}
    geometric = ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")
    for name in AUGS:
        for sign in (1, -1) if name in geometric else (1,):
            for seed in range(100):  # upstream draws the sign: keep a draw of this sign
                np.random.seed(seed)
                found = up.arg_dict[name](7)
                if name not in geometric or np.sign(found[0]) == sign:
                    break
            res = [up.func_dict[name](img.copy(), *found) for img in images]
            out[f"op_{name}_{'+' if sign > 0 else '-'}"] = np.stack(res).astype(np.uint8)
            record[f"{name} {sign:+d}"] = [v for v in found if not isinstance(v, tuple)]
    kernel = np.ones((3, 3), np.float32)
    kernel[1, 1] = 5
    kernel /= 13
    import cv2

    factor = up.arg_dict["Sharpness"](7)[0]
    in_range = []
    for img in images:
        deg = cv2.filter2D(img, -1, kernel).astype(np.float32)[1:-1, 1:-1]
        val = deg + factor * (img.astype(np.float32)[1:-1, 1:-1] - deg)
        in_range.append((val >= 0) & (val < 256))
    out["sharp_in_range"] = np.stack(in_range)
    out["autocontrast_pil"] = np.stack([np.asarray(ImageOps.autocontrast(Image.fromarray(i)))
                                        for i in images])
    out["boxes"] = np.asarray(BOXES, np.int32)
    crops = []
    for img in images:
        pil = Image.fromarray(img)
        crops.append([np.asarray(pil.crop((left, top, left + w, top + h)).resize(
            (SIZE, SIZE), Image.BICUBIC)) for top, left, h, w in BOXES])
    out["crops"] = np.asarray(crops, np.uint8)
    OUT.mkdir(exist_ok=True)
    np.savez_compressed(OUT / "io.npz", **out)
    (OUT / "args.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {OUT} ({sum(v.nbytes for v in out.values()) / 1024:.0f} KiB raw)")


if __name__ == "__main__":
    main()

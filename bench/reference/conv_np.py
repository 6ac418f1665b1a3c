"""NumPy reference convolution (NCHW, OIHW weights, no bias) for the torchvision-model tests."""

import numpy as np


def np_conv(x: np.ndarray, w: np.ndarray, stride: int,
            pad: int | tuple[int, int]) -> np.ndarray:
    """Cross-correlation as torch's `conv2d`: zero padding `pad` (one int, or (h, w))."""
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    _, _, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    h, wd = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], h, wd))
    for a in range(kh):
        for b in range(kw):
            patch = x[:, :, a:a + stride * h:stride, b:b + stride * wd:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, a, b])
    return out

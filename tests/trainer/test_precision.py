"""bfloat16 compute from the config (vnr/models/compute.py): every benchmark's smoke config
trains from the same init in float32 and in bfloat16 (float32 parameters); the losses agree
within a stated tolerance after a few steps and nothing becomes non-finite."""

import jax
import numpy as np
import pytest

from vnr import config as config_lib
from vnr import train

STEPS = 2
# bfloat16 keeps 8 bits of mantissa (relative rounding 2^-8 ~ 0.4 % per operation); after a
# few steps of small models the losses stay within 5 % (relative) of float32's.
RTOL = 0.05
# One smoke config per benchmark (each exercises its own model code; the shared layers and
# CLIP/BERT towers are covered by tests/models/test_compute.py).
SPECS = [
    "configs/moviepuzzle/main.py:smoke",
    "configs/symon/retrieval.py:smoke",
    "configs/msymon/main.py:smoke",
    "configs/movie101/mcn.py:smoke",
    "configs/sc2st/main.py:smoke",
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tfds"))


def _losses(spec: str, data_dir: str, dtype: str) -> list[float]:
    c = config_lib.load(spec)
    c.dtype = dtype
    c.data.data_dir = data_dir
    c.mesh.shape = (1, 1)  # one device: precision is the question here, and it compiles faster
    s = train.setup(c, devices=jax.devices()[:1])
    it = iter(s.task.train_data(c, s.local_batch, 0, 1))
    state, out = s.state, []
    for step in range(1, STEPS + 1):
        state, m = s.step_fn(state, next(it), step)
        out.append(float(m["loss"]))
        assert int(m["nonfinite"]) == 0, f"{spec} {dtype}: non-finite at step {step}"
    if hasattr(it, "close"):
        it.close()
    jax.block_until_ready(state)
    return out


@pytest.mark.e2e
@pytest.mark.parametrize("spec", SPECS)
def test_bfloat16_tracks_float32(spec, data_dir):
    f32 = _losses(spec, data_dir, "float32")
    bf16 = _losses(spec, data_dir, "bfloat16")
    assert np.all(np.isfinite(bf16))
    np.testing.assert_allclose(bf16, f32, rtol=RTOL, atol=RTOL,
                               err_msg=f"{spec}: bfloat16 {bf16} vs float32 {f32}")

"""vnr.models.encoders.torch_checkpoint against files written by real torch (2.13,
tests/golden/make_torch_checkpoint.py) in both the zip and the legacy format."""

from __future__ import annotations

import pathlib
import pickle
import tarfile

import ml_dtypes
import numpy as np
import pytest

from vnr.models.encoders.loading import CheckpointError
from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden" / "torch_checkpoint"
DTYPES = {"encoder.transposed": np.float32, "encoder.sliced": np.float32,
          "encoder.weight": np.float32, "encoder.inner.half": np.float16,
          "encoder.inner.bf16": ml_dtypes.bfloat16, "tied_a": np.float32, "tied_b": np.float32,
          "counter": np.int64, "i32": np.int32, "u8": np.uint8, "mask": np.bool_,
          "empty": np.float32}


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "expected.npz") as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("name", ["zip.pth", "legacy.pth"])
def test_reads_every_tensor_as_torch_does(name, expected):
    got = read_torch_checkpoint(GOLDEN / name)
    assert sorted(got) == sorted(expected) == sorted(DTYPES)
    for key, want in expected.items():
        arr = got[key]
        assert arr.dtype == DTYPES[key], key
        assert arr.shape == want.shape, key
        assert arr.flags.c_contiguous and arr.flags.owndata, key
        np.testing.assert_array_equal(arr.astype(want.dtype), want, err_msg=key)
    # The layouts that need strides and offsets: a transpose and a strided slice.
    np.testing.assert_array_equal(got["encoder.transposed"].T[1:, ::2], got["encoder.sliced"])
    assert got["counter"].shape == () and int(got["counter"]) == 7


def test_zip_and_legacy_agree():
    a, b = (read_torch_checkpoint(GOLDEN / n) for n in ("zip.pth", "legacy.pth"))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_state_dict_wrapper_is_unwrapped(expected):
    got = read_torch_checkpoint(GOLDEN / "wrapped.pth")
    assert sorted(got) == ["inner.bf16", "inner.half", "sliced", "transposed", "weight"]
    np.testing.assert_array_equal(got["inner.half"], expected["encoder.inner.half"])


def test_foreign_class_is_refused_naming_file_and_class():
    with pytest.raises(CheckpointError, match=r"refused\.pth: refusing to unpickle "
                                              r"argparse\.Namespace") as e:
        read_torch_checkpoint(GOLDEN / "refused.pth")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["zip.pth", "legacy.pth"])
@pytest.mark.parametrize("keep", [0.3, 0.7, 0.97])
def test_truncated_file_is_one_line_error(tmp_path, name, keep):
    data = (GOLDEN / name).read_bytes()
    cut = tmp_path / name
    cut.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError) as e:
        read_torch_checkpoint(cut)
    assert str(e.value).startswith(f"{cut}: ") and "\n" not in str(e.value)


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        read_torch_checkpoint(tmp_path / "absent.pth")
    text = tmp_path / "notes.pth"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match="notes.pth: not a PyTorch checkpoint"):
        read_torch_checkpoint(text)
    npz = tmp_path / "arrays.bin"
    with open(npz, "wb") as f:
        np.savez(f, a=np.ones(2))
    with pytest.raises(CheckpointError, match="arrays.bin: zip archive without"):
        read_torch_checkpoint(npz)
    old = tmp_path / "old.pth"
    with tarfile.open(old, "w") as tar:
        tar.add(text, arcname="sys_info")
    with pytest.raises(CheckpointError, match="old.pth: a tar archive: torch < 0.4"):
        read_torch_checkpoint(old)
    plain = tmp_path / "plain.pth"
    plain.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(CheckpointError, match="plain.pth: .*bad magic number"):
        read_torch_checkpoint(plain)

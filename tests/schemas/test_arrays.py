"""Property tests of the feature-array reader (`tfds_builders/arrays.py`) and the builders'
feature readers on it: any array of any dtype and shape, saved as `.npy`, as a `.npz` under
the `.npy` name or as bytes that are no array, is returned with exactly its values or
refused with one line naming the file (and counted by the builders): complex, bool, string,
object and date arrays are never turned into floats, NaN / infinite values never stored."""

from __future__ import annotations

import collections
import io

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tfds_builders import arrays, common
from tfds_builders.msymon import parse as msymon_parse

DTYPES = st.sampled_from(["float16", "float32", "float64", "int8", "int64", "uint8", "bool",
                          "complex64", "<U3", "S2", "datetime64[s]"])
DIM = 4


@st.composite
def stored(draw: st.DrawFn) -> tuple[np.ndarray, str]:
    """(array, how it is written: npy / npz_as_npy / garbage)."""
    dtype = np.dtype(draw(DTYPES))
    shape = draw(st.one_of(st.tuples(st.integers(0, 3), st.sampled_from([DIM, DIM - 1])),
                           hnp.array_shapes(min_dims=0, max_dims=3, max_side=3)))
    x = draw(hnp.arrays(dtype, shape))
    return x, draw(st.sampled_from(["npy", "npy", "npy", "npz_as_npy", "garbage"]))


def expected(x: np.ndarray, how: str, store: type) -> tuple[str, np.ndarray | None]:
    """The kind of ArrayError `arrays.load(path, (None, DIM))` must raise, or ("", values)."""
    if how != "npy":
        return "unreadable", None
    if x.dtype.kind not in "fiu":
        return "dtype", None
    if x.ndim != 2 or x.shape[1] != DIM or x.shape[0] == 0:
        return "shape", None
    with np.errstate(over="ignore"):
        if not np.isfinite(x.astype(store)).all():
            return "nonfinite", None
    return "", x


def _write(path, x: np.ndarray, how: str) -> None:
    buf = io.BytesIO()
    if how == "npy":
        np.save(buf, x)
    elif how == "npz_as_npy":
        np.savez(buf, features=x)
    else:
        buf.write(b"\x93NUMPY not really" + x.tobytes()[:8])
    path.write_bytes(buf.getvalue())


def test_arrays_are_their_values_or_one_named_error(tmp_path):
    path = tmp_path / "v.npy"

    @given(stored(), st.sampled_from([np.float32, np.float16]))
    def prop(case, store):
        x, how = case
        _write(path, x, how)
        kind, values = expected(x, how, store)
        try:
            got = arrays.load(path, (None, DIM), store=store)
        except arrays.ArrayError as e:
            assert e.kind == kind, f"{x.dtype} {x.shape} {how}: {e.kind}, expected {kind}"
            assert "\n" not in str(e) and str(e).startswith(str(path))
            return
        assert kind == "" and got.dtype == x.dtype
        np.testing.assert_array_equal(got, values)

    prop()


def test_npz_key_and_layout(tmp_path):
    """`.npz` feature files (Movie101) need the array `features`; a plain `.npy` under the
    `.npz` name is refused by name too."""
    x = np.ones((3, DIM), np.float32)
    np.savez(tmp_path / "a.npz", features=x, other=x)
    np.testing.assert_array_equal(arrays.load(tmp_path / "a.npz", (None, DIM), "features"), x)
    np.savez(tmp_path / "b.npz", feats=x)
    np.save(tmp_path / "c.npy", x)
    for name, kind in (("b.npz", "key"), ("c.npy", "unreadable")):
        try:
            arrays.load(tmp_path / name, (None, DIM), "features")
        except arrays.ArrayError as e:
            assert e.kind == kind and name in str(e)
        else:
            raise AssertionError(f"{name} was read")


def test_msymon_features_are_their_values_or_a_named_skip(tmp_path):
    path = tmp_path / "vid.npy"

    @given(stored())
    def prop(case):
        x, how = case
        _write(path, x, how)
        kind, values = expected(x, how, np.float32)
        counts: collections.Counter = common.Counts()
        got = msymon_parse.read_features(path, DIM, counts)
        if kind:
            assert got is None and sum(counts.values()) == 1
            assert str(path) in next(iter(counts.named.values()))[0]
        else:
            np.testing.assert_array_equal(got, values.astype(np.float32))
            assert not counts

    prop()

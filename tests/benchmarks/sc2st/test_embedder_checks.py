"""The keyframe embedder (and the other embedders and experts) a Sc2St build is handed is
the caller's code: whatever is wrong with it stops the build in one line naming it, before
anything is written; a keyframe that does not decode skips its storyboard (`bad_frame`),
counted and named. Probed with `python -m tfds_builders build`'s `build` on a release in
its published layout (`release_layout.py`)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.benchmarks.sc2st import release_layout
from tfds_builders import common
from tfds_builders import sc2st as sc2st_lib
from tfds_builders.__main__ import build

pytestmark = pytest.mark.faults  # the fault-injection suite (-m faults)

HERE = __name__
GOOD = "tests.benchmarks.sc2st.release_layout:numpy_embedder"


def one_arg(encoder):  # the builder calls (encoder, seed)
    return release_layout.numpy_embedder(encoder)


def not_an_embedder(encoder, seed=0):
    return 42


def raises(encoder, seed=0):
    raise RuntimeError("weights file missing")


class _Off(release_layout.MovieEmbedder):
    """The stand-in embedder with one output fault."""

    def __init__(self, fault: str):
        super().__init__(0)
        self.fault = fault

    def encode_images(self, jpegs):
        out = super().encode_images(jpegs)
        if self.fault == "rows":
            return out[:-1]
        if self.fault == "nan":
            out[0, 0] = np.nan
        if self.fault == "raises":
            raise MemoryError("out of device memory")
        return out


def fewer_rows(encoder, seed=0):
    return _Off("rows")


def nan_values(encoder, seed=0):
    return _Off("nan")


def fails_on_images(encoder, seed=0):
    return _Off("raises")


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> release_layout.Release:
    return release_layout.write_release(tmp_path_factory.mktemp("rel") / "Sc2St")


@pytest.mark.parametrize("fn, message", [
    ("one_arg", r"embedder tests\.benchmarks\.sc2st\.test_embedder_checks:one_arg\(encoder\) "
                r"cannot be called as .*it must take \(encoder: str, seed: int\)$"),
    ("not_an_embedder", r"returned a int with no method encode_texts, no method "
                        r"encode_images, dim=None"),
    ("raises", r":raises\('clip-vit-base-patch32', 0\) failed: RuntimeError: weights file "
               r"missing$"),
    ("fewer_rows", r"encode_images of \d+ input\(s\) returned float32 \(\d+, 512\), not "
                   r"\[\d+, 512\] \(its dim\) floats$"),
    ("nan_values", r"encode_images returned non-finite values$"),
    ("fails_on_images", r"encode_images of \d+ input\(s\) failed: MemoryError: out of device "
                        r"memory$"),
])
def test_an_unusable_embedder_is_one_line_naming_it(release, tmp_path, fn, message) -> None:
    with pytest.raises(common.ManualDirError, match=message) as e:
        build("sc2st", "released", str(tmp_path / "tfds"), str(release.root),
              embedder=f"{HERE}:{fn}")
    assert "\n" not in str(e.value)
    assert not list((tmp_path / "tfds").rglob("dataset_info.json"))  # nothing built


def test_an_undecodable_keyframe_skips_its_storyboard_by_name(release, tmp_path) -> None:
    ok = build("sc2st", "released", str(tmp_path / "ok"), str(release.root), embedder=GOOD)
    frame = sc2st_lib.data_source("released", "test", tmp_path / "ok", build=False)[0][
        "frame_ids"][3]
    broken = tmp_path / "Sc2St"
    shutil.copytree(release.root, broken)
    (broken / frame).write_bytes(b"\xff\xd8 not the rest of a JPEG")
    summary = build("sc2st", "released", str(tmp_path / "tfds"), str(broken), embedder=GOOD)
    assert summary["skipped"]["bad_frame"] == 1
    assert summary["examples"]["test"] == ok["examples"]["test"] - 1
    assert str(broken / frame) in summary["named"]["bad_frame"][0]

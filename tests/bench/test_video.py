"""`python -m bench video` at tiny sizes: every table prints with its rows."""

import subprocess
import sys

import pytest

from tests import ROOT


@pytest.mark.e2e  # encodes and decodes a few files, traces two full-size models
def test_small_run_prints_every_table(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "bench", "video", "--seconds", "2", "--long_seconds", "4",
         "--dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for row in ("| 360p 2 s |", "| 720p 2 s |", "x264 default (250)", "every 48 frames",
                "| clip (ViT-B/32, 1 frame/s) |", "| s3d_howto100m (16 frames/s) |"):
        assert row in text, (row, text)


def test_unknown_device_is_one_line():
    out = subprocess.run([sys.executable, "-m", "bench", "video", "--device", "tpu9"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "error: --device='tpu9': use one of h100, h200, a100, v5e, v5p, v4"]

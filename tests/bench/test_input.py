"""`python -m bench input`: the device check, the input paths it compares, and one
run on the main job's smoke config (a subprocess: the benchmark parses absl flags)."""

import subprocess
import sys

import pytest

from bench import input as bench_input
from bench import train as bench_train
from configs.moviepuzzle import hcmc, main
from tests import ROOT


def test_unknown_device_is_one_error_line_before_anything_is_built(capsys):
    for argv in (["input", "--device=x100", "--config=nowhere.py"], ["input", "--config=x.py"]):
        with pytest.raises(SystemExit) as e:
            bench_input.main(argv)
        assert e.value.code == 2  # a bad command line, as every tool (vnr/cli.py)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: --device=")
        assert "h100, h200, a100, v5e, v5p, v4" in err[0]
    name, peak = bench_input.device_peak(["input", "--device", "v5p"])
    assert (name, peak) == ("v5p", bench_train.PEAKS["TPU v5p"])
    assert all(kind in bench_train.PEAKS for kind in bench_input.DEVICES.values())


def test_input_paths_compare_todays_jpeg_path_with_the_new_ones():
    c = hcmc.get_config("frame_shot,paper")
    bench_input.use_clip_shapes(c)
    paths = dict(bench_input.input_paths(c))
    assert [p["image_resize"] for p in paths.values()] == ["squash", "clip", "clip", "clip"]
    assert [p["frame_store"] for p in paths.values()] == [False, False, False, True]
    assert [p["jpeg_draft"] for p in paths.values()] == [False, False, True, False]
    assert c.model.image_encoder == "scratch:clip-b32" and c.data.image_size == 224
    scratch = dict(bench_input.input_paths(main.get_config()))  # 64 px squash: no CLIP rows
    assert [p["image_resize"] for p in scratch.values()] == ["squash", "squash"]


def test_benchmark_prints_demand_rates_and_headroom(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "bench", "input", "--device", "a100", "--batches",
         "2", "--config", "configs/moviepuzzle/main.py:smoke",
         f"--config.data.data_dir={tmp_path}"],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [r for r in out.stdout.splitlines() if r.startswith("| ")]
    assert any(r.startswith("| demand of one a100 ") for r in rows)
    paths = [r for r in rows if "JPEG each epoch" in r or "frame_store" in r]
    assert len(paths) == 2 and all(r.rstrip().endswith("|") and "x" in r for r in paths)
    assert "store built once" in paths[1]


def test_a_config_the_trainer_refuses_is_one_error_line(tmp_path):
    """The benchmark sets its config up through vnr.train: a config the trainer's checks
    refuse ends as the trainer's one line (exit 2), not a ConfigError traceback."""
    out = subprocess.run(
        [sys.executable, "-m", "bench", "input", "--device=h100",
         "--config=configs/moviepuzzle/main.py:smoke", f"--config.data.data_dir={tmp_path}",
         "--config.lr=-1.0"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2, out.stderr[-3000:]
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: input: config key lr=-1.0 must be > 0")

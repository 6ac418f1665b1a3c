"""`python -m bench accelerator --smoke` on CPU: every section of the report is
there with numbers (so the accelerator report cannot rot between accelerator runs), and the
targets are marked per device."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests import ROOT

SECTIONS = ("Device and versions", "HCMC paper row: train step, float32 vs bfloat16, remat",
            "Attention: xla vs cudnn", "Movie101 decode: batched vs per-example loop",
            "soft-DTW / Drop-DTW vs references", "Sharded contrastive loss", "Input headroom",
            "Extraction rates: device vs host decode",
            "M-SYMON Table 3 model: CCLM frame step vs feature model, frame store", "Targets")
NUMBER = r"\d[\d,]*(\.\d+)?"


def run_bench(*args: str) -> subprocess.CompletedProcess:
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()  # tests/conftest.py's,
             if not f.startswith("--xla_force_host_platform_device_count")]  # 1 CPU device
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=" ".join(flags))
    return subprocess.run([sys.executable, "-m", "bench", "accelerator", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def rows(body: str) -> list[list[str]]:
    """Table rows of a section (header and rule excluded), as lists of cells."""
    lines = [ln for ln in body.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


@pytest.mark.e2e
def test_smoke_report_has_every_section_with_numbers(tmp_path):
    out = tmp_path / "results" / "report.md"
    r = run_bench("--smoke", "--out", str(out), "--data_dir", str(tmp_path / "tfds"))
    assert r.returncode == 0, r.stderr[-3000:]
    text = out.read_text()
    got = sections(text)
    assert list(got) == list(SECTIONS), list(got)
    assert "failed:" not in text, text

    versions = dict(row[:2] for row in rows(got["Device and versions"]))
    assert versions["jax"] == __import__("jax").__version__
    assert versions["devices"] == "1 x cpu"
    train = rows(got["HCMC paper row: train step, float32 vs bfloat16, remat"])
    assert [row[:2] for row in train] == [["float32", "none"], ["float32", "towers"],
                                          ["bfloat16", "none"], ["bfloat16", "towers"]]
    for row in train:  # step ms, clips/s, GFLOP, MFU %, MiB, compile s, input clips/s
        assert all(re.fullmatch(NUMBER + "( %)?", c) for c in row[2:]), row
        assert float(row[2]) > 0 and float(row[4]) > 0
    attention = rows(got["Attention: xla vs cudnn"])
    assert attention[0][0] == "xla" and re.fullmatch(NUMBER, attention[0][1])
    assert attention[1][:2] == ["cudnn", "not available"]
    decode = dict(rows(got["Movie101 decode: batched vs per-example loop"]))
    assert re.fullmatch(NUMBER + " tok/s", decode["batched jit beam search"])
    assert re.fullmatch(NUMBER + "x", decode["speedup"])
    assert decode["best sequences identical"] == "True"
    dtw = rows(got["soft-DTW / Drop-DTW vs references"])
    assert dtw[0][0].startswith("soft-DTW") and re.fullmatch(NUMBER, dtw[0][1])
    assert dtw[1][0].startswith("Drop-DTW") and re.fullmatch(NUMBER + "x", dtw[1][3])
    contrastive = rows(got["Sharded contrastive loss"])
    assert [row[0] for row in contrastive] == ["allgather", "naive-replicated", "naive-gspmd"]
    assert all(re.fullmatch(NUMBER, c) for row in contrastive for c in row[1:])
    extract = rows(got["Extraction rates: device vs host decode"])
    assert [row[0].split(" (")[0] for row in extract] == ["clip", "s3d_howto100m", "transnetv2"]
    for row in extract:  # units/call, units/s, first s, video s/s x3, cores; bound
        assert all(re.fullmatch(NUMBER, c) for c in row[1:8]), row
        assert float(row[2].replace(",", "")) > 0 and row[8] in ("device", "host decode")
    msymon = rows(got["M-SYMON Table 3 model: CCLM frame step vs feature model, frame store"])
    assert [row[0].split(" (")[0] for row in msymon] == [
        "§5.1 model", "real clips / window slots of the timed batch", "feature-mean model",
        "§5.1 model / feature-mean model: step time",
        "CCLM augmentation alone", "frame store build", "frame store batches, 1 worker: "
        "videos/s, clips/s", "feature-mean batches, 1 worker: videos/s"]
    for row in msymon:  # every cell a number (a ratio ends in x; slots are "n / m")
        cells = re.split(r", | / ", row[1])
        assert all(re.fullmatch(NUMBER + "x?", c) for c in cells), row
    assert ("bench/input.py missing" in got["Input headroom"]
            or rows(got["Input headroom"]))
    targets = rows(got["Targets"])
    assert [row[0] for row in targets] == ["bf16 HCMC paper step MFU",
                                           "decode batched / per-example loop",
                                           "soft-DTW ott-jax / ours (smallest ratio)"]
    assert all(row[3] == "not measured on this device (cpu)" for row in targets), targets
    assert re.fullmatch(NUMBER + " %", targets[0][2]) and re.fullmatch(NUMBER + "x",
                                                                       targets[1][2])


def test_targets_are_marked_against_an_h100():
    from bench.accelerator import targets

    h100 = rows("\n".join(targets({"kind": "NVIDIA H100 80GB HBM3", "mfu": 0.62,
                                   "decode": 12.0})))
    assert [row[3] for row in h100] == ["met", "not met", "not measured (see its section)"]
    assert h100[0][2] == "62.0 %" and h100[1][2] == "12.0x"
    other = rows("\n".join(targets({"kind": "TPU v5 lite", "mfu": 0.7, "dtw": 4.0})))
    assert all(row[3] == "not measured on this device (TPU v5 lite)" for row in other)


def test_bad_flags_are_one_error_line(tmp_path):
    r = run_bench("--smoke", "--bogus=1")
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "bogus" in r.stderr.strip().splitlines()[-1]
    r = run_bench("--smoke")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == "error: --out FILE.md is required"


def test_only_runs_the_named_sections(tmp_path):
    """`--only dtw,contrastive`: those two, the versions and the targets; the rest is absent
    and its targets are not measured."""
    out = tmp_path / "report.md"
    r = run_bench("--smoke", "--only", "dtw,contrastive", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    got = sections(out.read_text())
    assert list(got) == ["Device and versions", "soft-DTW / Drop-DTW vs references",
                         "Sharded contrastive loss", "Targets"]
    assert [row[2] for row in rows(got["Targets"])][:2] == ["not measured", "not measured"]
    r = run_bench("--smoke", "--only", "dtw,bogus", "--out", str(out))
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        "error: --only bogus: choose from versions, train, attention")

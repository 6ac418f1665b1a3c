"""The install over a host's own JAX (`VNR_SYSTEM_JAX=1 bash launch/venv.sh`, issue 31).

A fake host: the base interpreter plus a site directory (on PYTHONPATH) holding jax, jaxlib
and a CUDA plugin of a newer version as installed distributions. launch/venv.sh runs on a
copy of the install files with `VNR_PIP_DRY_RUN`, so pip resolves everything for real
(against the package index) and writes its report without installing anything.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = ("pyproject.toml", "requirements.txt", "requirements-test.txt",
         "requirements-test-nodeps.txt", "requirements-bench.txt", "launch/venv.sh",
         "launch/system_jax.py")
BASE_PYTHON = pathlib.Path(sys.base_prefix) / "bin" / "python{}.{}".format(*sys.version_info)
JAX_STACK = {"jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt"}


def fake_host(site: pathlib.Path, version: str) -> pathlib.Path:
    """`site` with jax, jaxlib and jax-cuda12-plugin `version` as installed distributions."""
    dists = {"jax": [f"jaxlib<={version},>={version}", "ml_dtypes>=0.5.0", "numpy>=2.0",
                     "opt_einsum", "scipy>=1.14"],
             "jaxlib": ["scipy>=1.14", "numpy>=2.0", "ml_dtypes>=0.5.0"],
             "jax-cuda12-plugin": [f"jax-cuda12-pjrt=={version}"]}
    for name, requires in dists.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("".join(
            [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
            + [f"Requires-Dist: {r}\n" for r in requires]))
        (info / "RECORD").write_text("")
    return site


def repo_copy(tmp: pathlib.Path) -> pathlib.Path:
    for f in FILES:
        (tmp / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, tmp / f)
    return tmp


def venv_sh(repo: pathlib.Path, python: pathlib.Path, site: pathlib.Path | None,
            **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    full.update(env, PYTHON=str(python))
    if site is not None:
        full["PYTHONPATH"] = str(site)
    return subprocess.run(["bash", str(repo / "launch/venv.sh")], cwd=repo, env=full,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def index_reachable() -> None:
    if not BASE_PYTHON.is_file():
        pytest.skip(f"no base interpreter at {BASE_PYTHON} to make a fake host from")
    probe = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                            "--no-deps", "--ignore-installed", "ml_collections==1.1.0"],
                           capture_output=True, text=True, timeout=300)
    if probe.returncode:
        pytest.skip("package index unreachable (pip cannot resolve ml_collections): "
                    + (probe.stderr.strip().splitlines() or ["?"])[-1])


def test_system_jax_install_keeps_the_hosts_jax(tmp_path, index_reachable):
    """pip's dry-run report of the VNR_SYSTEM_JAX=1 install: vnr's ranges resolve, and
    nothing of the host's JAX (0.11.0 here, newer than the lock's) is installed or replaced."""
    repo = repo_copy(tmp_path / "repo")
    report = tmp_path / "report.json"
    r = venv_sh(repo, BASE_PYTHON, fake_host(tmp_path / "site", "0.11.0"),
                VNR_SYSTEM_JAX="1", VNR_PIP_DRY_RUN=str(report))
    assert r.returncode == 0, r.stderr
    cfg = (repo / ".venv/pyvenv.cfg").read_text()
    assert "include-system-site-packages = true" in cfg
    installs = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]}
    assert not JAX_STACK & set(installs), {n: installs[n] for n in JAX_STACK & set(installs)}
    for name in ("flax", "optax", "orbax-checkpoint", "grain", "tensorflow-datasets",
                 "transformers", "pytest", "ott-jax"):  # the rest resolves next to it
        assert name in installs, name
    assert installs["transformers"].startswith("4.")


def test_system_jax_without_jax_on_the_host_is_one_error_line(tmp_path):
    """A host interpreter without jax: one error line, exit 2, no .venv made."""
    bare = tmp_path / "bare"
    subprocess.run([str(BASE_PYTHON if BASE_PYTHON.is_file() else sys.executable), "-m", "venv",
                    "--without-pip", str(bare)], check=True, timeout=120)
    repo = repo_copy(tmp_path / "repo")
    r = venv_sh(repo, bare / "bin" / "python", None, VNR_SYSTEM_JAX="1")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: VNR_SYSTEM_JAX=1 but "), r.stderr
    assert "has no jax or jaxlib" in lines[0]
    assert not (repo / ".venv").exists()


def test_system_jax_older_than_the_floor_is_one_error_line(tmp_path):
    """A host JAX below pyproject.toml's jax>=0.10.2: one error line naming both versions."""
    if not BASE_PYTHON.is_file():
        pytest.skip(f"no base interpreter at {BASE_PYTHON}")
    repo = repo_copy(tmp_path / "repo")
    r = venv_sh(repo, BASE_PYTHON, fake_host(tmp_path / "site", "0.9.0"), VNR_SYSTEM_JAX="1")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "jax 0.9.0 is older than vnr's jax>=0.10.2" in lines[0], r.stderr
    assert not (repo / ".venv").exists()


def test_unknown_system_jax_value_is_one_error_line(tmp_path):
    repo = repo_copy(tmp_path / "repo")
    r = venv_sh(repo, pathlib.Path(sys.executable), None, VNR_SYSTEM_JAX="yes")
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: VNR_SYSTEM_JAX=yes: use 1 (the host's JAX) or 0 (the pinned CPU lock)")

"""What the code imports: no private module of a library (a newer JAX, grain, flax, orbax or
TFDS moves those without notice) and every third-party import pinned (issues 31 and 32).

Imports are read from the source (AST, imports inside functions and `try` blocks included),
so a module that is not importable here (a benchmark's optional reference) is checked too.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import pathlib
import re
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIRST_PARTY = {"vnr", "configs", "tfds_builders", "launch", "bench", "tests"}
LIBRARY_TREES = ("vnr", "tfds_builders", "configs", "launch", "bench")
# Benchmark references that the README's .venv does not install (requirements-bench.txt),
# so packages_distributions() cannot name their distribution here: import -> distribution.
NOT_IN_VENV = {"ott": "ott-jax", "tslearn": "tslearn"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _py_files(*trees: str) -> list[pathlib.Path]:
    return sorted(p for t in trees for p in (ROOT / t).rglob("*.py"))


@functools.cache
def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import in `path`; `from a import b` gives "a.b"."""
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def _where(path: pathlib.Path, line: int) -> str:
    return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"


def third_party(name: str) -> bool:
    top = name.split(".")[0]
    return top not in FIRST_PARTY and top not in sys.stdlib_module_names


def private_uses(path: pathlib.Path) -> list[str]:
    """Imports of (and attribute access into) a third-party module's private parts:
    `jax._src...`, `from grain._src... import`, `from flax import _x`, `jax._src.y`."""
    found = [f"{_where(path, line)}: import {name}" for line, name in imports(path)
             if third_party(name) and any(p.startswith("_") and not p.startswith("__")
                                          for p in name.split(".")[1:])]
    tree = _tree(path)
    modules = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
               if isinstance(n, ast.Import) for a in n.names if third_party(a.name)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            found.append(f"{_where(path, node.lineno)}: {node.value.id}.{node.attr}")
    return found


def test_private_use_is_detected(tmp_path):
    """The walker itself: each form of private use is reported, public ones are not."""
    src = tmp_path / "m.py"
    src.write_text("import jax\nfrom grain._src.python import x\nfrom flax import _y\n"
                   "import orbax.checkpoint._src.z\nc = jax._src.distributed\n"
                   "from jax.experimental import multihost_utils\nfrom vnr._private import a\n"
                   "import os\nos._exit\nfrom __future__ import annotations\n")
    found = [f.split(": ", 1)[1] for f in private_uses(src)]
    assert found == ["import grain._src.python.x", "import flax._y",
                     "import orbax.checkpoint._src.z", "jax._src"]


def test_no_private_library_modules():
    """vnr/, tfds_builders/, configs/, launch/, bench/ and tests/ use libraries' public APIs
    only."""
    found = [f for p in _py_files(*LIBRARY_TREES, "tests") for f in private_uses(p)]
    assert not found, "private library modules used (use the public API):\n" + "\n".join(found)


def pins(*files: str) -> dict[str, str]:
    """{distribution: version} of the `name==version` lines of requirement files."""
    out = {}
    for f in files:
        for line in (ROOT / f).read_text().splitlines():
            m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
            if m:
                out[_norm(m.group(1))] = m.group(2)
    return out


@functools.cache
def _packages() -> dict[str, list[str]]:
    return md.packages_distributions()


@functools.cache
def distribution(name: str) -> str | None:
    """The distribution that provides dotted import `name` (None: not installed here)."""
    top = name.split(".")[0]
    dists = _packages().get(top, [])
    if len(dists) > 1:  # a namespace package (google.*): the one that ships this submodule
        sub = "/".join(name.split(".")[:2])
        dists = [d for d in dists if any(str(f).startswith(sub) for f in md.files(d) or [])]
    return _norm(dists[0]) if dists else None


# Golden-fixture scripts run the upstream PyTorch reference code in a scratch environment
# outside the project (tests/golden/README.md); the project never imports them or torch.
GOLDEN_SCRIPTS = "tests/golden/make_*.py"


def unpinned(trees: tuple[str, ...], pinned: dict[str, str]) -> list[str]:
    missing = []
    golden = set(ROOT.glob(GOLDEN_SCRIPTS))
    for path in (p for p in _py_files(*trees) if p not in golden):
        for line, name in imports(path):
            if not third_party(name):
                continue
            top = name.split(".")[0]
            dist = distribution(name)
            if dist is None and top in NOT_IN_VENV:
                dist = _norm(NOT_IN_VENV[top])
            if dist is None or dist not in pinned:
                missing.append(f"{_where(path, line)}: {name} "
                               f"({dist or 'distribution unknown: not installed'})")
    return missing


@pytest.mark.parametrize("trees, files", [
    (("vnr", "tfds_builders", "configs"), ("requirements.txt",)),
    (("launch", "bench"), ("requirements.txt", "requirements-bench.txt")),
    (("tests",), ("requirements.txt", "requirements-test.txt", "requirements-test-nodeps.txt",
                  "requirements-bench.txt")),
])
def test_every_third_party_import_is_pinned(trees, files):
    """Each direct import maps (importlib.metadata.packages_distributions) to a pinned
    distribution: the library to the runtime lock, launch/ and bench/ also to the benchmark pins,
    tests also to the test pins."""
    missing = unpinned(trees, pins(*files))
    assert not missing, f"imported but not pinned in {files}:\n" + "\n".join(missing)


def test_not_in_venv_table_matches_installed_distributions():
    """Where a NOT_IN_VENV package is installed, its real distribution is the table's."""
    for top, dist in NOT_IN_VENV.items():
        have = _packages().get(top)
        assert have is None or _norm(dist) in {_norm(d) for d in have}, (top, have)


def test_pyproject_ranges_start_at_the_pins():
    """pyproject.toml's ranges and the locks name the same packages; each lower bound is the
    pinned version (the code is tested at the bound); transformers stays < 5."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"requirements.txt": project["dependencies"],
              "requirements-test.txt": project["optional-dependencies"]["test"],
              "requirements-bench.txt": project["optional-dependencies"]["bench"]}
    for lock, ranges in groups.items():
        pinned = pins(lock)
        for req in ranges:
            m = re.match(r"^([A-Za-z0-9_.\-]+)\s*>=\s*([^,\s;]+)", req)
            assert m, f"{req!r}: a range starts at the tested version (name>=version)"
            assert pinned.get(_norm(m.group(1))) == m.group(2), (lock, req)
    assert "transformers>=4.57.6,<5" in project["dependencies"]

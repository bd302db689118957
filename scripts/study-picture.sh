#!/usr/bin/env bash
# The README's picture (docs/img/study-report.png): the top of a study report, rendered by
# headless Chromium (as tests/study/test_study.py renders the report).
#
#   scripts/study-picture.sh                  run the default study (what `make study` runs), render it
#   scripts/study-picture.sh RUN [PNG]        render an existing study run (to PNG, default the README's)
#
# Keep the picture current: rerun this after a change to the study or its report.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
run="${1:-}"
png="${2:-$repo/docs/img/study-report.png}"
if [ -z "$run" ]; then
    run="$repo/runs/study-picture-$(date -u +%Y%m%d-%H%M%S)"
    "$repo/.venv/bin/shoal" study --out "$run"
fi
report="$run/report/report.html"
if [ ! -f "$report" ]; then
    echo "study-picture: no report at $report; give a study run directory (runs/study-...)" >&2
    exit 2
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    echo "study-picture: chromium not found; 'make setup' names the package to install (Debian: chromium)" >&2
    exit 2
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# The README shows the verdict, the headline and the first figures: 1100 x 1360 CSS pixels.
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
    --user-data-dir="$profile" --window-size=1100,1360 --screenshot="$png" \
    "file://$(cd "$(dirname "$report")" && pwd)/report.html" 2>/dev/null
echo "$png from $report"

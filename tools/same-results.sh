#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shows that two ipusim binaries give byte-identical results (for changes meant to leave
# behaviour alone): the regression suite's results, and for the eight workload runs
# (configs/runs/{resnet50,bert-large}-pod{16,64,128,256}.yaml) the compiled trace, every file
# of the run directory (stats.json, layers.csv, supersteps.csv, tiles.csv,
# config.resolved.yaml), the timeline and the HTML report.
# Usage: tools/same-results.sh OLD_IPUSIM NEW_IPUSIM
# Build OLD from the revision before the change, e.g.
#   git worktree add /tmp/old HEAD~1 && IPUSIM_BUILD_DIR=/tmp/old/build /tmp/old/tools/build.sh
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: tools/same-results.sh OLD_IPUSIM NEW_IPUSIM" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
produce() {  # BIN OUTDIR
  local bin="$1" out="$2"
  mkdir -p "$out"
  for model in resnet50 bert-large; do
    for size in 16 64 128 256; do
      local run="$model-pod$size" system="$root/configs/systems/pod$size.yaml"
      "$bin" compile --run "$root/configs/runs/$run.yaml" --out "$out/$run.itb" >/dev/null
      "$bin" run --system "$system" --quiet --out "$out/$run" --timeline "$out/$run.timeline.json" \
        "$out/$run.itb" >/dev/null
      "$bin" report "$out/$run" --out "$out/$run.html" >/dev/null
    done
  done
  # The suite's results with the golden comparison itself left out (one line per field).
  "$bin" check --suite "$root/tests/regression/suite.yaml" --jobs 2 --junit "$out/suite.xml" \
    >"$out/suite.txt" 2>&1 || true
  sed -i -E 's/ in [0-9.]+ s with [0-9]+ job\(s\)//; s/time="[0-9.]+"//g' "$out/suite.txt" \
    "$out/suite.xml"
}
produce "$1" "$tmp/old"
produce "$2" "$tmp/new"
# Paths inside the outputs name their directory: compare with it neutralised.
find "$tmp/old" "$tmp/new" -type f \( -name '*.json' -o -name '*.yaml' -o -name '*.csv' \
  -o -name '*.html' -o -name '*.txt' -o -name '*.xml' -o -name 'trace.id' \) \
  -exec sed -i -e "s#$tmp/old#DIR#g; s#$tmp/new#DIR#g" {} +
if diff -r "$tmp/old" "$tmp/new" >"$tmp/diff" 2>&1; then
  echo "same-results: identical ($(find "$tmp/new" -type f | wc -l) files: 8 workload runs" \
    "with traces, timelines and reports, and the regression suite)"
else
  head -n 40 "$tmp/diff" >&2
  echo "same-results: DIFFERENT (above: the first lines of diff -r)" >&2
  exit 1
fi

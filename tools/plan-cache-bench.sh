#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whole-process time of one `ipusim run --run RUN` with the plan cache off, cold (an empty cache
# folder each run) and warm (docs/performance.md "A plan cache"), on one core (taskset -c 0),
# the three interleaved; prints each one's median wall time of N runs (and its spread) and the
# medians of the parts the run logs (its "timing" line: loading configs, compiling, the model,
# outputs; the rest is process start-up and exit). The cache lives in a temporary folder,
# never the user's.
#
# Usage: tools/plan-cache-bench.sh [--build DIR] [--runs N] [RUN.yaml]
#   default RUN: configs/runs/resnet50-pod256.yaml; N: 5; DIR: $IPUSIM_BUILD_DIR or build/
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${IPUSIM_BUILD_DIR:-$root/build}"
runs=5
run="$root/configs/runs/resnet50-pod256.yaml"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift ;;
    --runs) runs="$2"; shift ;;
    -h|--help) sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "tools/plan-cache-bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) run="$1" ;;
  esac
  shift
done
ipusim="$build/bin/ipusim"
[ -x "$ipusim" ] || { echo "tools/plan-cache-bench.sh: no $ipusim (build first)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
pin=(taskset -c 0)
command -v taskset >/dev/null || pin=()

# One run: prints "wall_s configs_s compile_s model_s outputs_s".
one() {
  local cache="$1"; shift
  local start end
  start=$(date +%s%N)
  XDG_CACHE_HOME="$cache" "${pin[@]}" "$ipusim" run -q --log-level info --run "$run" "$@" \
    2>"$tmp/err" >/dev/null
  end=$(date +%s%N)
  local parts
  parts=$(sed -n 's/.*timing wall_ms: configs=\([0-9.]*\) compile=\([0-9.]*\) model=\([0-9.]*\) outputs=\([0-9.]*\).*/\1e-3 \2e-3 \3e-3 \4e-3/p' "$tmp/err")
  echo "$(( (end - start) / 1000 ))e-6 ${parts:-0 0 0 0}"
}

one "$tmp/cache-warm" >/dev/null  # fills the warm cache
for mode in off cold warm; do : >"$tmp/$mode"; done
for ((i = 0; i < runs; i++)); do
  one "$tmp/cache-off" --no-plan-cache >>"$tmp/off"
  rm -rf "$tmp/cache-cold"
  one "$tmp/cache-cold" >>"$tmp/cold"
  one "$tmp/cache-warm" >>"$tmp/warm"
done

median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.4f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%s, %d runs each on one core, interleaved (load average %s)\n' \
  "$(basename "$run")" "$runs" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '| plan cache | whole process s (median) | min - max s | configs s | compile s | model s | outputs s |\n'
printf '|---|---|---|---|---|---|---|\n'
for mode in off cold warm; do
  col() { awk -v c="$1" '{ print $c }' "$tmp/$mode" | median; }
  printf '| %s | %s | %s - %s | %s | %s | %s | %s |\n' "$mode" "$(col 1)" \
    "$(awk '{ print $1 }' "$tmp/$mode" | sort -g | head -1 | awk '{ printf "%.4f", $1 }')" \
    "$(awk '{ print $1 }' "$tmp/$mode" | sort -g | tail -1 | awk '{ printf "%.4f", $1 }')" \
    "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)"
done

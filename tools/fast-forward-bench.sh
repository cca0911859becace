#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fast-forward of repeated iterations (docs/performance.md, issue 54 item 1): whole-process
# wall time of `ipusim run -q --run RUN` on one core (taskset -c 0), median of N runs, with
# and without --no-fast-forward, and the engine's and compile's share (the `perf` line of
# --log-level info: engine wall, and everything else). Rows are run round-robin. Prints one
# table.
#
# Usage: tools/fast-forward-bench.sh [--build DIR] [--runs N] [--full] [CASE ...]
#   CASE      RUN[:GA]: a run config name (configs/runs/RUN.yaml) and optionally a
#             run.gradient_accumulation override; default: resnet50-pod16 at GA 10, 10^4 and
#             10^6, gpt2-xl-pod16, bert-large-pod256
#   --runs N  runs per case (default 5)
#   --full    also time --no-fast-forward (skipped for GA above 10^4: minutes per run)
#   --build DIR  build directory (default: $IPUSIM_BUILD_DIR or build/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${IPUSIM_BUILD_DIR:-$root/build}"
runs=5
full=0
cases=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift ;;
    --runs) runs="$2"; shift ;;
    --full) full=1 ;;
    -h|--help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "tools/fast-forward-bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) cases+=("$1") ;;
  esac
  shift
done
[[ ${#cases[@]} -gt 0 ]] ||
  cases=(resnet50-pod16:10 resnet50-pod16:10000 resnet50-pod16:1000000 gpt2-xl-pod16 bert-large-pod256)
ipusim="$build/bin/ipusim"
[[ -x "$ipusim" ]] || { echo "tools/fast-forward-bench.sh: no $ipusim (build first)" >&2; exit 1; }
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
work="$(mktemp -d "${TMPDIR:-/tmp}/ipusim-ff-bench-XXXXXX")"
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# The rows: a label, a mode and the arguments of `ipusim run`.
labels=(); modes=(); argv=()
for c in "${cases[@]}"; do
  run="${c%%:*}"
  args="--run $root/configs/runs/$run.yaml"
  ga=""
  if [[ "$c" == *:* ]]; then
    ga="${c##*:}"
    args+=" --set run.gradient_accumulation=$ga"
  fi
  labels+=("$run${ga:+ GA $ga}"); modes+=(fast-forward); argv+=("$args")
  if [[ $full == 1 && (-z "$ga" || "$ga" -le 10000) ]]; then
    labels+=("$run${ga:+ GA $ga}"); modes+=(full); argv+=("$args --no-fast-forward")
  fi
done

# Round-robin over the rows, so that a change of the machine's load touches them all alike.
for ((i = 0; i < runs; i++)); do
  for ((r = 0; r < ${#argv[@]}; r++)); do
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    taskset -c 0 "$ipusim" run -q --log-level info ${argv[$r]} >/dev/null 2>"$work/$r.err"
    end=$(date +%s.%N)
    echo "$end - $start" | bc >>"$work/$r.wall"
    sed -n 's/.*perf engine=[a-z]* wall_s=\([0-9.]*\).*/\1/p' "$work/$r.err" >>"$work/$r.engine"
  done
done

echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $runs runs per row (medians)"
printf '| %-28s | %-12s | %8s | %8s | %8s | %8s |\n' case mode "wall s" "min s" "engine s" "other s"
printf '|%s|%s|%s|%s|%s|%s|\n' "------------------------------" "--------------" "----------" "----------" "----------" "----------"
for ((r = 0; r < ${#argv[@]}; r++)); do
  wall=$(median <"$work/$r.wall")
  low=$(sort -g "$work/$r.wall" | head -1)
  engine=$(median <"$work/$r.engine")
  printf '| %-28s | %-12s | %8.3f | %8.3f | %8.3f | %8.3f |\n' "${labels[$r]}" "${modes[$r]}" \
    "$wall" "$low" "$engine" "$(echo "$wall - $engine" | bc)"
done

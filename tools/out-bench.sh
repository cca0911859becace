#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What `--out` adds to a run (docs/performance.md "Statistics once", issue 54 item 3): the
# whole-process wall and CPU time (user + system) of `ipusim run -q --run RUN` with and without
# `--out DIR`, on one core (taskset -c 0), median of N runs, every row run round-robin; with
# --before, an older binary's rows in the same rounds. DIR is a new directory each run (removed
# before it, untimed), or with --reuse the previous run's directory, whose files are replaced.
# Plans come from a warm plan cache in a temporary folder (one untimed run per row fills it),
# never the user's.
#
# Usage: tools/out-bench.sh [--build DIR] [--before IPUSIM] [--runs N] [--reuse] [RUN ...]
#   RUN           a run config name (configs/runs/RUN.yaml); default: resnet50-pod16,
#                 resnet50-pod256, bert-large-pod16, gpt2-medium-pod16, gpt2-xl-pod16
#   --before BIN  also time this ipusim binary (e.g. a build of the commit before a change)
#   --runs N      runs per row (default 5)
#   --reuse       write each run into the directory of the row's previous run
#   --build DIR   build directory (default: $IPUSIM_BUILD_DIR or build/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${IPUSIM_BUILD_DIR:-$root/build}"
runs=5
before=""
reuse=0
configs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift ;;
    --before) before="$(realpath "$2")"; shift ;;
    --runs) runs="$2"; shift ;;
    --reuse) reuse=1 ;;
    -h|--help) sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "tools/out-bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) configs+=("$1") ;;
  esac
  shift
done
[[ ${#configs[@]} -gt 0 ]] ||
  configs=(resnet50-pod16 resnet50-pod256 bert-large-pod16 gpt2-medium-pod16 gpt2-xl-pod16)
ipusim="$build/bin/ipusim"
[[ -x "$ipusim" ]] || { echo "tools/out-bench.sh: no $ipusim (build first)" >&2; exit 2; }
command -v perf >/dev/null ||
  { echo "tools/out-bench.sh: needs perf (perf stat: CPU time of every thread)" >&2; exit 2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/ipusim-out-bench-XXXXXX")"
trap 'rm -rf "$work"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 XDG_CACHE_HOME="$work/cache"
# Both binaries read this checkout's configs and models.
export IPUSIM_DATA_DIR="$root"
pin=(taskset -c 0)
command -v taskset >/dev/null || pin=()

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# The rows: a binary's label and path, a run config, with or without --out.
labels=(); bins=(); names=(); outs=()
for n in "${configs[@]}"; do
  for b in ${before:+before} after; do
    for o in no yes; do
      labels+=("$b"); names+=("$n"); outs+=("$o")
      [[ $b == before ]] && bins+=("$before") || bins+=("$ipusim")
    done
  done
done

# One run of row r: appends its wall and CPU seconds (perf stat's task-clock: every thread,
# user and system) to $work/r.wall and $work/r.cpu.
one() {
  local r="$1" args=(run -q --run "$root/configs/runs/${names[$1]}.yaml") start end
  if [[ ${outs[$r]} == yes ]]; then
    [[ $reuse == 1 ]] || rm -rf "$work/out-$r"
    args+=(--out "$work/out-$r")
  fi
  start=$(date +%s%N)
  perf stat -x, -e task-clock -o "$work/$r.stat" "${pin[@]}" "${bins[$r]}" "${args[@]}" \
    >/dev/null 2>"$work/$r.err" || { cat "$work/$r.err" >&2; exit 1; }
  end=$(date +%s%N)
  echo "($end - $start) / 10^9" | bc -l >>"$work/$r.wall"
  awk -F, '/task-clock/ {print $1 / 1000}' "$work/$r.stat" >>"$work/$r.cpu"
}

for ((r = 0; r < ${#names[@]}; r++)); do  # fills the plan cache; not timed
  one "$r"
  : >"$work/$r.wall"
  : >"$work/$r.cpu"
done
for ((i = 0; i < runs; i++)); do
  for ((r = 0; r < ${#names[@]}; r++)); do one "$r"; done
done

echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $runs runs per row (medians);" \
  "--out into $([[ $reuse == 1 ]] && echo "the previous run's directory" || echo "a new directory")"
printf '| %-20s | %-6s | %21s | %21s | %17s |\n' run binary "without --out: wall / CPU" \
  "with --out: wall / CPU" "--out adds: wall / CPU"
printf '|%s|%s|%s|%s|%s|\n' "----------------------" "--------" "---------------------------" \
  "------------------------" "-------------------------"
for ((r = 0; r < ${#names[@]}; r += 2)); do
  w0=$(median <"$work/$r.wall"); c0=$(median <"$work/$r.cpu")
  w1=$(median <"$work/$((r + 1)).wall"); c1=$(median <"$work/$((r + 1)).cpu")
  printf '| %-20s | %-6s | %11.3f / %.3f s | %11.3f / %.3f s | %+9.0f%% / %+.0f%% |\n' \
    "${names[$r]}" "${labels[$r]}" "$w0" "$c0" "$w1" "$c1" \
    "$(echo "100 * ($w1 - $w0) / $w0" | bc -l)" "$(echo "100 * ($c1 - $c0) / $c0" | bc -l)"
done

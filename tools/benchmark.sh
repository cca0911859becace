#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whole-run benchmarks of ipusim (docs/performance.md): for each case, wall and CPU time, peak
# memory, simulated time / wall time and tile-supersteps simulated per second; the fast engine
# against the reference engine on the same trace (with a check that their stats are
# identical); compile time of each workload. Prints one table.
#
# Usage: tools/benchmark.sh [--quick] [--build DIR] [--keep DIR]
#   --quick      small cases only (about a minute): no workloads, a conv2d stand-in for the
#                fast/reference ratio
#   --build DIR  build directory (default: $IPUSIM_BUILD_DIR or build/, built if missing)
#   --keep DIR   keep traces and logs in DIR instead of a temporary directory
# Micro-benchmarks of the plain C++ parts: <build>/bin/ipusim_bench.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${IPUSIM_BUILD_DIR:-$root/build}"
quick=0
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --build) build="$2"; shift ;;
    --keep) keep="$2"; shift ;;
    -h|--help) sed -n '3,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tools/benchmark.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

ipusim="$build/bin/ipusim"
if [[ ! -x "$ipusim" ]]; then
  echo "building ipusim in $build ..." >&2
  IPUSIM_BUILD_DIR="$build" "$root/tools/build.sh"
fi
timer=/usr/bin/time
if [[ ! -x "$timer" ]]; then
  echo "tools/benchmark.sh: needs GNU time at /usr/bin/time (Debian package 'time')" >&2
  exit 1
fi

if [[ -n "$keep" ]]; then
  work="$keep"
  mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/ipusim-bench-XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
chips="$root/configs/chips"
systems="$root/configs/systems"
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

rows=()
notes=()

# Runs a command under GNU time; sets t_wall t_cpu t_rss_mib. Its stderr goes to $work/$1.err.
timed() {
  local tag="$1"; shift
  if ! "$timer" -f "%e %U %S %M" -o "$work/$tag.time" "$@" >"$work/$tag.out" 2>"$work/$tag.err"; then
    echo "tools/benchmark.sh: '$*' failed:" >&2
    tail -n 5 "$work/$tag.err" >&2
    return 1
  fi
  read -r t_wall t_user t_sys t_rss <"$work/$tag.time"
  t_cpu=$(awk -v u="$t_user" -v s="$t_sys" 'BEGIN { printf "%.2f", u + s }')
  t_rss_mib=$(awk -v k="$t_rss" 'BEGIN { printf "%.0f", k / 1024 }')
}

# Value of key=... in the "perf" line ipusim run logs at --log-level info.
perf_value() { grep -o "perf .*" "$work/$1.err" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

dashes() { printf -- '-%.0s' $(seq 1 "$1"); }

human_time() {  # seconds -> "12.3 ms" etc.
  awk -v s="$1" 'BEGIN {
    if (s >= 1) printf "%.3g s", s; else if (s >= 1e-3) printf "%.3g ms", s * 1e3;
    else printf "%.3g us", s * 1e6 }'
}

row() {  # one table row from printf arguments
  rows+=("$(printf '| %-40s | %-9s | %7s | %7s | %8s | %8s | %8s | %11s | %8s | %8s | %9s |' "$@")")
}

# run TAG LABEL TRACE [ipusim run options...]: one table row for `ipusim run`.
run_case() {
  local tag="$1" label="$2" trace="$3"; shift 3
  # Only the engine comparison writes a run directory (its stats.json are compared): --out
  # also hashes the whole trace for trace.id, which is not part of simulating it.
  local out=()
  [[ $tag == cmp-* ]] && out=(--out "$work/$tag.dir")
  timed "$tag" "$ipusim" run -q --log-level info "${out[@]}" "$@" "$trace" || return 1
  local engine sim_s engine_s engine_cpu supersteps
  engine=$(perf_value "$tag" engine)
  sim_s=$(perf_value "$tag" simulated_s)
  engine_s=$(perf_value "$tag" wall_s)
  engine_cpu=$(perf_value "$tag" cpu_s)
  supersteps=$(perf_value "$tag" tile_supersteps)
  row "$label" "$engine" "$t_wall" "$t_cpu" \
    "$(awk -v e="$engine_s" 'BEGIN { printf "%.3f", e }')" \
    "$(awk -v e="$engine_cpu" 'BEGIN { printf "%.3f", e }')" "$t_rss_mib" "$(human_time "$sim_s")" \
    "$(awk -v s="$sim_s" -v w="$t_wall" 'BEGIN { printf "%.3g", (w > 0 ? s / w : 0) }')" \
    "$(awk -v s="$sim_s" -v c="$t_cpu" 'BEGIN { printf "%.3g", (c > 0 ? s / c : 0) }')" \
    "$(awk -v n="$supersteps" -v c="$engine_cpu" 'BEGIN { printf "%.3g", (c > 0 ? n / c : 0) }')"
  eval "${tag//-/_}_engine_s=$engine_s; ${tag//-/_}_engine_cpu=$engine_cpu; ${tag//-/_}_wall=$t_wall; ${tag//-/_}_cpu=$t_cpu"
}

kernel() {  # kernel TAG ARGS...: writes $work/TAG.itb
  local tag="$1"; shift
  "$ipusim" kernel "$@" --out "$work/$tag.itb" >/dev/null
}

compile_case() {  # compile TAG LABEL RUN_FILE: compile time row, writes $work/TAG.itb
  local tag="$1" label="$2" run_file="$3"
  timed "compile-$tag" "$ipusim" compile --run "$run_file" --out "$work/$tag.itb" || return 1
  row "compile $label" "-" "$t_wall" "$t_cpu" "-" "-" "$t_rss_mib" \
    "$(awk -v b="$(stat -c %s "$work/$tag.itb")" 'BEGIN { printf "%.2f MB itb", b / 1e6 }')" \
    "-" "-" "-"
}

echo "ipusim benchmarks ($([[ $quick == 1 ]] && echo quick || echo full)), $(date -u '+%Y-%m-%d %H:%M UTC')" >&2

# 1. Reference kernels on one GC200 (fast engine).
kernel matmul matmul --m 2048 --n 2048 --k 2048 --dtype half
run_case k-matmul "matmul 2048^3 half" "$work/matmul.itb"
kernel conv conv2d --batch 16 --channels 256 --height 14 --width 14 --filters 256 --kernel 3
run_case k-conv "conv2d 3x3 256->256 14x14 b16" "$work/conv.itb"
kernel reduce reduce --outputs 1000000 --inputs 16
run_case k-reduce "reduce 1M x 16" "$work/reduce.itb"
kernel elementwise elementwise --op gelu --n 16777216
run_case k-elementwise "elementwise gelu 16M" "$work/elementwise.itb"
kernel a2a exchange-all-to-all --bytes 128
run_case k-a2a "exchange all-to-all 1472 x 128 B" "$work/a2a.itb"
kernel bcast exchange-broadcast --bytes 65536
run_case k-bcast "exchange broadcast 64 KiB" "$work/bcast.itb"
kernel syncloop sync-loop --iterations 1000000
run_case k-sync "sync-loop 10^6 (memoised)" "$work/syncloop.itb"
run_case k-sync-full "sync-loop 10^6 --full-loops" "$work/syncloop.itb" --full-loops
kernel ar256 allreduce --bytes 104857600 --group 256
run_case k-ar256 "all-reduce 100 MiB POD256" "$work/ar256.itb" --system "$systems/pod256.yaml"

# 2. Workloads, when the compiler exists.
have_compiler=0
if "$ipusim" compile --help >/dev/null 2>&1 && [[ -f "$root/models/resnet50.yaml" ]]; then
  have_compiler=1
fi
if [[ $quick == 0 && $have_compiler == 1 ]]; then
  for w in resnet50-pod16 resnet50-pod64 resnet50-pod256 bert-large-pod16 bert-large-pod64; do
    run_file="$root/configs/runs/$w.yaml"
    if [[ ! -f "$run_file" ]]; then
      row "$w" "n/a: no configs/runs/$w.yaml" "" "" "" "" "" "" "" "" ""
      continue
    fi
    system="${w##*-}"
    if compile_case "$w" "$w" "$run_file"; then
      run_case "w-$w" "$w step" "$work/$w.itb" --system "$systems/$system.yaml" ||
        row "$w step" "run failed" "" "" "" "" "" "" "" "" ""
    else
      row "compile $w" "failed" "" "" "" "" "" "" "" "" ""
    fi
  done
elif [[ $quick == 0 ]]; then
  for w in resnet50-pod16 resnet50-pod64 resnet50-pod256 bert-large-pod16 bert-large-pod64; do
    row "$w" "n/a (compiler not available)" "" "" "" "" "" "" "" "" ""
  done
fi

# 2b. Issue 14's targets: the default job compiled and simulated in one process, and a
# 64-point what-if sweep of the ResNet-50 POD16 step (clock x tiles x exchange width).
if [[ $quick == 0 && $have_compiler == 1 ]]; then
  timed onep "$ipusim" run --run "$root/configs/runs/resnet50-pod16.yaml" -q &&
    row "resnet50-pod16 compile+run, one process" "-" "$t_wall" "$t_cpu" "-" "-" "$t_rss_mib" "" "" "" ""
  cat >"$work/whatif64.yaml" <<SPEC
format: ipusim-sweep/1
name: whatif64
base:
  run: $root/configs/runs/resnet50-pod16.yaml
axes:
  - chip.clock: [1.0GHz, 1.325GHz, 1.6GHz, 1.85GHz]
  - chip.tiles: [1024, 1216, 1472, 1856]
  - chip.exchange.bytes_per_cycle: [2B/cycle, 4B/cycle, 8B/cycle, 16B/cycle]
SPEC
  timed sweep64 "$ipusim" sweep "$work/whatif64.yaml" --out "$work/whatif64" --jobs "$(nproc)" --quiet &&
    row "64-point ResNet-50 POD16 sweep, --jobs $(nproc)" "-" "$t_wall" "$t_cpu" "-" "-" "$t_rss_mib" "" "" "" ""
fi

# 3. Fast engine against the reference engine on the same trace, in this run. The single-IPU
# ResNet-50 micro-batch when the compiler exists (full mode), else a conv2d stand-in.
if [[ $quick == 0 && $have_compiler == 1 ]]; then
  ratio_label="ResNet-50 micro-batch, 1 IPU"
  timed compile-r50-1 "$ipusim" compile --run "$root/configs/runs/resnet50-pod16.yaml" \
    --set run.replicas=1 --set run.gradient_accumulation=1 --set run.batchnorm_group=1 \
    --out "$work/r50-1.itb"
  ratio_trace="$work/r50-1.itb"
else
  ratio_label="conv2d stand-in (3x3 256ch 14x14 b16)"
  ratio_trace="$work/conv.itb"
fi
run_case cmp-fast "$ratio_label" "$ratio_trace"
run_case cmp-ref "$ratio_label" "$ratio_trace" --engine reference
identical=no
cmp -s "$work/cmp-fast.dir/stats.json" "$work/cmp-ref.dir/stats.json" && identical=yes

# 4. The table.
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
echo
echo "Machine: ${cpu:-unknown CPU}, $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB;" \
  "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); commit" \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo '+changes')"
echo
printf '| %-40s | %-9s | %7s | %7s | %8s | %8s | %8s | %11s | %8s | %8s | %9s |\n' "case" "engine" \
  "wall s" "cpu s" "eng. s" "eng. cpu" "peak MiB" "simulated" "sim/wall" "sim/cpu" "tss/cpu-s"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' "$(dashes 42)" "$(dashes 11)" "$(dashes 9)" \
  "$(dashes 9)" "$(dashes 10)" "$(dashes 10)" "$(dashes 10)" "$(dashes 13)" "$(dashes 10)" \
  "$(dashes 10)" "$(dashes 11)"
printf '%s\n' "${rows[@]}"
echo
awk -v fc="$cmp_fast_engine_cpu" -v rc="$cmp_ref_engine_cpu" -v f="$cmp_fast_engine_s" \
    -v r="$cmp_ref_engine_s" -v fw="$cmp_fast_wall" -v rw="$cmp_ref_wall" -v label="$ratio_label" \
    -v same="$identical" 'BEGIN {
  printf "fast/reference on %s:\n", label
  printf "  engine CPU %.3f s vs %.3f s = %.0fx; engine wall %.3f s vs %.3f s = %.0fx;\n",
    fc, rc, (fc > 0 ? rc / fc : 0), f, r, (f > 0 ? r / f : 0)
  printf "  whole process wall %.2f s vs %.2f s = %.1fx; stats.json identical: %s\n",
    fw, rw, (fw > 0 ? rw / fw : 0), same }'
echo
echo "wall s, cpu s: the whole 'ipusim' process (GNU time; cpu = user + system; without --out,"
echo "except for the two engine-comparison rows, which write stats.json). eng. s, eng. cpu:"
echo "the model only (elaboration + simulation + statistics; no config or trace reading), wall"
echo "and CPU. peak MiB: maximum resident set. sim/wall, sim/cpu: simulated time per second of"
echo "process wall / CPU time. tss/cpu-s: tile-supersteps (tiles x compute phases) simulated per"
echo "CPU second of the model. docs/performance.md explains each figure."
[[ $identical == yes ]] || { echo "error: the engines disagree on $ratio_trace" >&2; exit 1; }

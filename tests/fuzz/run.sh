#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets (clang, ASan + UBSan, like the "fuzz" preset) into build-fuzz/
# (or $IPUSIM_FUZZ_BUILD_DIR) and fuzzes each for SECONDS (default 60), $IPUSIM_JOBS targets at
# a time; the targets added in issue 16 (model run_config sweep_spec golden run_dir: small
# YAML and JSON readers, which reach their depth quickly) run for half of SECONDS by default,
# so that the CI stage (10 targets, two at a time) stays within about six minutes. Seeds: tests/fuzz/<target>/corpus and .../crashes (read only); new inputs go to
# <build>/corpus/<target>, crash inputs to <build>/artifacts/<target>/. Quiet on success apart
# from one line per target; on a crash prints the end of the log and exits 1.
# Every run is appended to <build>/fuzz-totals.tsv (target, seconds, executions, status).
# IPUSIM_FUZZ_RSS_MB raises libFuzzer's RSS limit (default 2048) for hour-long runs, where the
# fuzzer's own per-input state grows.
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]     targets: config text_trace binary_trace
#        model run_config sweep_spec golden run_dir report onnx   (a target named explicitly runs
#        SECONDS); onnx (binary protobuf) takes inputs of up to 64 KiB, the others 16 KiB
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${IPUSIM_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${IPUSIM_JOBS:-$(nproc)}"
seconds="${1:-60}"
[ $# -gt 0 ] && shift
targets=("$@")
half_time=()
if [ ${#targets[@]} -eq 0 ]; then
  targets=(config text_trace binary_trace model run_config sweep_spec golden run_dir report onnx)
  half_time=(model run_config sweep_spec golden run_dir report onnx)
fi

mkdir -p "$build"
log="$build/build.log"
if ! { CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DCMAKE_CXX_COMPILER=clang++ -DIPUSIM_FUZZ=ON -DIPUSIM_BUILD_TESTS=OFF &&
       cmake --build "$build" --target fuzz_targets -j "$jobs"; } >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "fuzz build failed; full log: $log" >&2
  exit 1
fi

run_one() {
  local t="$1" src="$root/tests/fuzz/$1"
  local work="$build/corpus/$t" art="$build/artifacts/$t/" tlog="$build/fuzz-$t.log"
  mkdir -p "$work" "$art"
  local status=ok start=$SECONDS secs_for="$seconds" max_len=16384
  [ "$t" = onnx ] && max_len=65536
  [[ " ${half_time[*]} " == *" $t "* ]] && secs_for=$(( (seconds + 1) / 2 ))
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
  "$build/fuzz/fuzz_$t" -max_total_time="$secs_for" -timeout=10 -rss_limit_mb="${IPUSIM_FUZZ_RSS_MB:-2048}" \
    -max_len="$max_len" -dict="$root/tests/fuzz/$t.dict" -artifact_prefix="$art" \
    -print_final_stats=1 "$work" "$src/corpus" "$src/crashes" </dev/null >"$tlog" 2>&1 || status=crash
  local execs secs=$((SECONDS - start))
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$tlog" | tail -n 1)"
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$secs" "${execs:-0}" \
    "$status" >>"$build/fuzz-totals.tsv"
  echo "$status" >"$build/status-$t"
  if [ "$status" != ok ]; then
    tail -n 60 "$tlog" >&2
    echo "fuzz $t: CRASH after ${execs:-?} executions in $secs s; input in $art (log: $tlog)" >&2
    return 1
  fi
  echo "fuzz $t: ${execs:-?} executions in $secs s, no crash"
}

for t in "${targets[@]}"; do
  [ -x "$build/fuzz/fuzz_$t" ] || { echo "no fuzz target '$t'" >&2; exit 2; }
  rm -f "$build/status-$t"
done
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$t" &
done
wait || true
failed=0
for t in "${targets[@]}"; do
  [ "$(cat "$build/status-$t" 2>/dev/null)" = ok ] || failed=1
done
exit "$failed"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command (b): installs what is missing, builds everything and runs the whole test
# suite with CTest. Quiet on success apart from the skipped tests and CTest's summary, which
# is always the last line; on failure prints the failing tests' output, then the summary.
#
#   tools/run-tests.sh           release build in build/ (or $IPUSIM_BUILD_DIR)
#   tools/run-tests.sh --asan    the same suite built with clang, AddressSanitizer and
#                                UndefinedBehaviorSanitizer in build-asan/ (preset "asan";
#                                docs/reliability.md); prints one line "asan+ubsan: <summary>"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mode=release
case "${1:-}" in
  "") ;;
  --asan) mode=asan ;;
  *) echo "usage: tools/run-tests.sh [--asan]" >&2; exit 2 ;;
esac
"$root/tools/install-deps.sh"
if [ "$mode" = asan ]; then
  build="${IPUSIM_ASAN_BUILD_DIR:-$root/build-asan}"
  mkdir -p "$build"
  # Pick the compiler and sanitizers on first configure; tools/build.sh keeps the cache.
  if [ ! -f "$build/CMakeCache.txt" ] &&
     ! CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER=clang++ \
         -DIPUSIM_SANITIZE=address,undefined >"$build/configure.log" 2>&1; then
    cat "$build/configure.log" >&2
    exit 1
  fi
  # Any sanitizer report fails the test that triggered it (also in child ipusim processes).
  # detect_stack_use_after_return stays off: SystemC switches stacks for its threads.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  # use_stacks=0: LeakSanitizer does not take thread stacks as roots. Debian's SystemC
  # annotates its coroutine switches for ASan (__sanitizer_start/finish_switch_fiber), and at
  # exit the main thread's recorded stack can still be a coroutine stack that SystemC has
  # already unmapped; scanning it crashed LeakSanitizer's tracer ("Tracer caught signal 11")
  # depending on memory layout. Leak checking runs after main returns, when stack objects are
  # gone, so stacks add no roots there; without them the check is if anything stricter.
  # No leak suppressions: a thread left waiting in a group step when a model error stops the
  # simulation holds nothing that owns memory on its stack (src/model/fabric.cpp).
  export LSAN_OPTIONS="${LSAN_OPTIONS:-use_stacks=0}"
else
  build="${IPUSIM_BUILD_DIR:-$root/build}"
fi
IPUSIM_BUILD_DIR="$build" "$root/tools/build.sh"
cd "$build"
summary() { grep -E "^[0-9]+% tests passed" "$build/ctest.log" | tail -n 1; }
# Every test is bounded (IPUSIM_TEST_TIMEOUT seconds, default 900; the slowest takes about 95 s
# under ASan): a test that hangs fails with CTest's "***Timeout" and its name instead of
# holding the suite. Tests with their own TIMEOUT property keep it.
if ! ctest --output-on-failure --timeout "${IPUSIM_TEST_TIMEOUT:-900}" \
     -j "${IPUSIM_JOBS:-$(nproc)}" >"$build/ctest.log" 2>&1; then
  grep -vE "^ +[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed" "$build/ctest.log" | tail -n 200 >&2
  if [ "$mode" = asan ]; then echo "asan+ubsan: $(summary)"; else summary; fi
  exit 1
fi
if [ "$mode" = asan ]; then
  echo "asan+ubsan: $(summary)"
else
  # Skipped tests (known bugs, docs/reliability.md), the time, and CTest's summary line last.
  sed -n '/^The following tests did not run:/,/^$/p' "$build/ctest.log" | sed '/^$/d'
  grep -E "^Total Test time" "$build/ctest.log" | tail -n 1
  summary
fi

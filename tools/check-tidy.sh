#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs clang-tidy with the checks of .clang-tidy (bug-finding checks only) over src/. Any
# finding fails. Configures its own compile database in build-tidy/ (no build needed).
# Usage: tools/check-tidy.sh [FILE-REGEX]   (default: every .cpp under src/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
db="${IPUSIM_TIDY_DIR:-$root/build-tidy}"
jobs="${IPUSIM_JOBS:-$(nproc)}"
mkdir -p "$db"
cmake -S "$root" -B "$db" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >"$db/configure.log" 2>&1 || { cat "$db/configure.log" >&2; exit 1; }
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! run-clang-tidy -p "$db" -j "$jobs" -quiet "${1:-$root/src/.*\.cpp}" >"$log" 2>&1 ||
   grep -qE "(warning|error):" "$log"; then
  # Without colour codes (run-clang-tidy asks for colour even when not on a terminal).
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E -A3 "(warning|error):" >&2 || tail -n 40 "$log" >&2
  echo "check-tidy: clang-tidy found problems (checks: .clang-tidy)" >&2
  exit 1
fi
echo "check-tidy: $(grep -c '^clang-tidy' "$log" || true) files clean"

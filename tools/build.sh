#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds ipusim into build/ (or $IPUSIM_BUILD_DIR). Quiet on success; on
# failure prints the end of the build log. Usage: tools/build.sh [cmake --build args...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${IPUSIM_BUILD_DIR:-$root/build}"
jobs="${IPUSIM_JOBS:-$(nproc)}"
mkdir -p "$build"
log="$build/build.log"
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build" -j "$jobs" "$@"; } >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "build failed; full log: $log" >&2
  exit 1
fi

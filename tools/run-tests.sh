#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command (b): installs what is missing, builds everything and runs the whole test
# suite with CTest. Quiet on success apart from CTest's closing summary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${IPUSIM_BUILD_DIR:-$root/build}"
"$root/tools/install-deps.sh"
"$root/tools/build.sh"
cd "$build"
if ! ctest --output-on-failure -j "${IPUSIM_JOBS:-$(nproc)}" >"$build/ctest.log" 2>&1; then
  grep -vE "^ +[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed" "$build/ctest.log" | tail -n 200 >&2
  exit 1
fi
tail -n 3 "$build/ctest.log"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command (a): installs what is missing, builds, and runs the default job.
# The default job is the reference matmul kernel (2048 x 2048 x 2048, half) on one GC200;
# its results go to out/default/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install-deps.sh"
"$root/tools/build.sh" --target ipusim
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
out="$root/out/default"
mkdir -p "$out"
"$bin" kernel matmul --m 2048 --n 2048 --k 2048 --dtype half --out "$out/matmul.trace" >/dev/null
"$bin" run --chip "$root/configs/chips/gc200.yaml" --out "$out" "$out/matmul.trace"

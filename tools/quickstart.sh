#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command (a): installs what is missing, builds, and runs the default job: one
# ResNet-50 training step on IPU-POD16 (MLPerf v1.1 configuration), compiled in memory and
# simulated in one process (no trace file). Results go to out/default/ (stats.json,
# config.resolved.yaml, trace.id, tiles.csv, supersteps.csv).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install-deps.sh"
"$root/tools/build.sh" --target ipusim
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
out="$root/out/default"
mkdir -p "$out"
"$bin" run --run "$root/configs/runs/resnet50-pod16.yaml" --out "$out"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command (a): installs what is missing, builds, and runs the default job: one
# ResNet-50 training step on IPU-POD16 (MLPerf v1.1 configuration), compiled and simulated.
# Results go to out/default/ (stats.json, config.resolved.yaml, trace.id).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install-deps.sh"
"$root/tools/build.sh" --target ipusim
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
out="$root/out/default"
mkdir -p "$out"
"$bin" compile --run "$root/configs/runs/resnet50-pod16.yaml" --out "$out/resnet50-pod16.itb" >/dev/null
"$bin" run --system "$root/configs/systems/pod16.yaml" --out "$out" "$out/resnet50-pod16.itb"

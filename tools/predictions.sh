#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The prediction table of docs/workloads.md: every ResNet-50 and BERT-Large run config on its
# IPU-POD and on the Bow IPU-POD of the same size, compiled and simulated with this build.
# Prints a Markdown table: step time, throughput, time to train, compile wall time, simulate
# wall time and peak resident memory (GNU time). Usage: tools/predictions.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "| run | system | IPUs | step time | throughput | time to train | compile | simulate (wall, peak RSS) |"
echo "|---|---|---|---|---|---|---|---|"
for model in resnet50 bert-large; do
  for size in 16 64 128 256; do
    for sys in pod bow-pod; do
      run="$model-pod$size"
      system="$root/configs/systems/$sys$size.yaml"
      start=$(date +%s.%N)
      "$bin" compile --run "$root/configs/runs/$run.yaml" --system "$system" --out "$tmp/t.itb" >/dev/null
      compiled=$(date +%s.%N)
      SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 /usr/bin/time -f "%e %M" -o "$tmp/time" \
        "$bin" run --system "$system" --out "$tmp/r" "$tmp/t.itb" >/dev/null
      python3 - "$tmp/r/stats.json" "$run" "$(python3 -c "print($compiled - $start)")" "$(cat "$tmp/time")" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
run, compile_s = sys.argv[2], float(sys.argv[3])
wall, rss_kib = sys.argv[4].split()
w = s["workload"]
unit = w["samples_per_step"]["unit"]
step = w["step_time"]["value"]
print(f"| {run} | {s['system']['name']} | {s['system']['ipus']['value']} | "
      f"{step * 1e3:.1f} ms | {w['throughput']['value']:,.0f} {unit}/s | "
      f"{w['time_to_train']['total']['value'] / 60:.1f} min | {compile_s:.1f} s | "
      f"{float(wall):.2f} s, {int(rss_kib) // 1024} MiB |")
PY
    done
  done
done

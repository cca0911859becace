#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fits each run's step time as a x GA + c from simulations at two gradient-accumulation
# counts (docs/workloads.md "Step shape"): a = one micro-batch (one pipeline cycle for a
# pipelined model), c = the per-step work (all-reduce, optimiser, host; for a pipeline also
# its fill and flush). Prints a Markdown table. Usage: tools/step-model.sh [RUN...]
# (default: the ResNet-50 and BERT-Large runs for POD16 to POD256).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(resnet50-pod16 resnet50-pod64 resnet50-pod128 resnet50-pod256
                                bert-large-pod16 bert-large-pod64 bert-large-pod128 bert-large-pod256)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
step_ms() {  # run, GA -> simulated step time in ms; keeps stats.json as $tmp/<GA>.json
  "$bin" compile --run "$root/configs/runs/$1.yaml" --set "run.gradient_accumulation=$2" --out "$tmp/t.itb" >/dev/null
  SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 "$bin" run --out "$tmp/r" "$tmp/t.itb" --system "$(sed -n 's/^ *system: *//p' "$root/configs/runs/$1.yaml" | head -1 | sed "s|^|$root/configs/runs/|")" >/dev/null
  cp "$tmp/r/stats.json" "$tmp/$2.json"
  python3 -c "import json;print(json.load(open('$tmp/r/stats.json'))['total']['time']['value']*1e3)"
}
echo "| run | GA (config) | step at GA=4 | step at GA=8 | a (ms per micro-batch) | c (ms per step) | c at the config's GA | c by phase (ms) |"
echo "|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  ga="$(sed -n 's/^ *gradient_accumulation: *\([0-9]*\).*/\1/p' "$root/configs/runs/$run.yaml" | head -1)"
  t1="$(step_ms "$run" 4)"
  t2="$(step_ms "$run" 8)"
  python3 - "$run" "$ga" "$t1" "$t2" "$tmp/4.json" "$tmp/8.json" <<'PY'
import json, sys
run, ga, t1, t2 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
s1, s2 = (json.load(open(f)) for f in sys.argv[5:7])
a = (t2 - t1) / 4
c = t1 - 4 * a
# The same straight-line fit per phase of the reported IPU: what c is made of.
parts = []
for k in s1["phases"]:
    p1, p2 = (s["phases"][k]["time"]["value"] * 1e3 for s in (s1, s2))
    ck = p1 - 4 * (p2 - p1) / 4
    if abs(ck) >= 0.05:
        parts.append(f"{k} {ck:.1f}")
print(f"| {run} | {ga} | {t1:.2f} ms | {t2:.2f} ms | {a:.3f} | {c:.2f} | {100 * c / (a * ga + c):.1f}% | {', '.join(parts)} |")
PY
done

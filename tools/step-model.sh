#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fits each run's step time as a x GA + c from simulations at half, once and twice the run's
# gradient-accumulation count (docs/workloads.md "Step shape"), by least squares, and reports
# how far the middle point lies off the line: a = one micro-batch (one pipeline cycle for a
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
echo "| run | GA (config) | steps at GA/2, GA, 2GA (ms) | a (ms per micro-batch) | c (ms per step) | c at the config's GA | off the line | c by phase (ms) |"
echo "|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  ga="$(sed -n 's/^ *gradient_accumulation: *\([0-9]*\).*/\1/p' "$root/configs/runs/$run.yaml" | head -1)"
  g1=$(( ga / 2 > 0 ? ga / 2 : 1 ))
  g3=$(( 2 * ga ))
  t1="$(step_ms "$run" "$g1")"
  t2="$(step_ms "$run" "$ga")"
  t3="$(step_ms "$run" "$g3")"
  python3 - "$run" "$g1" "$ga" "$g3" "$t1" "$t2" "$t3" "$tmp/$g1.json" "$tmp/$g3.json" <<'PY'
import json, sys
run = sys.argv[1]
g = [int(x) for x in sys.argv[2:5]]
t = [float(x) for x in sys.argv[5:8]]
s1, s3 = (json.load(open(f)) for f in sys.argv[8:10])
n = len(g)
mg, mt = sum(g) / n, sum(t) / n
a = sum((x - mg) * (y - mt) for x, y in zip(g, t)) / sum((x - mg) ** 2 for x in g)
c = mt - a * mg
off = max(abs(y - (a * x + c)) / y for x, y in zip(g, t))
# What c is made of: the same line through the outer points, phase by phase (reported IPU).
parts = []
for k in s1["phases"]:
    p1, p3 = (s["phases"][k]["time"]["value"] * 1e3 for s in (s1, s3))
    ck = p1 - g[0] * (p3 - p1) / (g[2] - g[0])
    if abs(ck) >= 0.05:
        parts.append(f"{k} {ck:.1f}")
ga = g[1]
print(f"| {run} | {ga} | {t[0]:.2f}, {t[1]:.2f}, {t[2]:.2f} | {a:.3f} | {c:.2f} | "
      f"{100 * c / (a * ga + c):.1f}% | {100 * off:.1f}% | {', '.join(parts)} |")
PY
done

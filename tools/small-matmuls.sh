#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The small matmuls of issue 28, item 1 (docs/codelets.md "Small matmuls and FCs"): for each
# M x K x N (M the batch rows of a fully connected layer), the plan `ipusim kernel matmul`
# chooses (its splits of rows, output and input channels, and whether its operands are
# swapped: C^T = B^T A^T, N rows and M output channels) and its vertex (the AMP unless named:
# poplin's HMAC vertex where that is cheaper, e.g. in float), its estimate (poplin's objective: no
# fixed exchange or sync cost), and what the simulated kernel spends where: the fetch exchange,
# the vertex, the reduction stages, the syncs, and how much of the total is fixed cost (90
# cycles a sync, 100 an exchange, 12 a compute set: configs/chips/gc200.yaml,
# docs/codelets.md). The last column runs the unswapped product alone, as a 1x1 conv of M
# one-pixel images (`ipusim kernel conv2d`, planned unswapped and charged no rearrangement).
# Prints a Markdown table. Usage: tools/small-matmuls.sh [--dtype half|float] [extra ipusim
# options, e.g. --set ...]; --dtype goes to the kernels only (half by default).
#
# With --training instead (docs/codelets.md "A fully connected layer's passes planned
# together"): for each M x K x N of a training grid, poplin's two totals as ipusim's planner
# computes them (the joint plan's three estimates, and the separate plans' three plus the weight
# gradient's move to the weights' layout; plan::plan_fully_connected), the choice, the joint
# forward plan's tiles (rows x input channels, every output channel on each tile), and the
# simulated training step of the layer (`ipusim kernel matmul --pass training`: forward, data
# gradient, weight gradient, SGD update) with the passes planned as chosen and each on its own
# (--fully-connected-pass no). Usage: tools/small-matmuls.sh --training [extra ipusim kernel
# options, e.g. --available-memory 0.6 or --set ...] (the kernel's default proportion is 0.6).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
if [[ "${1:-}" == --training ]]; then
  shift
  extra=("$@")
  training_shapes=("4 1024 1024" "16 1024 1024" "16 2048 1000" "20 2048 1000" "16 1280 1000"
                   "16 96 4" "16 1152 48" "64 1024 1024" "128 1024 1024" "1024 1024 1024"
                   "1024 1024 4096")
  total() { "$bin" run "$1" "${extra[@]}" | awk '$1 == "total" {print $2; exit}'; }
  echo "| M x K x N | joint estimate | separate estimate | planned | joint forward: tiles (rows x in) | simulated, as planned | simulated, each pass on its own |"
  echo "|---|---|---|---|---|---|---|"
  for s in "${training_shapes[@]}"; do
    read -r m k n <<<"$s"
    "$bin" kernel matmul --m "$m" --k "$k" --n "$n" --pass training "${extra[@]}" \
      --log-level info --out "$tmp/a.trace" 2>"$tmp/a.log" >/dev/null
    "$bin" kernel matmul --m "$m" --k "$k" --n "$n" --pass training --fully-connected-pass no \
      "${extra[@]}" --out "$tmp/b.trace" >/dev/null
    python3 - "$tmp/a.log" "$m" "$k" "$n" "$(total "$tmp/a.trace")" "$(total "$tmp/b.trace")" <<'PY'
import re, sys
log, m, k, n, a, b = sys.argv[1:]
line = next(l for l in open(log) if "three passes planned" in l)
how = re.search(r"planned (\w+)", line).group(1)
joint, sep = re.search(r"joint (\d+|none fits)(?: cycles)?, separate (\d+)", line).groups()
tiles = re.search(r"on (\d+) x (\d+) tiles", line)
splits = f"{int(tiles[1]) * int(tiles[2])} ({tiles[1]} x {tiles[2]})" if tiles else "-"
joint = f"{int(joint):,}" if joint.isdigit() else joint
print(f"| {m} x {k} x {n} | {joint} | {int(sep):,} | {how} | {splits} | {int(a):,} | {int(b):,} |")
PY
  done
  exit 0
fi
shapes=("16 96 4" "16 4 96" "16 1152 48" "16 48 1152" "4 1024 1024" "16 1024 1024"
        "16 1024 2" "16 1280 1000" "16 2048 1000" "4 2048 1000")
dtype=half
if [[ "${1:-}" == --dtype ]]; then
  dtype="$2"
  shift 2
fi
run() {  # NAME KERNEL OPTIONS...: plan log and superstep table of one kernel
  "$bin" kernel "$2" "${@:3}" --dtype "$dtype" "${extra[@]}" --out "$tmp/$1.trace" --log-level info \
    2>"$tmp/$1.log" >/dev/null
  "$bin" run "$tmp/$1.trace" --out "$tmp/$1" "${extra[@]}" >/dev/null
}
extra=("$@")
echo "| M x K x N | plan: tiles (rows x out x in), form | estimate | fetch | vertex | reduction (exchange + compute) | syncs | simulated | fixed share | unswapped (a conv of M images): tiles, simulated |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for s in "${shapes[@]}"; do
  read -r m k n <<<"$s"
  run a matmul --m "$m" --k "$k" --n "$n"
  run b conv2d --batch "$m" --channels "$k" --height 1 --width 1 --filters "$n"
  python3 - "$tmp" "$m" "$k" "$n" <<'PY'
import csv, re, sys
tmp, m, k, n = sys.argv[1], *sys.argv[2:]
def plan(name):
    log = open(f"{tmp}/{name}.log").read()
    return re.search(r"plan of (\d+) tiles \(splits: \d+ groups x (\d+) rows x (\d+) out x "
                     r"(\d+) in(, operands swapped)?\).*?(, \w+ vertex)?, \d+ B per tile, estimated (\d+) cycles",
                     log).groups()
def steps(name):
    return list(csv.DictReader(open(f"{tmp}/{name}/supersteps.csv")))
def total(rows):
    return sum(int(r[c]) for r in rows for c in ("compute_cycles", "sync_cycles", "exchange_cycles"))
tiles, rws, out, ins, swapped, vertex, est = plan("a")
rows = steps("a")
# A superstep's exchange follows its compute set: the first (unnamed) one is the fetch, the
# conv's and each reduce stage's but the last carry the next stage's partials.
fetch = sum(int(r["exchange_cycles"]) for r in rows if r["step"] == "")
moves = sum(int(r["exchange_cycles"]) for r in rows if r["step"] != "")
amp = sum(int(r["compute_cycles"]) for r in rows if r["step"] == "conv")
reduce = sum(int(r["compute_cycles"]) for r in rows if r["step"].startswith("reduce"))
syncs = sum(int(r["sync_cycles"]) for r in rows)
exchanges = sum(1 for r in rows if int(r["exchange_cycles"]) > 0)
compute_sets = sum(1 for r in rows if r["step"] != "")
fixed = syncs + 100 * exchanges + 12 * compute_sets
tb, rb, ob, ib, _, _, _ = plan("b")
form = ("swapped" if swapped else "unswapped") + (vertex.replace(" vertex", "") if vertex else "")
print(f"| {m} x {k} x {n} | {tiles} ({rws} x {out} x {ins}), {form} | {int(est):,} | {fetch:,} | {amp:,} | "
      f"{moves:,} + {reduce:,} | {syncs} | {total(rows):,} | {100 * fixed / total(rows):.0f}% | "
      f"{tb} ({rb} x {ob} x {ib}), {total(steps('b')):,} |")
PY
done

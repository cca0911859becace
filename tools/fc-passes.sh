#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A fully connected layer's three training passes planned together or not (issue 28, item 1;
# docs/codelets.md "A fully connected layer's passes planned together"): for each M x K x N
# (M the batch rows), poplin's two totals as ipusim's planner computes them (the joint plan's
# three estimates, and the separate plans' three plus the weight gradient's move to the weights'
# layout; plan::plan_fully_connected), the choice, the joint forward plan's splits (rows x input
# channels, every output channel on each tile), and the simulated training step of the layer
# (`ipusim kernel matmul --pass training`: forward, data gradient, weight gradient, SGD update)
# with the passes planned as chosen and each on its own (--fully-connected-pass no).
# Prints a Markdown table. Usage: tools/fc-passes.sh [extra ipusim kernel options, e.g.
# --available-memory 0.6 or --set ...] (the kernel's default proportion is 0.6).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
shapes=("4 1024 1024" "16 1024 1024" "16 2048 1000" "20 2048 1000" "16 1280 1000" "16 96 4"
        "16 1152 48" "64 1024 1024" "128 1024 1024" "1024 1024 1024" "1024 1024 4096")
extra=("$@")
cycles() { "$bin" run "$1" "${extra[@]}" | awk '$1 == "total" {print $2; exit}'; }
echo "| M x K x N | joint estimate | separate estimate | planned | joint forward: tiles (rows x in) | simulated, as planned | simulated, each pass on its own |"
echo "|---|---|---|---|---|---|---|"
for s in "${shapes[@]}"; do
  read -r m k n <<<"$s"
  "$bin" kernel matmul --m "$m" --k "$k" --n "$n" --pass training "${extra[@]}" \
    --log-level info --out "$tmp/a.trace" 2>"$tmp/a.log" >/dev/null
  "$bin" kernel matmul --m "$m" --k "$k" --n "$n" --pass training --fully-connected-pass no \
    "${extra[@]}" --out "$tmp/b.trace" >/dev/null
  a="$(cycles "$tmp/a.trace")"
  b="$(cycles "$tmp/b.trace")"
  python3 - "$tmp/a.log" "$tmp/a.trace" "$m" "$k" "$n" "$a" "$b" <<'PY'
import re, sys
log, trace, m, k, n, a, b = sys.argv[1:]
line = next(l for l in open(log) if "three passes planned" in l)
how = re.search(r"planned (\w+)", line).group(1)
joint, sep = re.search(r"joint (\d+|none fits)(?: cycles)?, separate (\d+)", line).groups()
m_split = re.search(r"on (\d+) x (\d+) tiles", line)
splits = f"{int(m_split[1]) * int(m_split[2])} ({m_split[1]} x {m_split[2]})" if m_split else "-"
ja = f"{int(joint):,}" if joint.isdigit() else joint
print(f"| {m} x {k} x {n} | {ja} | {int(sep):,} | {how} | {splits} | {int(a):,} | {int(b):,} |")
PY
done

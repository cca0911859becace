#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The table of every shipped run config (docs/workloads.md "Every shipped run config", issue 26
# item 5): for each configs/runs/*.yaml, its model, system, parallelism, samples per step and
# precision (read from the file), its header's "# Source:" and "# Simplifications:" entries,
# and the step time and throughput `ipusim run --run` predicts with this build. Prints a
# Markdown table; a config that fails to compile or run is a row saying so, and the script exits
# 1 at the end. Usage: tools/run-table.sh [RUN.yaml ...]   (default: every configs/runs/*.yaml)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
[[ -x "$bin" ]] || { echo "tools/run-table.sh: build ipusim first (tools/build.sh)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
runs=("$@")
[[ ${#runs[@]} -gt 0 ]] || runs=("$root"/configs/runs/*.yaml)
echo "| run | model | system | replicas x IPUs | samples per step | precision | source | simplifications | step time | throughput |"
echo "|---|---|---|---|---|---|---|---|---|---|"
failed=0
for run in "${runs[@]}"; do
  rm -rf "$tmp/out"
  status=ok
  "$bin" run -q --run "$run" --out "$tmp/out" >/dev/null 2>"$tmp/err" || status=failed
  [[ $status == ok ]] || failed=1
  python3 - "$run" "$tmp/out/stats.json" "$status" "$tmp/err" <<'PY'
import json, os, re, sys
run_file, stats_file, status, err_file = sys.argv[1:5]
text = open(run_file).read()
# The header's "# Source:" and "# Simplifications:" entries (continued on "#   " lines).
fields, current = {}, None
for line in text.splitlines():
    m = re.match(r"^# (Source|Simplifications): (.*)$", line)
    if m:
        current = m.group(1)
        fields[current] = m.group(2).strip()
    elif current and line.startswith("#   "):
        fields[current] += " " + line[4:].strip()
    else:
        current = None
source, simpl = fields.get("Source", "-"), fields.get("Simplifications", "-")
keys = {}
for line in text.splitlines():
    m = re.match(r"^  ([a-z_]+): *(.*?)\s*(#.*)?$", line)
    if m and m.group(1) not in keys:
        keys[m.group(1)] = m.group(2).strip('"')
model = os.path.splitext(os.path.basename(keys.get("model", "-")))[0]
system = os.path.splitext(os.path.basename(keys.get("system", "-")))[0]
replicas, ipus = keys.get("replicas", "?"), keys.get("ipus_per_replica", "?")
batch = "?"
name = os.path.splitext(os.path.basename(run_file))[0]
if status == "ok":
    w = json.load(open(stats_file))["workload"]
    batch = f"{w['samples_per_step']['value']:,.0f} {w['samples_per_step']['unit']}"
    step = w["step_time"]["value"]
    step = f"{step * 1e3:.1f} ms" if step < 1 else f"{step:.2f} s"
    tput = f"{w['throughput']['value']:,.0f} {w['throughput']['unit']}"
else:
    first = open(err_file).read().strip().splitlines()
    step, tput = "failed", (first[-1] if first else "").replace("|", "/")
cell = lambda s: s.replace("|", "/")
print(f"| {name} | {model} | {system} | {replicas} x {ipus} | {batch} | "
      f"{keys.get('precision', '-')} | {cell(source)} | {cell(simpl)} | {step} | {tput} |")
PY
done
exit $failed

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The five calibration points of ../shared/reference/workloads.md with this build: ResNet-50 on
# IPU-POD16 (29,500 images/s) and IPU-POD256 (345,000 images/s), BERT-Large on IPU-POD16
# (1,525 sequences/s) and IPU-POD64 (4,803 sequences/s), and ViT-B/16 fine-tuning on Bow-Pod16
# (7,319 images/s, §5), each run config compiled and simulated in one process
# (`ipusim run --run`, on the point's system). Prints a Markdown table of step time,
# throughput, the error against the measured throughput and where the time went on the
# reported IPU (docs/workloads.md "Scale-out"). Extra arguments go to every run, e.g.
#   tools/calibration-points.sh --set fabric.gw_link.latency=3us
# The measured numbers judge the model; they set no parameter (workloads.md §4).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# run:measured[:system] (the run config's own system when none is given)
points=("resnet50-pod16:29500" "resnet50-pod256:345000" "bert-large-pod16:1525"
        "bert-large-pod64:4803" "vit-b16-finetune-pytorch-pod16:7319:bow-pod16")
echo "| point | measured | step | predicted | error | compute / exchange / sync / collective / other |"
echo "|---|---|---|---|---|---|"
for p in "${points[@]}"; do
  IFS=: read -r run measured system <<<"$p"
  args=(--run "$root/configs/runs/$run.yaml")
  [[ -n "$system" ]] && args+=(--system "$root/configs/systems/$system.yaml")
  SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 "$bin" run "${args[@]}" "$@" --out "$tmp/$run" >/dev/null
  python3 - "$tmp/$run/stats.json" "$run${system:+ on $system}" "$measured" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
run, measured = sys.argv[2], float(sys.argv[3])
w = s["workload"]
tput = w["throughput"]["value"]
unit = w["sample_unit"] if "sample_unit" in w else "samples"
share = {k: v["share"]["value"] for k, v in s["phases"].items()}
main = ["compute", "exchange", "sync", "collective"]
other = 1 - sum(share.get(k, 0) for k in main)
split = " / ".join(f"{100 * share.get(k, 0):.0f}" for k in main) + f" / {100 * other:.0f} %"
print(f"| {run} | {measured:,.0f}/s | {w['step_time']['value'] * 1e3:.2f} ms | {tput:,.0f}/s | "
      f"{100 * (tput / measured - 1):+.1f}% | {split} |")
PY
done

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The two calibration points of ../shared/reference/workloads.md (ResNet-50 and BERT-Large on
# IPU-POD16) under the compiler's structural switches (run.rearrangements,
# run.fuse_elementwise, run.batchnorm_statistics_cache): all three off, then each added in
# turn, then each alone turned off; last, batch norm and ReLU fused (run.norm_lowering).
# Prints a Markdown table of step time, throughput, error against the measured point and the
# time split (docs/workloads.md "Where every percent comes from").
# Usage: tools/calibration.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
off="--set run.rearrangements=no --set run.fuse_elementwise=no --set run.batchnorm_statistics_cache=no"
# Cumulative: the layout-aware compiler with the three switchable pieces off, then each added
# in turn; then each of them alone turned off from the full compiler.
variants=("layouts, layout-aware reductions, grouped attention (switches off)|$off"
          "+ rearrangements|--set run.fuse_elementwise=no --set run.batchnorm_statistics_cache=no"
          "+ elementwise fusion|--set run.batchnorm_statistics_cache=no"
          "+ statistics caching (all on, the default)|"
          "all on but rearrangements|--set run.rearrangements=no"
          "all on but fusion|--set run.fuse_elementwise=no"
          "all on but statistics caching|--set run.batchnorm_statistics_cache=no"
          "all on, batch norm and ReLU fused instead of through popnn|--set run.norm_lowering=fused")
echo "| compiler | ResNet-50 step | images/s | vs 29,500 | compute / exchange / sync / other | BERT-Large step | sequences/s | vs 1,525 | compute / exchange / sync / other |"
echo "|---|---|---|---|---|---|---|---|---|"
for v in "${variants[@]}"; do
  name="${v%%|*}"
  sets="${v#*|}"
  row="| $name"
  for run in resnet50-pod16:29500 bert-large-pod16:1525; do
    # shellcheck disable=SC2086
    "$bin" compile --run "$root/configs/runs/${run%%:*}.yaml" $sets --out "$tmp/t.itb" >/dev/null
    SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 "$bin" run --system "$root/configs/systems/pod16.yaml" --out "$tmp/r" "$tmp/t.itb" >/dev/null
    row+="$(python3 - "$tmp/r/stats.json" "${run##*:}" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
measured = float(sys.argv[2])
w = s["workload"]
tput = w["throughput"]["value"]
share = {k: v["share"]["value"] for k, v in s["phases"].items()}
other = 1 - share["compute"] - share["exchange"] - share["sync"]
print(f" | {w['step_time']['value'] * 1e3:.1f} ms | {tput:,.0f} | {100 * (tput / measured - 1):+.1f}% | "
      f"{100 * share['compute']:.0f} / {100 * share['exchange']:.0f} / {100 * share['sync']:.0f} / "
      f"{100 * other:.0f} %", end="")
PY
)"
  done
  echo "$row |"
done

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Simulates the single-layer training program (forward, data gradient, weight gradient, SGD
# update; docs/workloads.md "Single-layer training programs") of each distinct ResNet-50 conv
# shape at micro-batch 20 and each BERT-Large matmul at micro-batch 2 packs x 512 tokens,
# with FP16 inputs, float partials and available-memory proportion 0.6, and prints a
# Markdown table. Usage: tools/layer-table.sh [ipusim run options, e.g. --chip FILE]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim"
opts=(--pass training --partials float --available-memory 0.6)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

# name | shape | kernel arguments
layers=(
  "conv1 (stem)|7x7/2 3->64 at 224|conv2d --channels 3 --height 224 --width 224 --filters 64 --kernel 7 --stride 2"
  "stage 1 1x1 reduce|1x1 256->64 at 56|conv2d --channels 256 --height 56 --width 56 --filters 64 --kernel 1"
  "stage 1 3x3|3x3 64->64 at 56|conv2d --channels 64 --height 56 --width 56 --filters 64 --kernel 3"
  "stage 1 1x1 expand (= projection)|1x1 64->256 at 56|conv2d --channels 64 --height 56 --width 56 --filters 256 --kernel 1"
  "stage 2 1x1 reduce|1x1 512->128 at 28|conv2d --channels 512 --height 28 --width 28 --filters 128 --kernel 1"
  "stage 2 3x3|3x3 128->128 at 28|conv2d --channels 128 --height 28 --width 28 --filters 128 --kernel 3"
  "stage 2 1x1 expand|1x1 128->512 at 28|conv2d --channels 128 --height 28 --width 28 --filters 512 --kernel 1"
  "stage 2 projection|1x1/2 256->512 at 56|conv2d --channels 256 --height 56 --width 56 --filters 512 --kernel 1 --stride 2"
  "stage 3 1x1 reduce|1x1 1024->256 at 14|conv2d --channels 1024 --height 14 --width 14 --filters 256 --kernel 1"
  "stage 3 3x3|3x3 256->256 at 14|conv2d --channels 256 --height 14 --width 14 --filters 256 --kernel 3"
  "stage 3 1x1 expand|1x1 256->1024 at 14|conv2d --channels 256 --height 14 --width 14 --filters 1024 --kernel 1"
  "stage 3 projection|1x1/2 512->1024 at 28|conv2d --channels 512 --height 28 --width 28 --filters 1024 --kernel 1 --stride 2"
  "stage 4 1x1 reduce|1x1 2048->512 at 7|conv2d --channels 2048 --height 7 --width 7 --filters 512 --kernel 1"
  "stage 4 3x3|3x3 512->512 at 7|conv2d --channels 512 --height 7 --width 7 --filters 512 --kernel 3"
  "stage 4 1x1 expand|1x1 512->2048 at 7|conv2d --channels 512 --height 7 --width 7 --filters 2048 --kernel 1"
  "stage 4 projection|1x1/2 1024->2048 at 14|conv2d --channels 1024 --height 14 --width 14 --filters 2048 --kernel 1 --stride 2"
  "BERT QKV|1024x3072x1024|matmul --m 1024 --n 3072 --k 1024"
  "BERT attention out|1024x1024x1024|matmul --m 1024 --n 1024 --k 1024"
  "BERT FFN1|1024x4096x1024|matmul --m 1024 --n 4096 --k 1024"
  "BERT FFN2|1024x1024x4096|matmul --m 1024 --n 1024 --k 4096"
)

echo "| layer | shape (MxNxK for matmuls) | cycles | time (us) | compute / exchange / sync % | AMP utilisation |"
echo "|---|---|---|---|---|---|"
for entry in "${layers[@]}"; do
  IFS='|' read -r name shape args <<<"$entry"
  batch=()
  [[ $args == conv2d* ]] && batch=(--batch 20)
  # shellcheck disable=SC2086
  "$bin" kernel $args "${batch[@]}" "${opts[@]}" "$@" --out "$tmp/layer.itb" >/dev/null
  rm -rf "$tmp/run"
  "$bin" run --out "$tmp/run" "$@" "$tmp/layer.itb" >/dev/null
  python3 - "$name" "$shape" "$tmp/run/stats.json" <<'PY'
import json, sys
name, shape, path = sys.argv[1:4]
s = json.load(open(path))
v = lambda *keys: (lambda d: [d := d[k] for k in keys][-1])(s)["value"]
share = lambda kind: 100 * v("phases", kind, "share")
print(f"| {name} | {shape} | {int(v('total', 'cycles')):,} | {v('total', 'time') * 1e6:,.1f} | "
      f"{share('compute'):.0f} / {share('exchange'):.0f} / {share('sync'):.0f} | "
      f"{100 * v('throughput', 'utilisation'):.1f}% |")
PY
done

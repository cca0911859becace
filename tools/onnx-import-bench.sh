#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cost of importing a large ONNX export (issue 52: at most 2 s and 300 MB for 500 MB):
# writes, with python3-onnx and numpy, a VGG-16-shaped graph whose 138 M float32 weights are
# stored inline (553 MB, as torch.onnx.export writes a model under 2 GB), then runs
# `ipusim validate` on it (read, import, build the tensor graph, count its parameters) five
# times and prints the median wall time and the largest resident set size.
# Usage: tools/onnx-import-bench.sh [MODEL.onnx]   (default: the generated VGG-16)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BIN:-$root/build/bin/ipusim}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
model="${1:-}"
if [ -z "$model" ]; then
  model="$tmp/vgg16_inline.onnx"
  /usr/bin/python3 - "$model" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

nodes, inits = [], []
x, c, size = "images", 3, 224
def weight(name, shape):
    inits.append(numpy_helper.from_array(np.zeros(shape, np.float32), name))
    return name
for i, (out, convs) in enumerate([(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]):
    for j in range(convs):
        y = f"b{i}c{j}"
        nodes.append(helper.make_node("Conv", [x, weight(y + ".w", [out, c, 3, 3]), weight(y + ".b", [out])],
                                      [y], name=y, pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [y], [y + "r"], name=y + "r"))
        x, c = y + "r", out
    nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], name=f"p{i}", kernel_shape=[2, 2],
                                  strides=[2, 2]))
    x, size = f"p{i}", size // 2
nodes.append(helper.make_node("Flatten", [x], ["flat"], name="flat"))
x, features = "flat", c * size * size
for k, out in enumerate([4096, 4096, 1000]):
    y = f"fc{k}"
    nodes.append(helper.make_node("Gemm", [x, weight(y + ".w", [out, features]), weight(y + ".b", [out])],
                                  [y], name=y, transB=1))
    x, features = y, out
g = helper.make_graph(nodes, "vgg16", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 224, 224])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 1000])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
fi
echo "model: $model ($(du -m "$model" | cut -f1) MB)"
times=() rss=0
for _ in 1 2 3 4 5; do
  out="$( { /usr/bin/time -f '%e %M' "$bin" validate "$model" >/dev/null; } 2>&1 | tail -1)"
  times+=("${out% *}")
  r="${out#* }"
  [ "$r" -gt "$rss" ] && rss="$r"
done
median="$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)"
echo "ipusim validate: median wall ${median} s, max RSS $((rss / 1024)) MB"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command (a): installs what is missing, builds, and runs the default job: one
# ResNet-50 training step on IPU-POD16 (MLPerf v1.1 configuration), compiled in memory and
# simulated in one process (no trace file). Results go to out/default/ (stats.json,
# config.resolved.yaml, trace.id, tiles.csv, supersteps.csv). Also builds the Python package
# and makes 'import ipusim' work (docs/python.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install-deps.sh"
"$root/tools/build.sh" --target ipusim ipusim_python
build="${IPUSIM_BUILD_DIR:-$root/build}"
bin="$build/bin/ipusim"
# docs/python.md: 'import ipusim' from the system Python, through a .pth file naming the build
# tree's package (rewritten when it names another build; skipped without write access). The
# system Python is Debian's /usr/bin/python3, the interpreter install-deps.sh installed pandas
# and matplotlib for (another python3 first on the PATH, such as a pyenv shim, lacks them).
python=/usr/bin/python3
[ -x "$python" ] || python="$(command -v python3 || true)"
site="$([ -n "$python" ] && "$python" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)"
if [ -n "$site" ] && { [ -d "$site" ] || mkdir -p "$site" 2>/dev/null; } && [ -w "$site" ]; then
  pth="$site/ipusim.pth"
  [ "$(cat "$pth" 2>/dev/null)" = "$build/python" ] || echo "$build/python" >"$pth"
else
  echo "quickstart: cannot install the Python package's .pth file; use PYTHONPATH=$build/python" >&2
fi
out="$root/out/default"
mkdir -p "$out"
"$bin" run --run "$root/configs/runs/resnet50-pod16.yaml" --out "$out"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages ipusim needs, only those that are missing. Idempotent and
# quiet when everything is present. Must run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libsystemc-dev libyaml-cpp-dev libboost-program-options-dev libfmt-dev libspdlog-dev
  libgtest-dev libbenchmark-dev
  # docs/performance.md "Memory allocator": the ipusim executable's malloc, on huge pages
  libmimalloc-dev
  # docs/architecture.md: nlohmann-json parses every JSON file ipusim reads (util/json_reader)
  nlohmann-json3-dev
  # docs/reliability.md: clang + compiler-rt for the ASan/UBSan build and the libFuzzer
  # targets, llvm for llvm-symbolizer (readable sanitizer stack traces)
  clang libclang-rt-14-dev llvm
  # docs/architecture.md: clang-format checks the layout of every C++ file in CI, clang-tidy
  # runs a short list of bug-finding checks over src/
  clang-format clang-tidy
  # docs/sweeps.md: 'mpirun -np N ipusim sweep' spreads sweep points over MPI ranks
  openmpi-bin libopenmpi-dev
  # docs/reports.md: headless Chromium renders `ipusim report` pages in the report tests
  # (they fail, not skip, without it)
  chromium
  # docs/python.md: the Python package's tests (pytest), its tables (pandas) and the worked
  # study's plot (matplotlib)
  python3 python3-pytest python3-pandas python3-matplotlib
  # docs/onnx.md: tools/make-onnx-models.py builds the ONNX test graphs (its test checks they
  # reproduce tests/data/onnx/ byte for byte)
  python3-onnx
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
if ! { $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "install-deps: apt-get failed (see above)" >&2
  exit 1
fi
rm -f "$log"

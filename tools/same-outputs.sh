#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that two ipusim binaries write byte-identical outputs (issue 17: a refactoring must
# not change results): every configs/runs/*.yaml run directory (stats.json, CSVs, resolved
# config) with its compiled trace (and, for ResNet-50 and BERT-Large, its Perfetto timeline),
# the scaling sweep (configs/sweeps/scaling.yaml: sweep.json, sweep.csv, point
# records), the HTML reports of a run and of the sweep, `ipusim compare` of two runs, and the
# regression goldens written afresh by `ipusim check --update` into a copy of the suite.
# Prints one line per differing file and exits 1 if any differs.
#
# Usage: tools/same-outputs.sh OLD_IPUSIM NEW_IPUSIM [WORK_DIR]
#   e.g. keep the binary of the commit before a change (cp build/bin/ipusim /tmp/ipusim-old),
#   rebuild, then: tools/same-outputs.sh /tmp/ipusim-old build/bin/ipusim
# About a minute per binary on an idle 2-core machine; one process at a time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ $# -lt 2 || $# -gt 3 ]]; then
  sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
old="$(realpath "$1")"
new="$(realpath "$2")"
work="${3:-$(mktemp -d)}"
mkdir -p "$work"
# Both binaries read this checkout's configs and models (a binary built elsewhere would default
# to its own source tree, whose paths then enter the sweep's point ids).
export IPUSIM_DATA_DIR="$root"
# Sweep point ids hash the build's source identity, which differs between the two builds by
# construction; both use one here, so that their points keep the same ids (docs/sweeps.md).
export IPUSIM_SOURCE_IDENTITY=same-outputs

# The outputs name their directories (reports, compare), so both binaries write into the same
# path, $work/out, which is then renamed.
outputs() {  # BINARY NAME: every output of the binary into $work/NAME
  local bin="$1" out="$work/out" f n
  rm -rf "$out" "$work/$2"
  mkdir -p "$out"
  for f in "$root"/configs/runs/*.yaml; do
    n="$(basename "$f" .yaml)"
    # Timelines of the MLPerf workloads only (a GPT-2 step's thousands of pipeline cycles
    # would write gigabytes).
    local timeline=()
    [[ $n == resnet50* || $n == bert-large* ]] && timeline=(--timeline "$out/timelines/$n.json")
    "$bin" run -q --run "$f" --out "$out/runs/$n" --save-trace "$out/traces/$n.itb" \
      "${timeline[@]}"
  done
  "$bin" sweep "$root/configs/sweeps/scaling.yaml" --out "$out/sweep" --jobs 1 >/dev/null
  "$bin" report "$out/runs/bert-large-pod16" --out "$out/report-run.html" \
    --compare "$out/runs/bert-large-pod64" >/dev/null
  "$bin" report "$out/sweep" --out "$out/report-sweep.html" >/dev/null
  "$bin" compare "$out/runs/resnet50-pod16" "$out/runs/resnet50-pod64" >"$out/compare.txt"
  # A copy of the suite beside links to the repository's configs, models and test data (its
  # paths are relative), with no goldens: --update writes every one.
  local tree="$work/tree"
  rm -rf "$tree"
  mkdir -p "$tree/tests"
  ln -s "$root/configs" "$tree/configs"
  ln -s "$root/models" "$tree/models"
  ln -s "$root/tests/data" "$tree/tests/data"
  cp -r "$root/tests/regression" "$tree/tests/regression"
  rm -rf "$tree/tests/regression/golden"
  "$bin" check --suite "$tree/tests/regression/suite.yaml" --jobs 1 --update >/dev/null
  mv "$tree/tests/regression/golden" "$out/golden"
  rm -rf "$tree"
  # The lock files are empty and the logs name the directory: neither is an output.
  find "$out" \( -name .ipusim.lock -o -name '*.log' \) -delete
  mv "$out" "$work/$2"
}

outputs "$old" old
outputs "$new" new
( cd "$work/old" && find . -type f | sort ) >"$work/old.files"
( cd "$work/new" && find . -type f | sort ) >"$work/new.files"
status=0
if ! diff -q "$work/old.files" "$work/new.files" >/dev/null; then
  echo "different file lists:"
  diff "$work/old.files" "$work/new.files" || true
  status=1
fi
count=0
while read -r f; do
  [[ -f "$work/new/$f" ]] || continue
  count=$((count + 1))
  if ! cmp -s "$work/old/$f" "$work/new/$f"; then
    echo "differs: $f"
    status=1
  fi
done <"$work/old.files"
if [[ $status == 0 ]]; then
  echo "same-outputs: $count files byte-identical ($work/old, $work/new)"
fi
exit $status

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sweeps all-reduce over 2..256 IPUs and 1 KiB..512 MiB and writes a CSV (default
# out/allreduce_sweep.csv). Each group runs on the smallest POD that holds it; each point is
# its own ipusim process. Columns: ipus, bytes, system, method, cycles, seconds, algbw_GBps
# (bytes / time), busbw_GBps (2 (n-1)/n x bytes / time, comparable to one link direction).
# The sweep stops at 512 MiB: a 1 GiB tensor does not fit in one GC200 (1472 x 624 KiB =
# 897 MiB of In-Processor-Memory), and the kernel keeps the tensor on the tiles.
# Usage: tools/allreduce_sweep.sh [OUT.csv] [METHOD]   (METHOD: auto, ring, ...; default auto)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${IPUSIM_BIN:-${IPUSIM_BUILD_DIR:-$root/build}/bin/ipusim}"
out="${1:-$root/out/allreduce_sweep.csv}"
method="${2:-auto}"
[ -x "$bin" ] || { echo "allreduce_sweep: build first (tools/build.sh); no $bin" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tmp="$out.tmp.$$"
echo "ipus,bytes,system,method,cycles,seconds,algbw_GBps,busbw_GBps" > "$tmp"
for n in 2 4 8 16 32 64 128 256; do
  if [ "$n" -le 16 ]; then sys=pod16; elif [ "$n" -le 64 ]; then sys=pod64; else sys=pod$n; fi
  for p in $(seq 10 29); do
    bytes=$((1 << p))
    "$bin" kernel allreduce --bytes "$bytes" --group "$n" --method "$method" --out "$work/t.itb" >/dev/null
    "$bin" run -q --system "$root/configs/systems/$sys.yaml" --out "$work/run" "$work/t.itb"
    # stats.json: the first "value" after "total" is cycles, the next is seconds.
    read -r cycles seconds < <(awk '/"total"/{t=1} t && /"value"/{gsub(/[ ,]/,"");split($0,a,":");v[++i]=a[2]; if(i==2){print v[1], v[2]; exit}}' "$work/run/stats.json")
    awk -v n="$n" -v b="$bytes" -v s="$sys" -v m="$method" -v c="$cycles" -v t="$seconds" \
      'BEGIN{printf "%d,%d,%s,%s,%d,%.9g,%.6g,%.6g\n", n, b, s, m, c, t, b/t/1e9, 2*(n-1)/n*b/t/1e9}' >> "$tmp"
  done
  echo "allreduce_sweep: $n IPUs done" >&2
done
mv "$tmp" "$out"
echo "wrote $out"

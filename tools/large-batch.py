#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The AMP vertices of ResNet-50's convolutions at micro-batch 20 and at a large batch (issue 28,
item 3; docs/codelets.md "Large batches"). For each conv shape and batch, `ipusim kernel conv2d`
plans the forward conv (half inputs and partials, available memory 0.6); the busiest tile's AMP
vertex (the most MACs) is then run alone as a one-vertex trace with the closed form (poplibs'
estimator) and with the instruction-level tile model (chip.tile_model=isa), and with a second
binary for comparison if one is given. Prints a Markdown table: the vertex's positions, input and
output channels and kernel, its cycles (less the compute set's 12), the part of them the
supervisor spends loading weights into the engines (one load of engines x 16 halves per input
group, output group and kernel position, at 8 B/cycle with Poplar's 64-bit loads), and its MACs
a cycle against the AMP's 64 (GC200 half).

Usage: tools/large-batch.py [--before OLD_IPUSIM] [--batch N]   (default batch 80)
"""
import argparse
import os
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("IPUSIM_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "ipusim")
# ResNet-50's distinct conv shapes: name, channels, size, filters, kernel, stride.
SHAPES = [("stage 1 1x1 reduce", 256, 56, 64, 1, 1), ("stage 1 3x3", 64, 56, 64, 3, 1),
          ("stage 1 1x1 expand", 64, 56, 256, 1, 1), ("stage 2 3x3", 128, 28, 128, 3, 1),
          ("stage 3 1x1 reduce", 1024, 14, 256, 1, 1), ("stage 3 3x3", 256, 14, 256, 3, 1),
          ("stage 4 1x1 expand", 512, 7, 2048, 1, 1), ("stage 4 3x3", 512, 7, 512, 3, 1)]
ENV = dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True, env=ENV).stdout


def busiest_vertex(trace):
    best, most = None, -1
    for line in open(trace):
        m = re.match(r"\s*vertex tiles=\S+ (amp_conv(?:1x1|nx1)) (.*)", line)
        if not m:
            continue
        p = dict(kv.split("=") for kv in m.group(2).split())
        macs = int(p["positions"]) * int(p["in_chans"]) * int(p["out_chans"]) * int(
            p.get("groups", 1)) * int(p.get("kernel_h", 1)) * int(p.get("kernel_w", 1))
        if macs > most:
            best, most = (m.group(1), m.group(2), p), macs
    return best, most


def weight_loads(p):
    """Supervisor cycles of the vertex's weight loads (GC200, half inputs)."""
    engines = 16 if p["partials"] == "half" else 8
    height = int(p.get("weight_height", 1)) or 1
    rate = 8 if p.get("coeff_load_bits", "64") == "64" else 16
    per_load = engines * 16 * 2 // rate
    in_groups = -(-int(p["in_chans"]) // (16 // height))
    out_groups = -(-int(p["out_chans"]) // engines)
    kernel = -(-int(p.get("kernel_h", 1)) // height) * int(p.get("kernel_w", 1))
    return int(p.get("groups", 1)) * in_groups * out_groups * kernel * per_load


def vertex_cycles(binary, codelet, params, isa=False):
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write(f"ipusim-trace 5\nname one_vertex\nreplicas 1\nipu 0\ncomputeset c\n"
                f"  vertex tiles=0 {codelet} {params}\nend\nprogram\n  compute c\nend\n")
    try:
        out = run([binary, "run", f.name] + (["--set", "chip.tile_model=isa"] if isa else []))
    finally:
        os.unlink(f.name)
    return int(re.search(r"^\s+compute\s+(\d+) cycles", out, re.M).group(1)) - 12


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="a second ipusim binary to compare the closed form with")
    ap.add_argument("--batch", type=int, default=80, help="the large micro-batch (default 80)")
    a = ap.parse_args()
    head = "| conv | batch | vertex: positions x in x out, kernel |"
    head += " before |" if a.before else ""
    print(head + " closed form (poplibs' estimator) | isa | of which weight loads | MAC/cycle |")
    print("|---" * (8 + (1 if a.before else 0)) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, c, hw, k, kern, stride in SHAPES:
            for batch in (20, a.batch):
                trace = os.path.join(tmp, "k.trace")
                run([BIN, "kernel", "conv2d", "--batch", str(batch), "--channels", str(c),
                     "--height", str(hw), "--width", str(hw), "--filters", str(k), "--kernel",
                     str(kern), "--stride", str(stride), "--available-memory", "0.6", "--out",
                     trace])
                (codelet, params, p), macs = busiest_vertex(trace)
                closed = vertex_cycles(BIN, codelet, params)
                isa = vertex_cycles(BIN, codelet, params, isa=True)
                row = (f"| {name} | {batch} | {p['positions']} x {p['in_chans']} x "
                       f"{p['out_chans']}, {p.get('kernel_h', 1)}x{p.get('kernel_w', 1)} |")
                if a.before:
                    row += f" {vertex_cycles(a.before, codelet, params):,} |"
                print(row + f" {closed:,} | {isa:,} | {weight_loads(p):,} |"
                      f" {macs / closed:.1f} |")


if __name__ == "__main__":
    main()

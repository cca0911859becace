#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Convolutions with few channels per conv group (issue 28, item 2; docs/codelets.md "Few channels
per group"). Two tables, in Markdown:

1. EfficientNet-B0 POD16's depthwise convs (configs/runs/efficientnet-b0-pod16.yaml): for each
   conv and pass, the plan with this binary (its vertex: the AMP on conv groups combined into
   block-diagonal weights, or poplin's SLIC vertex; its tiles, estimate and simulated cycles from
   plan.csv) and, with --before OLD_IPUSIM, the plan of a binary without SLIC; then the step.
2. The first layers (ResNet-50's 7x7 conv on 3 channels, EfficientNet's 3x3 stem): the AMP
   vertex the planner runs on its busiest tile (`ipusim kernel conv2d`, half partials, available
   memory 0.15 as the runs have it) against the SLIC vertex (1x4 grouping: 4 output channels a
   tile, the 3 input channels padded to 4, 4 chains) on a split over the same 1,472 tiles, each
   a one-vertex trace run with the closed form. The compute set's 12 cycles are taken off.

Usage: tools/few-channels.py [--before OLD_IPUSIM]
"""
import argparse
import csv
import importlib.util
import math
import os
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("IPUSIM_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "ipusim")
ENV = dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1", IPUSIM_DATA_DIR=ROOT)
RUN = os.path.join(ROOT, "configs", "runs", "efficientnet-b0-pod16.yaml")
# First layers: name, batch, channels, size, filters, kernel, stride.
FIRST = [("ResNet-50 conv1", 20, 3, 224, 64, 7, 2), ("EfficientNet-B0 stem", 10, 3, 224, 32, 3, 2)]
TILES = 1472
# tools/large-batch.py's one-vertex runs and busiest-vertex search.
_spec = importlib.util.spec_from_file_location(
    "large_batch", os.path.join(os.path.dirname(os.path.abspath(__file__)), "large-batch.py"))
large_batch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(large_batch)


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True, env=ENV).stdout


def plans(binary, tmp, tag):
    out = os.path.join(tmp, tag)
    text = run([binary, "run", "--run", RUN, "--out", out])
    step = re.search(r"per step of ([\d.]+) ms", text).group(1)
    rows = [r for r in csv.DictReader(open(os.path.join(out, "plan.csv")))
            if "_cg" in r["name"] and "kernel=1 " not in r["shape"]]
    return {(r["layer"], r["pass"]): r for r in rows}, float(step)


def depthwise_table(before):
    with tempfile.TemporaryDirectory() as tmp:
        now, step = plans(BIN, tmp, "now")
        old, old_step = plans(before, tmp, "before") if before else ({}, None)
    head = "| layer | pass | channels, field, kernel, stride |"
    head += " before: vertex, tiles, simulated |" if before else ""
    print(head + " now: vertex, tiles, estimate, simulated |")
    print("|---" * (4 + (1 if before else 0)) + "|")
    total_now = total_old = 0
    for key, r in now.items():
        shape = dict(kv.split("=") for kv in r["shape"].split())
        # The planned conv is the combined one: groups of 16 (or 8, 4) one-channel groups.
        chans = int(shape["groups"]) * int(shape["c"])
        cell = (f"| {key[0]} | {key[1]} | {chans}, {shape['h']}x{shape['w']}, "
                f"{shape['kernel']}x{shape['kernel']}, {shape['stride']} |")
        if before:
            o = old[key]
            cell += f" {o['vertex']}, {o['tiles']}, {int(o['simulated_cycles']):,} |"
            total_old += int(o["simulated_cycles"])
        total_now += int(r["simulated_cycles"])
        print(cell + f" {r['vertex']}, {r['tiles']}, {int(r['estimated_cycles']):,}, "
                     f"{int(r['simulated_cycles']):,} |")
    print()
    line = f"All {len(now)} depthwise conv passes: {total_now:,} cycles simulated"
    if before:
        line += f" (before: {total_old:,}); the step {old_step:.3f} -> {step:.3f} ms"
    else:
        line += f"; the step {step:.3f} ms"
    print(line + ".")


def first_layer_table():
    print()
    print("| layer | AMP plan: tiles, busiest vertex (positions, out, weight height) | its cycles |"
          " SLIC split: tiles, positions a tile | SLIC vertex cycles |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch, c, hw, k, kern, stride in FIRST:
            trace = os.path.join(tmp, "k.trace")
            log = subprocess.run(
                [BIN, "kernel", "conv2d", "--batch", str(batch), "--channels", str(c), "--height",
                 str(hw), "--width", str(hw), "--filters", str(k), "--kernel", str(kern),
                 "--stride", str(stride), "--available-memory", "0.15", "--out", trace,
                 "--log-level", "info"], check=True, capture_output=True, text=True,
                env=ENV).stderr
            tiles = re.search(r"plan of (\d+) tiles", log).group(1)
            (codelet, params, p), _ = large_batch.busiest_vertex(trace)
            amp = large_batch.vertex_cycles(BIN, codelet, params)
            # SLIC 1x4: one output group of 4 channels a tile; the rest of the tiles split the
            # output rows (batch x out_h), whole rows of out_w.
            out_w = -(-hw // stride)
            rows = batch * out_w
            row_split = TILES // (k // 4)
            per = -(-rows // row_split)
            positions = per * out_w
            slic_params = (f"in=half partials=half positions={positions} width={out_w} groups=1 "
                           f"chans=4 group_groups=1 kernel_h={kern} kernel_w={kern} "
                           f"stride={stride} chains=4")
            slic = large_batch.vertex_cycles(BIN, "amp_slic", slic_params)
            used = (k // 4) * math.ceil(rows / per)
            print(f"| {name} | {tiles}, {p['positions']} x {p['out_chans']}, "
                  f"{p.get('weight_height', 1)} | {amp:,} | {used}, {positions} | {slic:,} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="an ipusim binary without the SLIC vertex, to compare with")
    a = ap.parse_args()
    depthwise_table(a.before)
    first_layer_table()


if __name__ == "__main__":
    main()

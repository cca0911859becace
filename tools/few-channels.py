#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Convolutions with few channels per conv group (issue 28, item 2; docs/codelets.md "Few channels
per group"). Two tables, in Markdown:

1. EfficientNet-B0 POD16's depthwise convs (configs/runs/efficientnet-b0-pod16.yaml): for each
   conv and pass, the plan with this binary (its vertex: the AMP on conv groups combined into
   block-diagonal weights, or poplin's SLIC vertex; its tiles, estimate and simulated cycles from
   plan.csv) and, with --before OLD_IPUSIM, the plan of a binary without SLIC; then the step.
2. The same run's depthwise weight gradients (a grouped matmul of kernel taps x positions x one
   output channel per conv group): the plan with this binary (the AMP, whose 16 engines hold one
   real output channel, or poplin's HMAC vertex) and, with --before, that binary's; then the
   total.
3. The first layers (ResNet-50's 7x7 conv on 3 channels, EfficientNet's 3x3 stem): the AMP
   vertex the planner runs on its busiest tile (`ipusim kernel conv2d`, half partials, available
   memory 0.15 as the runs have it) against the SLIC vertex (1x4 grouping: 4 output channels a
   tile, the 3 input channels padded to 4, 4 chains) on a split over the same 1,472 tiles, each
   a one-vertex trace run with the closed form. The compute set's 12 cycles are taken off.

Usage: tools/few-channels.py [--before OLD_IPUSIM]   (OLD_IPUSIM: a binary without the vertex
compared, SLIC for table 1, HMAC for table 2)
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
    """Every planned conv pass of the run, by (layer, pass), and its step (ms)."""
    out = os.path.join(tmp, tag)
    text = run([binary, "run", "--run", RUN, "--out", out])
    step = re.search(r"per step of ([\d.]+) ms", text).group(1)
    rows = csv.DictReader(open(os.path.join(out, "plan.csv")))
    return {(r["layer"], r["pass"]): r for r in rows}, float(step)


def depthwise(rows):
    # The planned depthwise conv is the combined one: groups of 16 (or 8, 4) one-channel groups.
    return {k: r for k, r in rows.items() if "_cg" in r["name"] and "kernel=1 " not in r["shape"]}


def depthwise_gradients(rows):
    # A depthwise conv's weight gradient: one output channel per conv group.
    return {k: r for k, r in rows.items()
            if k[1] == "weight_gradient" and " n=1 " in r["shape"] and "groups=1 " not in r["shape"]
            and k[0].endswith("/dw")}


def depthwise_table(now, old, step, old_step):
    now, old = depthwise(now), depthwise(old)
    head = "| layer | pass | channels, field, kernel, stride |"
    head += " before: vertex, tiles, simulated |" if old else ""
    print(head + " now: vertex, tiles, estimate, simulated |")
    print("|---" * (4 + (1 if old else 0)) + "|")
    total_now = total_old = 0
    for key, r in now.items():
        shape = dict(kv.split("=") for kv in r["shape"].split())
        chans = int(shape["groups"]) * int(shape["c"])
        cell = (f"| {key[0]} | {key[1]} | {chans}, {shape['h']}x{shape['w']}, "
                f"{shape['kernel']}x{shape['kernel']}, {shape['stride']} |")
        if old:
            o = old[key]
            cell += f" {o['vertex']}, {o['tiles']}, {int(o['simulated_cycles']):,} |"
            total_old += int(o["simulated_cycles"])
        total_now += int(r["simulated_cycles"])
        print(cell + f" {r['vertex']}, {r['tiles']}, {int(r['estimated_cycles']):,}, "
                     f"{int(r['simulated_cycles']):,} |")
    print()
    line = f"All {len(now)} depthwise conv passes: {total_now:,} cycles simulated"
    if old:
        line += f" (before: {total_old:,}); the step {old_step:.3f} -> {step:.3f} ms"
    else:
        line += f"; the step {step:.3f} ms"
    print(line + ".")


def gradient_table(now, old):
    now, old = depthwise_gradients(now), depthwise_gradients(old)
    print()
    head = "| layer | taps x positions x groups |"
    head += " before: vertex, tiles, estimate, simulated |" if old else ""
    print(head + " now: vertex, tiles, estimate, simulated |")
    print("|---" * (2 + (1 if old else 0)) + "|---|")
    totals = [0, 0]
    for key, r in now.items():
        shape = dict(kv.split("=") for kv in r["shape"].split())
        cell = f"| {key[0]} | {shape['m']} x {shape['k']} x {shape['groups']} |"
        for side, row in ((0, old.get(key)), (1, r)):
            if row is None:
                continue
            cell += (f" {row['vertex']}, {row['tiles']}, {int(row['estimated_cycles']):,}, "
                     f"{int(row['simulated_cycles']):,} |")
            totals[side] += int(row["simulated_cycles"])
        print(cell)
    print()
    line = f"All {len(now)} depthwise weight gradients: {totals[1]:,} cycles simulated"
    print(line + (f" (before: {totals[0]:,})." if old else "."))


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
    ap.add_argument("--before", help="an ipusim binary without the vertex compared, to compare with")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        now, step = plans(BIN, tmp, "now")
        old, old_step = plans(a.before, tmp, "before") if a.before else ({}, None)
    depthwise_table(now, old, step, old_step)
    gradient_table(now, old)
    first_layer_table()


if __name__ == "__main__":
    main()

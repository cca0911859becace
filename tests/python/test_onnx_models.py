# SPDX-License-Identifier: Apache-2.0
"""tools/make-onnx-models.py reproduces the ONNX test graphs of tests/data/onnx/ byte for byte
(docs/onnx.md), so the committed graphs are what the script says they are."""
import filecmp
import os
import subprocess
import sys

import pytest

import ipusim

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_script_writes_the_committed_graphs(tmp_path):
    pytest.importorskip("onnx", reason="python3-onnx is not installed (tools/install-deps.sh)")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make-onnx-models.py"),
                    "--check", "--out", str(tmp_path)], check=True, capture_output=True)
    committed = os.path.join(ROOT, "tests", "data", "onnx")
    names = sorted(n for n in os.listdir(committed) if n.endswith(".onnx"))
    assert sorted(os.listdir(tmp_path)) == names
    for name in names:
        assert filecmp.cmp(os.path.join(committed, name), str(tmp_path / name), shallow=False), name


def test_an_onnx_model_runs_from_python_as_its_shipped_model():
    import ipusim
    run = os.path.join(ROOT, "configs", "runs", "vit-b16-pod16.yaml")
    shipped = ipusim.run(run=run)
    imported = ipusim.run(run=run, model=os.path.join(ROOT, "tests", "data", "onnx",
                                                      "vit_b16.onnx"))
    assert imported["total"]["cycles"] == shipped["total"]["cycles"]
    with pytest.raises(ipusim.ConfigError) as error:
        ipusim.run(run=run, model=os.path.join(ROOT, "tests", "data", "onnx", "lrn_cnn.onnx"))
    assert "op LRN is not supported" in str(error.value)


def test_a_real_export_runs_from_python_without_a_run_config():
    # A run is chosen for the model on the system, as `ipusim run --model M --system S` does.
    stats = ipusim.run(model=os.path.join(ROOT, "tests", "data", "onnx", "torch",
                                          "resnet18_opset11.onnx"),
                       system=os.path.join(ROOT, "configs", "systems", "pod16.yaml"),
                       set={"run.micro_batch": 8})
    assert stats["chosen"][1] == "micro-batch 8: as --set"
    assert stats["workload"]["samples_per_step"]["value"] == 1024
    with pytest.raises(ValueError):
        ipusim.run(model=os.path.join(ROOT, "tests", "data", "onnx", "torch",
                                      "resnet18_opset11.onnx"))


def _import(path, out):
    """`ipusim import PATH --out OUT`: (exit status, stderr, the child's peak resident memory in
    bytes, from its own rusage)."""
    child = subprocess.Popen([ipusim.binary(), "import", str(path), "--out", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = child.stderr.read().decode("utf-8", errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, err, usage.ru_maxrss * 1024


def test_an_unused_weight_stored_as_int32_data_is_skipped_not_decoded(tmp_path):
    # A float16 weight of 64 Mi elements written as packed int32_data (float16 bits, one varint
    # each: 64 MiB) beside the model: it was decoded into 64-bit integers (a 200 MB one took
    # 2.35 GB and 12 s, issue 55 part 3). Now the import's peak memory stays far below the data.
    pytest.importorskip("onnx", reason="python3-onnx is not installed")
    path = tmp_path / "big.onnx"
    # Written by another process, so that this one (whose pages a forked child's peak counts)
    # stays small.
    subprocess.run([sys.executable, "-c", """
import sys
import numpy as np
import onnx
from onnx import TensorProto
model = onnx.load(sys.argv[1], load_external_data=False)
unused = TensorProto(name="unused", dims=[64 << 20], data_type=TensorProto.FLOAT16)
unused.int32_data.extend(np.ones(64 << 20, dtype=np.int32))
model.graph.initializer.append(unused)
onnx.save(model, sys.argv[2])
""", os.path.join(ROOT, "tests", "data", "onnx", "lrn_cnn.onnx"), str(path)], check=True)
    assert path.stat().st_size > (64 << 20)
    status, err, peak = _import(path, tmp_path / "big.yaml")
    # lrn_cnn's LRN is refused by name: the import read the whole file to get there.
    assert status == 3, err
    assert "op LRN is not supported" in err
    assert peak < 3 * path.stat().st_size, peak


def test_many_nodes_of_one_name_get_distinct_layer_names(tmp_path):
    # 5,000 ReLUs all named "relu" (naming searched each name's suffixes from _2 up: quadratic,
    # 10,000 nodes took 27 s): the layers are relu, relu_2, ..., relu_5000.
    onnx = pytest.importorskip("onnx", reason="python3-onnx is not installed")
    from onnx import TensorProto, helper
    model = onnx.load(os.path.join(ROOT, "tests", "data", "onnx", "lrn_cnn.onnx"),
                      load_external_data=False)
    graph = model.graph
    nodes = list(graph.node)
    lrn = next(i for i, n in enumerate(nodes) if n.op_type == "LRN")
    x = nodes[lrn].input[0]
    chain = []
    for i in range(5000):
        out = f"relu_out_{i}"
        chain.append(helper.make_node("Relu", [x], [out], name="relu"))
        x = out
    # The chain replaces the LRN: its consumer reads the last ReLU.
    for n in nodes[lrn + 1:]:
        for j, name in enumerate(n.input):
            if name == nodes[lrn].output[0]:
                n.input[j] = x
    del graph.node[:]
    graph.node.extend(nodes[:lrn] + chain + nodes[lrn + 1:])
    path = tmp_path / "relus.onnx"
    onnx.save(model, str(path))
    status, err, _ = _import(path, tmp_path / "relus.yaml")
    assert status == 0, err
    text = (tmp_path / "relus.yaml").read_text()
    assert 'name: "relu", op: relu' in text
    assert 'name: "relu_5000", op: relu' in text
    assert text.count("op: relu}") + text.count("op: relu,") >= 5000

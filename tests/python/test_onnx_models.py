# SPDX-License-Identifier: Apache-2.0
"""tools/make-onnx-models.py reproduces the ONNX test graphs of tests/data/onnx/ byte for byte
(docs/onnx.md), so the committed graphs are what the script says they are."""
import filecmp
import os
import subprocess
import sys

import pytest

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

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds the ONNX test graphs of the ipusim ONNX importer (docs/onnx.md): resnet50.onnx
# (torchvision ResNet-50 v1.5), bert_large.onnx (BERT-Large pre-training with its masked-LM
# head, as Graphcore's MLPerf BERT, without the next-sentence head ipusim does not model),
# vit_b16.onnx (ViT-B/16 classifier), gpt2_small.onnx (GPT-2 small with its tied LM head),
# efficientnet_b0.onnx (torchvision EfficientNet-B0: SiLU, depthwise convs, squeeze-and-
# excitation) and lrn_cnn.onnx (a small CNN with an op ipusim does not model, LRN). The layouts follow what
# torch.onnx.export writes at opset 17 with static shapes, constant folding on and
# training-mode export (so Dropout nodes are present), with a symbolic "batch" dimension on every graph input and output. Activations and weights
# are float16. Weights carry names, shapes and types but no data: each is an initializer with
# external data in "<stem>.weights.bin" (running offsets), a file that is never written. Small
# constants (shapes, axes, indices, scalars, the causal mask) are inline initializers. The
# output is deterministic: the same bytes on every run.
#
# Needs only Debian's python3-onnx (1.12) and numpy; no torch.
# Usage: /usr/bin/python3 tools/make-onnx-models.py [--out DIR] [--check]
#   --out DIR  where to write the .onnx files (default tests/data/onnx/)
#   --check    run onnx.checker.check_model on each model before saving
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16 = TensorProto.FLOAT16


class Builder:
    """Collects the nodes and initializers of one graph, in creation (topological) order."""

    def __init__(self, stem, opset=17):
        # Below opset 17 there is no LayerNormalization op: exporters write it out as
        # ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add (torch at opset 13/14).
        self.stem, self.opset = stem, opset
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.names = set()  # node names and initializer names, to keep both unique
        self.offset = 0  # running byte offset into <stem>.weights.bin
        self.weight_elements = 0

    def input(self, name, elem_type, dims):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, ["batch"] + dims))
        return name

    def output(self, tensor, name, elem_type, dims):
        # Graph outputs get their own name: rename the producing node's output.
        node = self.nodes[-1]
        assert node.output[0] == tensor
        node.output[0] = name
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, ["batch"] + dims))

    def weight(self, name, dims):
        """A float16 weight with shape but no data (external data, file not written)."""
        assert name not in self.names, name
        self.names.add(name)
        t = TensorProto(name=name, dims=dims, data_type=F16)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(dims)) * 2
        for key, value in (("location", self.stem + ".weights.bin"),
                           ("offset", str(self.offset)), ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.offset += length
        self.weight_elements += int(np.prod(dims))
        self.inits.append(t)
        return name

    def const(self, name, value, dtype):
        """An inline constant initializer; the same name returns the existing one."""
        if name not in self.names:
            self.names.add(name)
            self.inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    # Shorthands for the constants used everywhere.
    def i64(self, *values, scalar=False):
        name = "const_i64_" + ("scalar_" if scalar else "") + "_".join(
            str(v).replace("-", "m") for v in values)
        return self.const(name, values[0] if scalar else list(values), np.int64)

    def f16(self, value):
        return self.const("const_f16_" + repr(value).replace("-", "m").replace(".", "p"),
                          value, np.float16)

    def op(self, scope, op_type, inputs, n_out=1, **attrs):
        """Appends node "<scope>/<op_type>[_n]" and returns its output name(s)."""
        base = f"{scope}/{op_type}"
        name, n = base, 0
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    # Layers shared by the models.
    def linear(self, scope, x, prefix, d_in, d_out):
        w = self.weight(prefix + ".weight", [d_in, d_out])
        b = self.weight(prefix + ".bias", [d_out])
        return self.op(scope, "Add", [self.op(scope, "MatMul", [x, w]), b])

    def gemm(self, scope, x, prefix, d_in, d_out):
        w = self.weight(prefix + ".weight", [d_out, d_in])
        b = self.weight(prefix + ".bias", [d_out])
        return self.op(scope, "Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)

    def layer_norm(self, scope, x, prefix, d, eps):
        scale = self.weight(prefix + ".weight", [d])
        bias = self.weight(prefix + ".bias", [d])
        if self.opset >= 17:
            return self.op(scope, "LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)
        mean = self.op(scope, "ReduceMean", [x], axes=[-1], keepdims=1)
        centred = self.op(scope, "Sub", [x, mean])
        var = self.op(scope, "ReduceMean", [self.op(scope, "Pow", [centred, self.f16(2.0)])],
                      axes=[-1], keepdims=1)
        std = self.op(scope, "Sqrt", [self.op(scope, "Add", [var, self.f16(eps)])])
        y = self.op(scope, "Mul", [self.op(scope, "Div", [centred, std]), scale])
        return self.op(scope, "Add", [y, bias])

    def dropout(self, scope, x, ratio=0.1):
        # Training-mode export: Dropout(data, ratio, training_mode) -> (output, mask).
        r = self.const("const_f32_dropout_ratio_" + repr(ratio).replace(".", "p"), ratio,
                       np.float32)
        t = self.const("const_bool_training_mode", True, np.bool_)
        return self.op(scope, "Dropout", [x, r, t], n_out=2)[0]

    def ffn_erf(self, sc, x, pf, hidden, ffn):
        """Hugging Face's BERT/ViT FFN: dense, erf GELU, dense, dropout (before the residual)."""
        h = self.linear(sc + "/intermediate/dense", x, pf + ".intermediate.dense", hidden, ffn)
        h = self.gelu_erf(sc + "/intermediate/intermediate_act_fn", h)
        y = self.linear(sc + "/output/dense", h, pf + ".output.dense", ffn, hidden)
        return self.dropout(sc + "/output/dropout", y)

    def gelu_erf(self, scope, h):
        y = self.op(scope, "Div", [h, self.f16(1.4142135)])
        y = self.op(scope, "Erf", [y])
        y = self.op(scope, "Add", [y, self.f16(1.0)])
        y = self.op(scope, "Mul", [h, y])
        return self.op(scope, "Mul", [y, self.f16(0.5)])

    def heads_split(self, scope, x, heads, head_dim, key=False):
        """[b,s,h*d] -> [b,h,s,d] (or [b,h,d,s] for the keys)."""
        y = self.op(scope, "Reshape", [x, self.i64(0, 0, heads, head_dim)])
        return self.op(scope, "Transpose", [y], perm=[0, 2, 3, 1] if key else [0, 2, 1, 3])

    def heads_merge(self, scope, x, hidden):
        y = self.op(scope, "Transpose", [x], perm=[0, 2, 1, 3])
        return self.op(scope, "Reshape", [y, self.i64(0, 0, hidden)])

    def attention(self, scope, q, k, v, hidden, heads, mask=None, causal=None, dropout=None):
        """Q, K and V [b,s,h*d] split into heads, softmax(Q K^T / 8 [+ mask] [causal: Where])
        [dropout] V, and the heads merged back."""
        q = self.heads_split(scope, q, heads, hidden // heads)
        v = self.heads_split(scope, v, heads, hidden // heads)
        k = self.heads_split(scope, k, heads, hidden // heads, key=True)
        s = self.op(scope, "MatMul", [q, k])
        s = self.op(scope, "Div", [s, self.f16(8.0)])
        if mask is not None:
            s = self.op(scope, "Add", [s, mask])
        if causal is not None:
            s = self.op(scope, "Where", [causal, s, self.f16(-65504.0)])
        s = self.op(scope, "Softmax", [s], axis=-1)
        if dropout is not None:
            s = self.dropout(dropout, s)
        return self.heads_merge(scope, self.op(scope, "MatMul", [s, v]), hidden)

    def model(self, graph_name):
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs,
                                  initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="ipusim tools/make-onnx-models.py")
        model.ir_version = 8
        return model


def resnet50():
    g = Builder("resnet50")
    x = g.input("input", F16, [3, 224, 224])

    def conv_bn(scope, x, prefix, bn_scope, bn_prefix, c_in, c_out, k, stride):
        w = g.weight(prefix + ".weight", [c_out, c_in, k, k])
        p = k // 2
        y = g.op(scope, "Conv", [x, w], dilations=[1, 1], group=1, kernel_shape=[k, k],
                 pads=[p, p, p, p], strides=[stride, stride])
        bn = [g.weight(f"{bn_prefix}.{n}", [c_out])
              for n in ("weight", "bias", "running_mean", "running_var")]
        return g.op(bn_scope, "BatchNormalization", [y] + bn, epsilon=1e-5, momentum=0.9)

    x = conv_bn("/conv1", x, "conv1", "/bn1", "bn1", 3, 64, 7, 2)
    x = g.op("/relu", "Relu", [x])
    x = g.op("/maxpool", "MaxPool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    c_in = 64
    for stage, (blocks, width, c_out) in enumerate(
            [(3, 64, 256), (4, 128, 512), (6, 256, 1024), (3, 512, 2048)], start=1):
        for i in range(blocks):
            s = 2 if (i == 0 and stage > 1) else 1
            sc, pf = f"/layer{stage}/layer{stage}.{i}", f"layer{stage}.{i}"
            y = conv_bn(sc + "/conv1", x, pf + ".conv1", sc + "/bn1", pf + ".bn1",
                        c_in, width, 1, 1)
            y = g.op(sc + "/relu", "Relu", [y])
            y = conv_bn(sc + "/conv2", y, pf + ".conv2", sc + "/bn2", pf + ".bn2",
                        width, width, 3, s)
            y = g.op(sc + "/relu_1", "Relu", [y])
            y = conv_bn(sc + "/conv3", y, pf + ".conv3", sc + "/bn3", pf + ".bn3",
                        width, c_out, 1, 1)
            identity = x
            if i == 0:
                ds, dp = sc + "/downsample", pf + ".downsample"
                identity = conv_bn(ds + "/downsample.0", x, dp + ".0", ds + "/downsample.1",
                                   dp + ".1", c_in, c_out, 1, s)
            y = g.op(sc, "Add", [y, identity])
            x = g.op(sc + "/relu_2", "Relu", [y])
            c_in = c_out
    x = g.op("/avgpool", "GlobalAveragePool", [x])
    x = g.op("", "Flatten", [x], axis=1)
    x = g.gemm("/fc", x, "fc", 2048, 1000)
    g.output(x, "logits", F16, [1000])
    return g


def bert_large(layers=24, hidden=1024, heads=16, ffn=4096, vocab=30912, seq=512, masked=76,
               stem="bert_large", opset=17):
    g = Builder(stem, opset)
    ids = g.input("input_ids", TensorProto.INT32, [seq])
    types = g.input("token_type_ids", TensorProto.INT32, [seq])
    mask = g.input("attention_mask", TensorProto.INT32, [seq])
    positions = g.input("masked_lm_positions", TensorProto.INT64, [masked])

    sc = "/bert/embeddings"
    word = g.weight("bert.embeddings.word_embeddings.weight", [vocab, hidden])
    pos_table = g.weight("bert.embeddings.position_embeddings.weight", [seq, hidden])
    type_table = g.weight("bert.embeddings.token_type_embeddings.weight", [2, hidden])
    position_ids = g.const("const_i64_position_ids", [list(range(seq))], np.int64)
    e = g.op(sc + "/word_embeddings", "Gather", [word, ids], axis=0)
    p = g.op(sc + "/position_embeddings", "Gather", [pos_table, position_ids], axis=0)
    t = g.op(sc + "/token_type_embeddings", "Gather", [type_table, types], axis=0)
    x = g.op(sc, "Add", [e, p])
    x = g.op(sc, "Add", [x, t])
    x = g.layer_norm(sc + "/LayerNorm", x, "bert.embeddings.LayerNorm", hidden, 1e-12)
    x = g.dropout(sc + "/dropout", x)

    # Extended attention mask, computed once: (1 - mask[:, None, None, :]) * -10000.
    m = g.op("/bert", "Unsqueeze", [mask, g.i64(1, 2)])
    m = g.op("/bert", "Cast", [m], to=F16)
    m = g.op("/bert", "Sub", [g.f16(1.0), m])
    ext_mask = g.op("/bert", "Mul", [m, g.f16(-10000.0)])

    for i in range(layers):
        sc, pf = f"/bert/encoder/layer.{i}", f"bert.encoder.layer.{i}"
        att = sc + "/attention/self"
        q = g.linear(att + "/query", x, pf + ".attention.self.query", hidden, hidden)
        k = g.linear(att + "/key", x, pf + ".attention.self.key", hidden, hidden)
        v = g.linear(att + "/value", x, pf + ".attention.self.value", hidden, hidden)
        c = g.attention(att, q, k, v, hidden, heads, mask=ext_mask)
        out = sc + "/attention/output"
        y = g.linear(out + "/dense", c, pf + ".attention.output.dense", hidden, hidden)
        y = g.dropout(out + "/dropout", y)
        y = g.op(out, "Add", [y, x])
        a = g.layer_norm(out + "/LayerNorm", y, pf + ".attention.output.LayerNorm", hidden, 1e-12)
        y = g.op(sc + "/output", "Add", [g.ffn_erf(sc, a, pf, hidden, ffn), a])
        x = g.layer_norm(sc + "/output/LayerNorm", y, pf + ".output.LayerNorm", hidden, 1e-12)

    # Masked-LM head on the gathered masked positions, decoder tied to the word embeddings.
    sc = "/cls/predictions"
    idx = g.op(sc, "Unsqueeze", [positions, g.i64(2)])
    idx = g.op(sc, "Expand", [idx, g.i64(1, 1, hidden)])
    y = g.op(sc, "GatherElements", [x, idx], axis=1)
    y = g.linear(sc + "/transform/dense", y, "cls.predictions.transform.dense", hidden, hidden)
    y = g.gelu_erf(sc + "/transform/transform_act_fn", y)
    y = g.layer_norm(sc + "/transform/LayerNorm", y, "cls.predictions.transform.LayerNorm",
                     hidden, 1e-12)
    word_t = g.op(sc + "/decoder", "Transpose", [word], perm=[1, 0])
    y = g.op(sc + "/decoder", "MatMul", [y, word_t])
    y = g.op(sc + "/decoder", "Add", [y, g.weight("cls.predictions.bias", [vocab])])
    g.output(y, "mlm_logits", F16, [masked, vocab])

    return g


def vit_b16(layers=12, hidden=768, heads=12, ffn=3072, classes=1000, patch=16, image=224):
    g = Builder("vit_b16")
    x = g.input("pixel_values", F16, [3, image, image])
    n_patches = (image // patch) ** 2

    sc, pf = "/vit/embeddings", "vit.embeddings"
    w = g.weight(pf + ".patch_embeddings.projection.weight", [hidden, 3, patch, patch])
    b = g.weight(pf + ".patch_embeddings.projection.bias", [hidden])
    x = g.op(sc + "/patch_embeddings/projection", "Conv", [x, w, b], dilations=[1, 1], group=1,
             kernel_shape=[patch, patch], pads=[0, 0, 0, 0], strides=[patch, patch])
    x = g.op(sc + "/patch_embeddings", "Reshape", [x, g.i64(0, hidden, n_patches)])
    x = g.op(sc + "/patch_embeddings", "Transpose", [x], perm=[0, 2, 1])
    # The class token expanded to the batch: torch's cls_token.expand(batch, -1, -1).
    cls = g.weight(pf + ".cls_token", [1, 1, hidden])
    batch = g.op(sc, "Shape", ["pixel_values"], start=0, end=1)
    shape = g.op(sc, "Concat", [batch, g.i64(1, hidden)], axis=0)
    cls = g.op(sc, "Expand", [cls, shape])
    x = g.op(sc, "Concat", [cls, x], axis=1)
    x = g.op(sc, "Add", [x, g.weight(pf + ".position_embeddings", [1, n_patches + 1, hidden])])
    x = g.dropout(sc + "/dropout", x)

    for i in range(layers):
        sc, pf = f"/vit/encoder/layer.{i}", f"vit.encoder.layer.{i}"
        n = g.layer_norm(sc + "/layernorm_before", x, pf + ".layernorm_before", hidden, 1e-12)
        att = sc + "/attention/attention"
        q = g.linear(att + "/query", n, pf + ".attention.attention.query", hidden, hidden)
        k = g.linear(att + "/key", n, pf + ".attention.attention.key", hidden, hidden)
        v = g.linear(att + "/value", n, pf + ".attention.attention.value", hidden, hidden)
        c = g.attention(att, q, k, v, hidden, heads, dropout=att + "/dropout")
        out = sc + "/attention/output"
        y = g.linear(out + "/dense", c, pf + ".attention.output.dense", hidden, hidden)
        y = g.dropout(out + "/dropout", y)
        r = g.op(sc, "Add", [y, x])
        m = g.layer_norm(sc + "/layernorm_after", r, pf + ".layernorm_after", hidden, 1e-12)
        x = g.op(sc + "/output", "Add", [g.ffn_erf(sc, m, pf, hidden, ffn), r])

    x = g.layer_norm("/vit/layernorm", x, "vit.layernorm", hidden, 1e-12)
    x = g.op("", "Gather", [x, g.i64(0, scalar=True)], axis=1)
    x = g.gemm("/classifier", x, "classifier", hidden, classes)
    g.output(x, "logits", F16, [classes])
    return g


def gpt2_small(layers=12, hidden=768, heads=12, ffn=3072, vocab=50257, seq=1024):
    g = Builder("gpt2_small")
    ids = g.input("input_ids", TensorProto.INT64, [seq])

    sc = "/transformer"
    wte = g.weight("transformer.wte.weight", [vocab, hidden])
    wpe = g.weight("transformer.wpe.weight", [seq, hidden])
    position_ids = g.const("const_i64_position_ids", [list(range(seq))], np.int64)
    e = g.op(sc + "/wte", "Gather", [wte, ids], axis=0)
    p = g.op(sc + "/wpe", "Gather", [wpe, position_ids], axis=0)
    x = g.dropout(sc + "/drop", g.op(sc, "Add", [e, p]))
    causal = g.const("const_bool_causal_mask",
                     np.tril(np.ones((seq, seq), dtype=np.bool_))[None, None], np.bool_)

    for i in range(layers):
        sc, pf = f"/transformer/h.{i}", f"transformer.h.{i}"
        n = g.layer_norm(sc + "/ln_1", x, pf + ".ln_1", hidden, 1e-5)
        att = sc + "/attn"
        qkv = g.linear(att + "/c_attn", n, pf + ".attn.c_attn", hidden, 3 * hidden)
        q, k, v = g.op(att, "Split", [qkv, g.i64(hidden, hidden, hidden)], n_out=3, axis=2)
        c = g.attention(att, q, k, v, hidden, heads, causal=causal,
                        dropout=att + "/attn_dropout")
        y = g.linear(att + "/c_proj", c, pf + ".attn.c_proj", hidden, hidden)
        y = g.dropout(att + "/resid_dropout", y)
        r = g.op(sc, "Add", [y, x])
        m = g.layer_norm(sc + "/ln_2", r, pf + ".ln_2", hidden, 1e-5)
        mlp = sc + "/mlp"
        h = g.linear(mlp + "/c_fc", m, pf + ".mlp.c_fc", hidden, ffn)
        # gelu_new: 0.5 * h * (1 + tanh(0.7978846 * (h + 0.044715 * h^3)))
        act = mlp + "/act"
        y = g.op(act, "Pow", [h, g.f16(3.0)])
        y = g.op(act, "Mul", [g.f16(0.044715), y])
        y = g.op(act, "Add", [h, y])
        y = g.op(act, "Mul", [g.f16(0.7978846), y])
        y = g.op(act, "Tanh", [y])
        y = g.op(act, "Add", [g.f16(1.0), y])
        y = g.op(act, "Mul", [h, y])
        y = g.op(act, "Mul", [g.f16(0.5), y])
        y = g.linear(mlp + "/c_proj", y, pf + ".mlp.c_proj", ffn, hidden)
        y = g.dropout(mlp + "/dropout", y)
        x = g.op(sc, "Add", [y, r])

    x = g.layer_norm("/transformer/ln_f", x, "transformer.ln_f", hidden, 1e-5)
    wte_t = g.op("/lm_head", "Transpose", [wte], perm=[1, 0])
    x = g.op("/lm_head", "MatMul", [x, wte_t])
    g.output(x, "logits", F16, [seq, vocab])
    return g


def check(model):
    """onnx.checker.check_model on a copy of the model. onnx 1.12's checker rejects an
    external-data initializer whose file does not exist ("should be stored in
    <stem>.weights.bin, but it doesn't exist"), so the copy turns each such weight into a graph
    input of the same type and shape; everything else (ops, attributes, order) is checked as is.
    The saved model keeps its external-data layout."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    inits = [t for t in copy.graph.initializer if t.data_location != TensorProto.EXTERNAL]
    weights = [t for t in copy.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(inits)
    copy.graph.input.extend(
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in weights)
    onnx.checker.check_model(copy)


def efficientnet_b0():
    """torchvision EfficientNet-B0: MBConv blocks with SiLU (Sigmoid x Mul) and squeeze-and-
    excitation (pool, 1x1 conv with bias, SiLU, 1x1 conv with bias, Sigmoid, Mul)."""
    g = Builder("efficientnet_b0")
    x = g.input("input", F16, [3, 224, 224])

    def conv_bn(scope, prefix, x, c_in, c_out, k, stride=1, groups=1):
        w = g.weight(prefix + ".0.weight", [c_out, c_in // groups, k, k])
        p = k // 2
        y = g.op(scope + "/0", "Conv", [x, w], dilations=[1, 1], group=groups,
                 kernel_shape=[k, k], pads=[p, p, p, p], strides=[stride, stride])
        bn = [g.weight(f"{prefix}.1.{n}", [c_out])
              for n in ("weight", "bias", "running_mean", "running_var")]
        return g.op(scope + "/1", "BatchNormalization", [y] + bn, epsilon=1e-5, momentum=0.9)

    def silu(scope, x):
        return g.op(scope, "Mul", [x, g.op(scope, "Sigmoid", [x])])

    x = silu("/features/features.0/2", conv_bn("/features/features.0", "features.0", x, 3, 32,
                                               3, 2))
    # (expand ratio, kernel, stride, channels in, channels out, blocks) per stage
    stages = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
              (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
              (6, 3, 1, 192, 320, 1)]
    for st, (expand, k, stride, c_in, c_out, blocks) in enumerate(stages, start=1):
        for b in range(blocks):
            sc, pf = f"/features/features.{st}/features.{st}.{b}/block", f"features.{st}.{b}.block"
            cin = c_in if b == 0 else c_out
            s = stride if b == 0 else 1
            wide = cin * expand
            y, i = x, 0
            if expand != 1:
                y = silu(f"{sc}/{i}/2", conv_bn(f"{sc}/{i}", f"{pf}.{i}", y, cin, wide, 1))
                i += 1
            y = silu(f"{sc}/{i}/2", conv_bn(f"{sc}/{i}", f"{pf}.{i}", y, wide, wide, k, s,
                                            groups=wide))
            i += 1
            se, sq = f"{sc}/{i}", max(1, cin // 4)
            z = g.op(se + "/avgpool", "GlobalAveragePool", [y])
            z = g.op(se + "/fc1", "Conv", [z, g.weight(f"{pf}.{i}.fc1.weight", [sq, wide, 1, 1]),
                                           g.weight(f"{pf}.{i}.fc1.bias", [sq])],
                     dilations=[1, 1], group=1, kernel_shape=[1, 1], pads=[0, 0, 0, 0],
                     strides=[1, 1])
            z = silu(se + "/activation", z)
            z = g.op(se + "/fc2", "Conv", [z, g.weight(f"{pf}.{i}.fc2.weight", [wide, sq, 1, 1]),
                                           g.weight(f"{pf}.{i}.fc2.bias", [wide])],
                     dilations=[1, 1], group=1, kernel_shape=[1, 1], pads=[0, 0, 0, 0],
                     strides=[1, 1])
            z = g.op(se + "/scale_activation", "Sigmoid", [z])
            y = g.op(se, "Mul", [z, y])
            i += 1
            y = conv_bn(f"{sc}/{i}", f"{pf}.{i}", y, wide, c_out, 1)
            if s == 1 and cin == c_out:
                y = g.op(f"/features/features.{st}/features.{st}.{b}", "Add", [y, x])
            x = y
    x = silu("/features/features.8/2", conv_bn("/features/features.8", "features.8", x, 320, 1280,
                                               1))
    x = g.op("/avgpool", "GlobalAveragePool", [x])
    x = g.op("", "Flatten", [x], axis=1)
    x = g.dropout("/classifier/classifier.0", x, ratio=0.2)
    x = g.gemm("/classifier/classifier.1", x, "classifier.1", 1280, 1000)
    g.output(x, "logits", F16, [1000])
    return g


def small_cnn(stem, middle):
    """A 3 x 32 x 32 image through a 3x3 conv to 16 channels, then `middle(g, x)`, global
    average pooling and a 16 -> 10 fc: the small CNNs of the importer's error and edge cases."""
    g = Builder(stem)
    x = g.input("input", F16, [3, 32, 32])
    w = g.weight("conv.weight", [16, 3, 3, 3])
    x = g.op("/conv", "Conv", [x, w], dilations=[1, 1], group=1, kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[1, 1])
    x = middle(g, x)
    x = g.op("/avgpool", "GlobalAveragePool", [x])
    x = g.op("", "Flatten", [x], axis=1)
    x = g.gemm("/fc", x, "fc", 16, 10)
    g.output(x, "logits", F16, [10])
    return g


def lrn_cnn():
    """A small CNN with local response normalisation (AlexNet's LRN), which ipusim does not
    model: the importer's error names the node."""
    def middle(g, x):
        x = g.op("/relu", "Relu", [x])
        return g.op("/lrn", "LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=2.0)
    return small_cnn("lrn_cnn", middle)


def instancenorm_cnn():
    """A small CNN with an instance norm (a group norm of one channel per group): the
    importer's groupnorm layer with model.norm_groups equal to its channels."""
    def middle(g, x):
        x = g.op("/norm", "InstanceNormalization",
                 [x, g.weight("norm.weight", [16]), g.weight("norm.bias", [16])], epsilon=1e-5)
        return g.op("/relu", "Relu", [x])
    return small_cnn("instancenorm_cnn", middle)


def flatten_conv_cnn():
    """A conv reading a flattened map (not a valid model: a fuzzer's kind of input): the
    importer refuses it, naming the node and the rank it found."""
    def middle(g, x):
        x = g.op("", "Flatten", [x], axis=1)
        w2 = g.weight("conv2.weight", [16, 16384, 3, 3])
        return g.op("/conv2", "Conv", [x, w2], dilations=[1, 1], group=1, kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1], strides=[1, 1])
    return small_cnn("flatten_conv_cnn", middle)


MODELS = [("resnet50", resnet50), ("bert_large", bert_large), ("vit_b16", vit_b16),
          ("gpt2_small", gpt2_small), ("efficientnet_b0", efficientnet_b0),
          ("lrn_cnn", lrn_cnn), ("instancenorm_cnn", instancenorm_cnn),
          ("flatten_conv_cnn", flatten_conv_cnn),
          # A small BERT written twice: as at opset 17 and as torch exports it at opset 13,
          # its layer norms spelt out (the importer reads both as the same model).
          ("bert_tiny", lambda: bert_large(2, 64, 4, 128, 100, 16, 4, "bert_tiny")),
          ("bert_tiny_opset13", lambda: bert_large(2, 64, 4, 128, 100, 16, 4, "bert_tiny_opset13",
                                                   opset=13))]


def main():
    parser = argparse.ArgumentParser(description="Writes resnet50, bert_large, vit_b16 and "
                                     "gpt2_small .onnx graphs (weights as external data).")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out", default=os.path.join(root, "tests", "data", "onnx"),
                        help="output folder (default: tests/data/onnx/ of this checkout)")
    parser.add_argument("--check", action="store_true",
                        help="run onnx.checker.check_model on each model before saving")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for stem, build in MODELS:
        g = build()
        model = g.model(stem)
        if args.check:
            check(model)
        path = os.path.join(args.out, stem + ".onnx")
        onnx.save(model, path)
        print(f"{path}: {len(g.nodes)} nodes, {g.weight_elements} weight elements",
              file=sys.stderr)


if __name__ == "__main__":
    main()

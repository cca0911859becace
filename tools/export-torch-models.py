#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Exports the real-exporter test models of the ONNX importer (docs/onnx.md, "Real exports")
# with Debian's python3-torch (1.13) and python3-torchvision (0.14): random weights, nothing
# downloaded. Each model is written by torch.onnx.export as a user would write it, then its
# weight bytes are stripped: every initializer of more than 64 elements becomes external data
# in "<stem>.weights.bin", a file that is not kept, so the graphs are small and the tests need
# no torch. Beside the .onnx files, exports.yaml records for each model what torch says of it:
# its parameter count (sum of numel over model.parameters(), shared ones once), the FLOPs of one
# sample's forward pass in its convolutions and matrix products (2 per multiply-add, counted on
# the aten ops torch runs), the export's opset, mode and input.
#
# Usage: /usr/bin/python3 tools/export-torch-models.py [--out DIR] [--only NAME...]
#   --out DIR   where to write (default tests/data/onnx/torch)
#   --only      export only the named models (names as in MODELS below)
import argparse
import math
import os
import sys
import warnings

import onnx
import torch
import torchvision
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

warnings.filterwarnings("ignore")
aten = torch.ops.aten


# ---- FLOPs of the forward pass, on the aten ops torch runs ------------------------------------
def _prod(xs):
    return math.prod(int(x) for x in xs)


class FlopCounter(TorchDispatchMode):
    """2 FLOPs per multiply-add of every convolution and matrix product torch runs."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        p = func._overloadpacket
        if p is aten.convolution:
            w = args[1]
            self.flops += 2 * out.numel() * _prod(w.shape[1:])
        elif p in (aten.mm, aten.addmm):
            a = args[-2]
            self.flops += 2 * out.numel() * a.shape[-1]
        elif p in (aten.bmm, aten.baddbmm):
            a = args[-2]
            self.flops += 2 * out.numel() * a.shape[-1]
        return out


def forward_flops(model, args):
    # In training mode: in eval mode torch runs nn.TransformerEncoderLayer and
    # nn.MultiheadAttention through fused kernels whose products no aten op shows.
    mode = model.training
    model.train()
    counter = FlopCounter()
    with torch.no_grad(), counter:
        model(*args)
    model.train(mode)
    return counter.flops


# ---- transformers written with torch.nn ---------------------------------------------------------
class BertEncoder(nn.Module):
    """A BERT-Base-sized encoder (12 layers, hidden 768, 12 heads, FFN 3,072, vocabulary 30,522,
    sequence 128) with nn.TransformerEncoder, a padding mask from the token ids and a tied
    masked-LM head over every token."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, seq=128):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.1, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(hidden, vocab)
        self.head.weight = self.tokens.weight

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tokens(ids) + self.positions(pos))
        x = self.encoder(x, src_key_padding_mask=ids == 0)
        return self.head(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, kv_heads=None, rotary=False, bias=True):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads or heads
        self.d = hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=bias)
        self.k = nn.Linear(hidden, self.kv_heads * self.d, bias=bias)
        self.v = nn.Linear(hidden, self.kv_heads * self.d, bias=bias)
        self.out = nn.Linear(hidden, hidden, bias=bias)
        self.rotary = rotary

    def rope(self, x):
        # Rotary position embedding over the head dimension (Llama's rotate-half form).
        s, d = x.shape[-2], x.shape[-1]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(s, dtype=torch.float32), inv)
        cos = torch.cat([angles.cos(), angles.cos()], -1)
        sin = torch.cat([angles.sin(), angles.sin()], -1)
        half = torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1)
        return x * cos + half * sin

    def repeat_kv(self, x):
        # As Hugging Face's Llama repeats K and V (torch 1.13 exports repeat_interleave on a 4-d
        # tensor with wrong shapes).
        b, kv, s, d = x.shape
        rep = self.heads // kv
        return x[:, :, None, :, :].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)

    def forward(self, x):
        b, s, h = x.shape
        q = self.q(x).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        if self.rotary:
            q, k = self.rope(q), self.rope(k)
        if self.kv_heads != self.heads:  # grouped-query attention: each K/V head serves a group
            k, v = self.repeat_kv(k), self.repeat_kv(v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, -1) @ v
        return self.out(y.transpose(1, 2).reshape(b, s, h))


class Gpt2Attention(nn.Module):
    """GPT-2's attention as OpenAI's model.py writes it: one projection to Q, K and V (c_attn),
    the scores multiplied by 1/sqrt(head size), a causal mask, dropout 0.1 on the
    probabilities and on the output (attn_pdrop, resid_pdrop)."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.d = heads, hidden // heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.attn_drop, self.resid_drop = nn.Dropout(0.1), nn.Dropout(0.1)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = (t.view(b, s, self.heads, self.d).transpose(1, 2)
                   for t in self.c_attn(x).split(h, dim=2))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = self.attn_drop(torch.softmax(scores, -1)) @ v
        return self.resid_drop(self.out(y.transpose(1, 2).reshape(b, s, h)))


class Gpt2Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = Gpt2Attention(hidden, heads)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh")))


class Gpt2(nn.Module):
    """GPT-2 small (12 layers, hidden 768, 12 heads, vocabulary 50,257, sequence 1,024) written
    with nn.Linear and a causal mask, as OpenAI's model.py lays it out (pre-norm blocks, the
    tanh GELU, a final layer norm, dropout 0.1 after the embeddings and each sub-layer), its LM
    head tied to the token embedding."""

    def __init__(self, vocab=50257, hidden=768, layers=12, heads=12, seq=1024):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Gpt2Block(hidden, heads) for _ in range(layers))
        self.ln, self.drop = nn.LayerNorm(hidden), nn.Dropout(0.1)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, ids):
        x = self.drop(self.tokens(ids) + self.positions(torch.arange(ids.shape[1])))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


class RmsNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(hidden)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class LlamaBlock(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.n1, self.n2 = RmsNorm(hidden), RmsNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads, kv_heads, rotary=True, bias=False)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        h = self.n2(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """A small Llama-style decoder: 8 layers, hidden 1,024, 16 heads, 4 KV heads (grouped-query
    attention), SwiGLU FFN 2,816, RMSNorm, rotary position embedding, vocabulary 32,000,
    sequence 512, an untied LM head."""

    def __init__(self, vocab=32000, hidden=1024, layers=8, heads=16, kv_heads=4, ffn=2816):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(LlamaBlock(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RmsNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        x = self.tokens(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


class LstmClassifier(nn.Module):
    """An LSTM over 32 steps of 64 features and a linear classifier: an op ipusim refuses."""

    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(64, 128, batch_first=True), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(self.lstm(x)[0][:, -1])


class GridSampler(nn.Module):
    """A conv, then its output resampled at computed positions (a spatial transformer's
    GridSample): an op ipusim refuses."""

    def __init__(self):
        super().__init__()
        self.conv, self.offsets = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x):
        grid = torch.tanh(self.offsets(x)).permute(0, 2, 3, 1)  # positions in [-1, 1]
        return nn.functional.grid_sample(self.conv(x), grid, align_corners=False)


# ---- the exports -------------------------------------------------------------------------------
def images(batch=1):
    return (torch.randn(batch, 3, 224, 224),)


def tokens(seq, vocab):
    return (torch.randint(1, vocab, (1, seq)),)


TV = torchvision.models
# name: (constructor, inputs, opset, training mode, dynamic batch)
MODELS = {
    "resnet50_eval_opset13": (TV.resnet50, images, 13, False, False),
    "resnet50_train_opset17": (TV.resnet50, images, 17, True, False),
    "resnet50_dynamic_batch": (TV.resnet50, images, 13, False, True),
    "resnet18_opset11": (TV.resnet18, images, 11, False, False),
    "efficientnet_b0": (TV.efficientnet_b0, images, 13, False, False),
    "efficientnet_b0_train_opset17": (TV.efficientnet_b0, images, 17, True, False),
    "mobilenet_v2": (TV.mobilenet_v2, images, 13, False, False),
    "vit_b_16": (TV.vit_b_16, images, 17, False, False),
    "vit_b_16_dynamic_batch": (TV.vit_b_16, images, 17, False, True),
    "bert_base_encoder": (BertEncoder, lambda: tokens(128, 30522), 17, True, False),
    "gpt2_small_decoder": (Gpt2, lambda: tokens(1024, 50257), 17, True, False),
    # Exported in eval mode with constant folding (torch's defaults), a tied head's transpose
    # becomes a copy of the table: a small decoder shows it.
    "gpt2_tiny_tied_eval": (lambda: Gpt2(vocab=1000, hidden=64, layers=2, heads=4, seq=32),
                            lambda: tokens(32, 1000), 17, False, False),
    # A smaller one with its weights kept (120 KB), embedded and as external data present:
    # the copy's data is the table's.
    "gpt2_micro_tied_eval_weights": (lambda: Gpt2(vocab=256, hidden=32, layers=1, heads=4,
                                                  seq=16),
                                     lambda: tokens(16, 256), 17, False, False),
    "gpt2_micro_tied_eval_external_weights": (lambda: Gpt2(vocab=256, hidden=32, layers=1,
                                                           heads=4, seq=16),
                                              lambda: tokens(16, 256), 17, False, False),
    "llama_small": (Llama, lambda: tokens(512, 32000), 17, False, False),
    "lstm_classifier": (LstmClassifier, lambda: (torch.randn(1, 32, 64),), 13, False, False),
    "grid_sample": (GridSampler, lambda: (torch.randn(1, 3, 32, 32),), 16, False, False),
}


def strip_weights(path, stem):
    """Every initializer of more than 64 elements, and every Constant of more than 4,096 that
    does not hold integers (a causal mask), becomes external data that is not kept."""
    model = onnx.load(path)
    offset = 0
    constants = [n.attribute[0].t for n in model.graph.node
                 if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"
                 and n.attribute[0].t.data_type not in (onnx.TensorProto.INT64,
                                                        onnx.TensorProto.INT32)
                 and math.prod(n.attribute[0].t.dims) > 4096]
    for t in list(model.graph.initializer) + constants:
        n = math.prod(t.dims) if t.dims else 1
        if n <= 64:
            continue
        length = len(t.raw_data) if t.raw_data else n * 4
        del t.float_data[:]
        t.raw_data = b""
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for k, v in (("location", f"{stem}.weights.bin"), ("offset", str(offset)),
                     ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset += length
    onnx.save(model, path)


def export(name, out):
    make, inputs, opset, training, dynamic = MODELS[name]
    torch.manual_seed(0)
    model = make()
    if training:
        # torch cannot export stochastic depth (a random per-sample drop) in training mode: it
        # is left out of the training export (an identity in eval mode anyway).
        for parent in model.modules():
            for child_name, child in parent.named_children():
                if isinstance(child, torchvision.ops.StochasticDepth):
                    setattr(parent, child_name, nn.Identity())
    args = inputs()
    params = sum(p.numel() for p in model.parameters())  # shared parameters once
    model.eval()
    torch.manual_seed(0)
    flops = forward_flops(model, args)
    # An export in eval mode folds each batch norm into the conv before it (torch's own fusion,
    # torch.fx.experimental.optimization.fuse): the parameters the exported graph has.
    folded = params
    if not training and any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        from torch.fx.experimental.optimization import fuse
        folded = sum(p.numel() for p in fuse(model).parameters())
    model.train(training)
    path = os.path.join(out, name + ".onnx")
    kwargs = {}
    if dynamic:
        kwargs = dict(input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, args, path, opset_version=opset, do_constant_folding=not training,
                      training=mode, **kwargs)
    data = os.path.join(out, name + ".weights.bin")
    if name.endswith("_external_weights"):  # weights kept, as external data beside the model
        onnx.save_model(onnx.load(path), path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=name + ".weights.bin",
                        size_threshold=1024)
    elif not name.endswith("_weights"):  # (those keep theirs embedded)
        strip_weights(path, name)
        if os.path.exists(data):  # (onnx.save writes what it can of external data: not kept)
            os.remove(data)
    shape = "x".join(str(d) for d in args[0].shape)
    return (f"{name}:\n  file: {name}.onnx\n  opset: {opset}\n"
            f"  mode: {'training' if training else 'eval'}\n  dynamic_batch: {str(dynamic).lower()}\n"
            f"  input: {shape}\n  parameters: {params}\n  exported_parameters: {folded}\n"
            f"  forward_flops: {flops}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                  "onnx", "torch"))
    ap.add_argument("--only", nargs="*", default=list(MODELS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    # Records of the models not exported this time are kept.
    path = os.path.join(a.out, "exports.yaml")
    kept = {}
    if os.path.exists(path):
        name = None
        for line in open(path):
            if not line.startswith((" ", "#")):
                name = line.rstrip().rstrip(":")
            if name and not line.startswith("#"):
                kept[name] = kept.get(name, "") + line
    records = []
    for name in MODELS:
        if name in kept and name not in a.only:
            records.append(kept[name])
        if name not in a.only:
            continue
        print(f"exporting {name}", file=sys.stderr)
        records.append(export(name, a.out))
    with open(path, "w") as f:
        f.write(f"# Written by tools/export-torch-models.py with torch {torch.__version__}, "
                f"torchvision {torchvision.__version__}: what torch says of each export.\n")
        f.writelines(records)


if __name__ == "__main__":
    main()

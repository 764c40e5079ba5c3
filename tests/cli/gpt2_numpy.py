#!/usr/bin/env python3
"""Checks a `kiln export` directory outside kiln: reads model.safetensors and
config.json as Hugging Face's GPT2LMHeadModel would, runs GPT-2's forward in
numpy (Conv1D weights in x out, GELU with the tanh approximation, LayerNorm
eps from the config, causal attention scaled by 1/sqrt(head dim), an untied
head) on the sequences of kiln_reference.json, and compares the logits with
kiln's own. Exit 0 when every logit is within the tolerance.

    python3 tests/cli/gpt2_numpy.py EXPORT_DIR [TOLERANCE]
"""
import json
import sys

import numpy as np

from export_check import compare_with_kiln, read_safetensors


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(w, config, ids):
    C, heads = config["n_embd"], config["n_head"]
    hd = C // heads
    eps = config["layer_norm_epsilon"]
    T = len(ids)
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for i in range(config["n_layer"]):
        p = f"transformer.h.{i}."
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: (T, C) @ (C, 3C)
        q, k, v = np.split(qkv, 3, axis=-1)
        q, k, v = (t.reshape(T, heads, hd).transpose(1, 0, 2) for t in (q, k, v))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        scores[:, mask] = -np.inf
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attended = (scores / scores.sum(-1, keepdims=True)) @ v
        attended = attended.transpose(1, 0, 2).reshape(T, C)
        x = x + attended @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        x = x + gelu_new(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]) @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ w["lm_head.weight"].T


def main():
    directory = sys.argv[1]
    tolerance = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-4
    config = json.load(open(f"{directory}/config.json"))
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"], config
    assert config["tie_word_embeddings"] is False and config["activation_function"] == "gelu_new", config
    weights = read_safetensors(f"{directory}/model.safetensors")
    expected = 5 + 12 * config["n_layer"]  # wte, wpe, ln_f (2), lm_head; 12 per block
    assert len(weights) == expected, f"{len(weights)} tensors, GPT2LMHeadModel has {expected}"
    return compare_with_kiln(directory, forward, weights, config, tolerance, "GPT-2")


if __name__ == "__main__":
    sys.exit(main())

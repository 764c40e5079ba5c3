#!/usr/bin/env python3
"""Checks a `kiln export` of a llama model outside kiln: reads model.safetensors and config.json as Hugging
Face's LlamaForCausalLM would, runs Llama's forward in numpy from the config alone (RMSNorm with rms_norm_eps,
rotary embeddings on q and k with rope_theta in the "rotate half" convention, grouped-query attention with
num_key_value_heads, causal attention scaled by 1/sqrt(head_dim), SwiGLU MLP, no biases, an untied head) on the
sequences of kiln_reference.json, and compares the logits with kiln's own. Exit 0 when every logit is within the
tolerance.

    python3 tests/cli/llama_numpy.py EXPORT_DIR [TOLERANCE]
"""
import json
import sys

import numpy as np

from export_check import compare_with_kiln, read_safetensors


def rms_norm(x, w, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def rotary(x, theta):  # x: (heads, T, hd)
    T, hd = x.shape[1], x.shape[2]
    inverse = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
    angles = np.outer(np.arange(T), inverse)
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))
    half = hd // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def forward(w, config, ids):
    C, heads, kv_heads = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim", C // heads)
    eps, theta = config["rms_norm_eps"], config["rope_theta"]
    T = len(ids)
    x = w["model.embed_tokens.weight"][ids]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, heads, hd).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, kv_heads, hd).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, kv_heads, hd).transpose(1, 0, 2)
        q, k = rotary(q, theta), rotary(k, theta)
        group = heads // kv_heads  # query head j uses key/value head j // group
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        scores[:, mask] = -np.inf
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attended = ((scores / scores.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(T, heads * hd)
        x = x + attended @ w[p + "self_attn.o_proj.weight"].T
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = m @ w[p + "mlp.gate_proj.weight"].T, m @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    return rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def main():
    directory = sys.argv[1]
    tolerance = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-4
    config = json.load(open(f"{directory}/config.json"))
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"], config
    assert config["tie_word_embeddings"] is False and config["hidden_act"] == "silu", config
    assert not config["attention_bias"] and not config["mlp_bias"], config
    weights = read_safetensors(f"{directory}/model.safetensors")
    expected = 3 + 9 * config["num_hidden_layers"]  # embed_tokens, norm, lm_head; 9 per block
    assert len(weights) == expected, f"{len(weights)} tensors, LlamaForCausalLM has {expected}"
    return compare_with_kiln(directory, forward, weights, config, tolerance, "Llama")


if __name__ == "__main__":
    sys.exit(main())

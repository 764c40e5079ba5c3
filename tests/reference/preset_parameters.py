#!/usr/bin/env python3
"""kiln's model presets against the published models (issue 53, item 3): each preset's config.json as its
publisher wrote it (the shape fields only, below) is built by Hugging Face transformers on the meta device
(nothing downloaded, no memory used), and its num_parameters() must equal the exact count `kiln deck --check`
prints; every model key the preset resolves must be the published field's value, the rotary scaling included.
A mixture of experts' active parameters (those a token passes through: of each block's experts only the
num_experts_per_tok it is routed to) must equal the count from transformers' own tensors, every tensor of its
experts (".experts." in the name) counted num_experts_per_tok / num_experts.

    python preset_parameters.py KILN DECK
"""
import re
import subprocess
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

LLAMA31_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
LLAMA32_ROPE = dict(LLAMA31_ROPE, factor=32.0)


def llama(vocab, hidden, inter, layers, heads, kv, theta, tied, rope=None, model_type="llama", **more):
    eps = 1e-6 if model_type.startswith("qwen") else 1e-5
    config = {"model_type": model_type, "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
              "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
              "rms_norm_eps": eps, "rope_theta": theta, "tie_word_embeddings": tied, **more}
    if rope:
        config["rope_scaling"] = rope
    return config


# Published config.json fields (Hugging Face Hub, the base models).
PUBLISHED = {
    "smollm-135m": llama(49152, 576, 1536, 30, 9, 3, 10000.0, True, max_position_embeddings=2048),
    "smollm2-135m": llama(49152, 576, 1536, 30, 9, 3, 100000.0, True, max_position_embeddings=8192),
    "smollm2-1.7b": llama(49152, 2048, 8192, 24, 32, 32, 130000.0, True, max_position_embeddings=8192),
    "llama-3.2-1b": llama(128256, 2048, 8192, 16, 32, 8, 500000.0, True, LLAMA32_ROPE, head_dim=64,
                          max_position_embeddings=131072),
    "llama-3.2-3b": llama(128256, 3072, 8192, 28, 24, 8, 500000.0, True, LLAMA32_ROPE, head_dim=128,
                          max_position_embeddings=131072),
    "llama-3-8b": llama(128256, 4096, 14336, 32, 32, 8, 500000.0, False, max_position_embeddings=8192),
    "llama-3.1-8b": llama(128256, 4096, 14336, 32, 32, 8, 500000.0, False, LLAMA31_ROPE, max_position_embeddings=131072),
    "llama-3.1-70b": llama(128256, 8192, 28672, 80, 64, 8, 500000.0, False, LLAMA31_ROPE, max_position_embeddings=131072),
    "llama-2-70b": llama(32000, 8192, 28672, 80, 64, 8, 10000.0, False, max_position_embeddings=4096),
    "mistral-7b-v0.3": llama(32768, 4096, 14336, 32, 32, 8, 1000000.0, False, model_type="mistral", head_dim=128,
                             sliding_window=None, max_position_embeddings=32768),
    "qwen2.5-0.5b": llama(151936, 896, 4864, 24, 14, 2, 1000000.0, True, model_type="qwen2",
                          max_position_embeddings=32768),
    "qwen2.5-7b": llama(152064, 3584, 18944, 28, 28, 4, 1000000.0, False, model_type="qwen2",
                        max_position_embeddings=131072),
    "qwen3-0.6b": llama(151936, 1024, 3072, 28, 16, 8, 1000000.0, True, model_type="qwen3", head_dim=128,
                        max_position_embeddings=40960),
    "qwen3-8b": llama(151936, 4096, 12288, 36, 32, 8, 1000000.0, False, model_type="qwen3", head_dim=128,
                      max_position_embeddings=40960),
    "mixtral-8x7b": llama(32000, 4096, 14336, 32, 32, 8, 1000000.0, False, model_type="mixtral", num_local_experts=8,
                          num_experts_per_tok=2, sliding_window=None, max_position_embeddings=32768),
    "mixtral-8x22b": llama(32768, 6144, 16384, 56, 48, 8, 1000000.0, False, model_type="mixtral", num_local_experts=8,
                           num_experts_per_tok=2, sliding_window=None, max_position_embeddings=65536),
    "qwen3-30b-a3b": llama(151936, 2048, 6144, 48, 32, 4, 1000000.0, False, model_type="qwen3_moe", head_dim=128,
                           num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True,
                           decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=40960),
    "qwen3-235b-a22b": llama(151936, 4096, 12288, 94, 64, 4, 1000000.0, False, model_type="qwen3_moe", head_dim=128,
                             num_experts=128, num_experts_per_tok=8, moe_intermediate_size=1536, norm_topk_prob=True,
                             decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=40960),
    "olmoe-1b-7b": llama(50304, 2048, 1024, 16, 16, 16, 10000.0, False, model_type="olmoe", num_experts=64,
                         num_experts_per_tok=8, norm_topk_prob=False, clip_qkv=None, max_position_embeddings=4096),
    "gpt2-small": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12,
                   "n_positions": 1024, "tie_word_embeddings": True},
    "gpt2-medium": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 1024, "n_layer": 24, "n_head": 16,
                    "n_positions": 1024, "tie_word_embeddings": True},
}

# The deck key each published field must equal (llama family).
KEYS = {"vocab": "vocab_size", "blocks": "num_hidden_layers", "d_model": "hidden_size", "heads": "num_attention_heads",
        "kv_heads": "num_key_value_heads", "ffn_hidden": "intermediate_size", "norm_eps": "rms_norm_eps",
        "rope_theta": "rope_theta", "max_positions": "max_position_embeddings"}  # issue 65: the model's own context
ROPE_KEYS = {"rope_factor": "factor", "rope_low_freq_factor": "low_freq_factor",
             "rope_high_freq_factor": "high_freq_factor", "rope_original_context": "original_max_position_embeddings"}


def main():
    kiln, deck = sys.argv[1], sys.argv[2]
    failures = 0
    for name, published in PUBLISHED.items():
        fields = dict(published)
        model_type = fields.pop("model_type")
        config = AutoConfig.for_model(model_type, **fields)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        theirs = model.num_parameters()
        experts = fields.get("num_local_experts", fields.get("num_experts", 0))
        if experts:
            per_token = fields["num_experts_per_tok"]
            expert_tensors = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
            assert expert_tensors > 0, [n for n, _ in model.named_parameters()][:20]
            theirs_active = theirs - expert_tensors * (experts - per_token) // experts
        settings = ["--set", f"model.preset={name}"]
        if model_type == "gpt2":
            settings += ["--set", "data.seq_len=1024"]  # GPT-2's learned positions are counted at its 1024
        text = subprocess.run([kiln, "deck", "--check", deck, *settings], check=True, capture_output=True,
                              text=True).stdout
        ours = int(re.search(r"B, exactly (\d+)[;)]", text).group(1))
        resolved = dict(re.findall(r"^([a-z_0-9]+) = (\S+)", text, re.M))
        problems = []
        if ours != theirs:
            problems.append(f"kiln counts {ours} parameters, transformers {theirs}")
        if experts:
            ours_active = int(re.search(r"active per token [^,]*, exactly (\d+)", text).group(1))
            if ours_active != theirs_active:
                problems.append(f"kiln counts {ours_active} active parameters, transformers' tensors {theirs_active}")
            for key, field in (("experts", "num_experts"), ("experts_per_token", "num_experts_per_tok")):
                value = fields.get(field, fields.get("num_local_experts")) if key == "experts" else fields[field]
                if int(resolved[key]) != value:
                    problems.append(f"model.{key} = {resolved[key]}, {field} = {value}")
            width = fields.get("moe_intermediate_size", fields["intermediate_size"])
            if int(resolved["expert_hidden"]) != width:
                problems.append(f"model.expert_hidden = {resolved['expert_hidden']}, the experts' width {width}")
            softmax = "after_topk" if model_type == "mixtral" or fields.get("norm_topk_prob") else "before_topk"
            if resolved["router_softmax"] != softmax:
                problems.append(f"model.router_softmax = {resolved['router_softmax']}, {softmax} for {model_type}")
        if model_type != "gpt2":
            for key, field in KEYS.items():
                if key == "ffn_hidden" and experts:
                    continue  # no dense MLP: the experts' width is checked above
                if float(resolved[key]) != float(published[field]):
                    problems.append(f"model.{key} = {resolved[key]}, {field} = {published[field]}")
            rope = published.get("rope_scaling")
            if (resolved["rope_scaling"] == "none") != (rope is None):
                problems.append(f"model.rope_scaling = {resolved['rope_scaling']}, rope_scaling = {rope}")
            if rope:
                if resolved["rope_scaling"] != rope["rope_type"]:
                    problems.append(f"model.rope_scaling = {resolved['rope_scaling']}, rope_type = {rope['rope_type']}")
                for key, field in ROPE_KEYS.items():
                    if float(resolved[key]) != float(rope[field]):
                        problems.append(f"model.{key} = {resolved[key]}, rope_scaling.{field} = {rope[field]}")
            if (resolved["tie_embeddings"] == "true") != published["tie_word_embeddings"]:
                problems.append(f"model.tie_embeddings = {resolved['tie_embeddings']}")
            head_dim = published.get("head_dim", published["hidden_size"] // published["num_attention_heads"])
            kiln_head_dim = int(resolved["head_dim"]) or int(resolved["d_model"]) // int(resolved["heads"])
            if kiln_head_dim != head_dim:
                problems.append(f"model.head_dim = {resolved['head_dim']}, head_dim = {head_dim}")
            for key, wanted in (("qkv_bias", model_type == "qwen2"),
                                ("qk_norm", model_type in ("qwen3", "qwen3_moe", "olmoe"))):
                if (resolved[key] == "true") != wanted:
                    problems.append(f"model.{key} = {resolved[key]} for model_type {model_type}")
            if (resolved["qk_norm_over"] == "projection") != (model_type == "olmoe"):
                problems.append(f"model.qk_norm_over = {resolved['qk_norm_over']} for model_type {model_type}")
        if problems:
            failures += 1
            print(f"FAIL: {name}: " + "; ".join(problems))
        else:
            print(f"preset {name}: {ours} parameters, as transformers counts {type(model).__name__} of the published config")
    if failures:
        return 1
    print(f"PASS: {len(PUBLISHED)} presets equal their published shapes, parameter for parameter")
    return 0


if __name__ == "__main__":
    sys.exit(main())

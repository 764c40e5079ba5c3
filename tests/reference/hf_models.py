#!/usr/bin/env python3
"""Small models created by Hugging Face transformers (random weights, saved with save_pretrained), for kiln to
start from (issue 38, item 4b):

  OUT/llama         LlamaForCausalLM: 4 heads, 2 key/value heads, SwiGLU 96, rope_theta 500000, untied,
                    saved in shards of at most 100 kB (model.safetensors.index.json)
  OUT/llama-tied    the same shape with its head tied to the embedding (tie_word_embeddings, as SmolLM's and
                    Llama 3.2 1B's), in one file
  OUT/gpt2          GPT2LMHeadModel: 4 heads, 128 positions, head tied to the embedding (as GPT-2's is)
  OUT/llama31       the llama with Llama 3.1's rotary scaling (rope_type llama3, factor 8, low/high frequency
                    factors 1/4), its original context 64 positions so that its 8 frequencies meet every regime:
                    the first kept (wavelength 6 < 64/4), the second blended (32), the rest divided (> 64)
  OUT/llama-linear  the llama with linear rotary scaling (factor 2)
  OUT/llama-yarn    the llama with YaRN scaling (factor 4, original context 32: Qwen 2.5's long-context form)
  OUT/mistral       MistralForCausalLM (model_type mistral, sliding_window null: v0.3's form), rope_theta 1e6
  OUT/qwen2         Qwen2ForCausalLM (q/k/v biases, drawn at random so that each one counts), rope_theta 1e6
  OUT/qwen3         Qwen3ForCausalLM (q/k RMSNorm per head, its weights drawn at random; head_dim 24, not
                    hidden_size / heads = 16)
  OUT/mixtral       MixtralForCausalLM: 8 experts of SwiGLU 48, 2 per token (their weights renormalised)
  OUT/qwen3-moe     Qwen3MoeForCausalLM: 8 experts of 48, 2 per token, norm_topk_prob, q/k norms per head,
                    head_dim 24
  OUT/olmoe         OlmoeForCausalLM: 8 experts of 48, 2 per token, norm_topk_prob false (the softmax over all
                    experts kept), q/k norms over the whole projections
                    (the routers' weights drawn at 0.3, and the norms', so that routing is decisive and each
                    weight counts)
  OUT/llama-scaled  the llama's config with a rotary scaling kiln does not compute (dynamic), refused by name
  OUT/mistral-window   MistralForCausalLM with sliding_window 4 (v0.1's attention), shorter than the 8 tokens of
                    kiln export's reference sequences
  OUT/qwen2-mixed   the qwen2's config sliding its window on 2 of its 4 layers, refused by name

    python hf_models.py OUT
"""
import json
import shutil
import sys

import torch
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM, OlmoeConfig, OlmoeForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)


def main():
    out = sys.argv[1]
    torch.manual_seed(38)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                         num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                                         rope_theta=500000.0, max_position_embeddings=128, tie_word_embeddings=False,
                                         bos_token_id=None, eos_token_id=256))
    llama.save_pretrained(f"{out}/llama", max_shard_size="100KB")
    tied = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                        num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                                        rope_theta=500000.0, max_position_embeddings=128, tie_word_embeddings=True,
                                        bos_token_id=None, eos_token_id=256))
    assert tied.lm_head.weight is tied.model.embed_tokens.weight
    tied.save_pretrained(f"{out}/llama-tied")
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=64, n_layer=4, n_head=4, n_positions=128,
                                      bos_token_id=256, eos_token_id=256))
    gpt2.save_pretrained(f"{out}/gpt2")
    scalings = {
        "llama31": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 64},
        "llama-linear": {"rope_type": "linear", "factor": 2.0},
        "llama-yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
    }
    for name, scaling in scalings.items():
        scaled = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                              num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                                              rope_parameters={"rope_theta": 500000.0, **scaling},
                                              max_position_embeddings=128, tie_word_embeddings=False,
                                              bos_token_id=None, eos_token_id=256))
        scaled.save_pretrained(f"{out}/{name}")
    mistral = MistralForCausalLM(MistralConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                               num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                               rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None,
                                               max_position_embeddings=128, tie_word_embeddings=False,
                                               bos_token_id=None, eos_token_id=256))
    mistral.save_pretrained(f"{out}/mistral")
    window = MistralForCausalLM(MistralConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                              rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=4,
                                              max_position_embeddings=128, tie_word_embeddings=False,
                                              bos_token_id=None, eos_token_id=256))
    window.save_pretrained(f"{out}/mistral-window")
    qwen2 = Qwen2ForCausalLM(Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                         num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6,
                                         rope_theta=1e6, max_position_embeddings=128, tie_word_embeddings=False,
                                         bos_token_id=None, eos_token_id=256))
    qwen3 = Qwen3ForCausalLM(Qwen3Config(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=24, rms_norm_eps=1e-6,
                                         rope_theta=1e6, max_position_embeddings=128, tie_word_embeddings=False,
                                         bos_token_id=None, eos_token_id=256))
    with torch.no_grad():  # transformers starts biases at 0 and norms at 1: drawn here, so that a lost one shows
        for model in (qwen2, qwen3):
            for name, p in model.named_parameters():
                if name.endswith("proj.bias"):
                    p.normal_(0.0, 0.5)
                if name.endswith(("q_norm.weight", "k_norm.weight")):
                    p.uniform_(0.5, 1.5)
    qwen2.save_pretrained(f"{out}/qwen2")
    qwen3.save_pretrained(f"{out}/qwen3")
    common = dict(vocab_size=300, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=128, tie_word_embeddings=False, bos_token_id=None, eos_token_id=256,
                  pad_token_id=None, num_experts_per_tok=2)
    experts = {
        "mixtral": MixtralForCausalLM(MixtralConfig(intermediate_size=48, num_local_experts=8, rms_norm_eps=1e-5,
                                                    rope_theta=1e6, sliding_window=None, **common)),
        "qwen3-moe": Qwen3MoeForCausalLM(Qwen3MoeConfig(intermediate_size=96, moe_intermediate_size=48, num_experts=8,
                                                        norm_topk_prob=True, head_dim=24, rms_norm_eps=1e-6,
                                                        rope_theta=1e6, **common)),
        "olmoe": OlmoeForCausalLM(OlmoeConfig(intermediate_size=48, num_experts=8, norm_topk_prob=False,
                                              rms_norm_eps=1e-5, rope_theta=1e4, **common)),
    }
    with torch.no_grad():
        for name, model in experts.items():
            for parameter_name, p in model.named_parameters():
                if parameter_name.endswith(("mlp.gate.weight", "block_sparse_moe.gate.weight")):
                    p.normal_(0.0, 0.3)
                if parameter_name.endswith(("q_norm.weight", "k_norm.weight")):
                    p.uniform_(0.5, 1.5)
            model.save_pretrained(f"{out}/{name}")
    for source, name, change in (("llama", "llama-scaled", {"rope_scaling": {"rope_type": "dynamic", "factor": 8.0}}),
                                 ("qwen2", "qwen2-mixed", {"use_sliding_window": True, "sliding_window": 16,
                                                           "max_window_layers": 2, "layer_types": None})):
        shutil.copytree(f"{out}/{source}", f"{out}/{name}")
        config = json.load(open(f"{out}/{name}/config.json"))
        config.pop("rope_parameters", None)
        config.update(change)
        json.dump(config, open(f"{out}/{name}/config.json", "w"))
    print(f"saved in {out}: llama, llama-tied, gpt2, {', '.join(scalings)}, mistral, mistral-window, qwen2, qwen3, "
          f"{', '.join(experts)}, llama-scaled, qwen2-mixed")


if __name__ == "__main__":
    main()

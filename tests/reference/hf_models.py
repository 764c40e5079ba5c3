#!/usr/bin/env python3
"""Small models created by Hugging Face transformers (random weights, saved with save_pretrained), for kiln to
start from (issue 38, item 4b):

  OUT/llama         LlamaForCausalLM: 4 heads, 2 key/value heads, SwiGLU 96, rope_theta 500000, untied,
                    saved in shards of at most 100 kB (model.safetensors.index.json)
  OUT/llama-tied    the same shape with its head tied to the embedding (tie_word_embeddings, as SmolLM's and
                    Llama 3.2 1B's), in one file
  OUT/gpt2          GPT2LMHeadModel: 4 heads, 128 positions, head tied to the embedding (as GPT-2's is)
  OUT/llama-scaled  the llama's config with rope_scaling set, which kiln must refuse by name

    python hf_models.py OUT
"""
import json
import shutil
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


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
    shutil.copytree(f"{out}/llama", f"{out}/llama-scaled")
    config = json.load(open(f"{out}/llama-scaled/config.json"))
    config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}
    json.dump(config, open(f"{out}/llama-scaled/config.json", "w"))
    print(f"saved {out}/llama, {out}/llama-tied, {out}/gpt2 and {out}/llama-scaled")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""transformers' mixture of experts trained in PyTorch eager, for perf/bench_experts.sh: a MixtralForCausalLM
of the shape kiln's deck gives (random weights; with --dense-hidden H, the LlamaForCausalLM of SwiGLU H in its
place, for the dense baseline), the step kiln takes (microbatches whose summed cross-entropy
is divided by the step's targets, plus transformers' own load-balancing loss at router_aux_loss_coef, global-norm
clipping, AdamW) on random token ids, in one process, on `--threads` threads. Prints one JSON line: the median
step time over the steps after the first `--warmup`, and tokens/s at that median.
"""
import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM


def main():
    p = argparse.ArgumentParser()
    for name, default in (("vocab", 257), ("seq", 128), ("d-model", 256), ("heads", 8), ("kv-heads", 4), ("blocks", 6),
                          ("experts", 8), ("per-token", 2), ("expert-hidden", 384), ("micro-batch", 4),
                          ("global-batch", 16), ("steps", 10), ("warmup", 2), ("threads", 1)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--aux", type=float, default=0.01)
    p.add_argument("--dense-hidden", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=a.vocab, hidden_size=a.d_model, intermediate_size=a.expert_hidden,
                           num_hidden_layers=a.blocks, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                           num_local_experts=a.experts, num_experts_per_tok=a.per_token, max_position_embeddings=a.seq,
                           router_aux_loss_coef=a.aux, output_router_logits=True, tie_word_embeddings=False,
                           attn_implementation="sdpa")
    if a.dense_hidden:
        config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.d_model, intermediate_size=a.dense_hidden,
                             num_hidden_layers=a.blocks, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                             max_position_embeddings=a.seq, tie_word_embeddings=False, attn_implementation="sdpa")
    model = (LlamaForCausalLM if a.dense_hidden else MixtralForCausalLM)(config).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    targets = a.global_batch * a.seq
    times = []
    for step in range(a.steps):
        tokens = torch.randint(a.vocab, (a.global_batch, a.seq + 1))
        t0 = time.perf_counter()
        optimiser.zero_grad(set_to_none=False)
        for first in range(0, a.global_batch, a.micro_batch):
            batch = tokens[first:first + a.micro_batch]
            out = model(input_ids=batch[:, :-1])
            loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, a.vocab), batch[:, 1:].reshape(-1),
                                                     reduction="sum") / targets
            if not a.dense_hidden:
                loss = loss + a.aux * out.aux_loss * a.micro_batch / a.global_batch
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        times.append(time.perf_counter() - t0)
    kept = sorted(times[a.warmup:])
    median = kept[len(kept) // 2]
    print(json.dumps({"bench": "transformers_dense" if a.dense_hidden else "transformers_moe", "torch": torch.__version__, "threads": a.threads,
                      "median_step_s": median, "tokens_per_s": targets / median}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch eager twin of kiln's models and training step, for perf/bench_vs_pytorch.sh.

Same layers and shapes as src/model/gpt.cpp (gpt2: learned positions, pre-norm
blocks, tanh GELU, untied output head) and src/model/llama_layers.cpp (llama:
RMSNorm, rotary embeddings, grouped-query attention, SwiGLU, no biases), the same step (microbatches whose
summed cross-entropy is divided by the step's targets, global-norm clipping,
AdamW without decay on 1-D parameters) on random token ids, in one process.
Prints one JSON line: the median step time over the steps after the first
`--warmup`, and tokens/s at that median.
"""
import argparse
import ctypes
import json
import math
import os
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, d, heads, mlp):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, mlp * d)
        self.out = torch.nn.Linear(mlp * d, d)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        if hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.x: what kiln does on libtorch 1.13
            s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            a = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
        y = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return y + self.out(F.gelu(self.fc(self.ln2(y)), approximate="tanh"))


def rms_norm(x, w, eps=1e-5):
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotary(x, theta=10000.0):  # (B, heads, T, hd), "rotate half"
    T, hd = x.shape[2], x.shape[3]
    inverse = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float32, device=x.device) / hd)
    angles = torch.outer(torch.arange(T, dtype=torch.float32, device=x.device), inverse)
    both = torch.cat([angles, angles], -1)
    half = x.chunk(2, -1)
    return x * both.cos().to(x.dtype) + torch.cat([-half[1], half[0]], -1) * both.sin().to(x.dtype)


class LlamaBlock(torch.nn.Module):
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, hd = heads, kv_heads, d // heads
        self.norm1 = torch.nn.Parameter(torch.ones(d))
        self.q = torch.nn.Linear(d, d, bias=False)
        self.k = torch.nn.Linear(d, kv_heads * hd, bias=False)
        self.v = torch.nn.Linear(d, kv_heads * hd, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)
        self.norm2 = torch.nn.Parameter(torch.ones(d))
        self.gate = torch.nn.Linear(d, ffn, bias=False)
        self.up = torch.nn.Linear(d, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        h = rms_norm(x, self.norm1)
        q = rotary(self.q(h).view(B, T, self.heads, hd).transpose(1, 2))
        k = rotary(self.k(h).view(B, T, self.kv_heads, hd).transpose(1, 2))
        v = self.v(h).view(B, T, self.kv_heads, hd).transpose(1, 2)
        if self.kv_heads < self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, 1)
            v = v.repeat_interleave(self.heads // self.kv_heads, 1)
        if hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            a = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
        y = x + self.o(a.transpose(1, 2).reshape(B, T, C))
        m = rms_norm(y, self.norm2)
        return y + self.down(F.silu(self.gate(m)) * self.up(m))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, seq, d, heads, blocks, mlp, family="gpt2", kv_heads=0, ffn=0):
        super().__init__()
        self.llama = family == "llama"
        self.tok = torch.nn.Parameter(torch.randn(vocab, d) * 0.02)
        if self.llama:
            self.blocks = torch.nn.ModuleList(LlamaBlock(d, heads, kv_heads or heads, ffn) for _ in range(blocks))
            self.norm = torch.nn.Parameter(torch.ones(d))
        else:
            self.pos = torch.nn.Parameter(torch.randn(seq, d) * 0.02)
            self.blocks = torch.nn.ModuleList(Block(d, heads, mlp) for _ in range(blocks))
            self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Parameter(torch.randn(vocab, d) * 0.02)

    def forward(self, ids):
        x = F.embedding(ids, self.tok)
        if not self.llama:
            x = x + self.pos[: ids.shape[1]].unsqueeze(0)
        for b in self.blocks:
            x = b(x)
        return F.linear(rms_norm(x, self.norm) if self.llama else self.ln(x), self.head)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--blocks", type=int, required=True)
    p.add_argument("--mlp-ratio", type=int, default=4)
    p.add_argument("--family", default="gpt2", choices=["gpt2", "llama"])
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--ffn", type=int, default=0, help="llama: the SwiGLU width")
    p.add_argument("--micro-batch", type=int, required=True)
    p.add_argument("--global-batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, required=True, help="libtorch's intra-op threads")
    p.add_argument("--blas-threads", type=int, default=0, help="OpenBLAS's threads (0: leave as loaded)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    if a.blas_threads > 0:  # the pool kiln sets too (src/model/compute_threads.cpp)
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(a.blas_threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    model = Gpt(a.vocab, a.seq, a.d_model, a.heads, a.blocks, a.mlp_ratio, a.family, a.kv_heads, a.ffn).to(dev)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    rest = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    forward = torch.compile(model) if a.compile else model
    targets_per_step = a.global_batch * a.seq
    ids = torch.randint(0, a.vocab, (a.global_batch, a.seq + 1), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step():
        for m in range(0, a.global_batch, a.micro_batch):
            x, y = ids[m:m + a.micro_batch, :-1], ids[m:m + a.micro_batch, 1:]
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
                logits = forward(x)
            loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), y.reshape(-1), reduction="sum")
            (loss / targets_per_step).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    sync()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    seconds = sum(times)
    median = sorted(times)[len(times) // 2]
    print(json.dumps({"bench": "pytorch_eager" if not a.compile else "pytorch_compile", "torch": torch.__version__,
                      "threads": a.threads, "blas_threads": a.blas_threads, "steps": a.steps, "seconds_per_step": seconds / a.steps,
                      "median_step_s": median, "tokens_per_s": targets_per_step / median,
                      "glibc_tunables": os.environ.get("GLIBC_TUNABLES", "")}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The PyTorch baseline of perf/bench_checkpoint.sh: WRITERS processes each
torch.save their share (1/WRITERS) of a GPT-2 model's weights and both AdamW
moments (float32, layer by layer, as kiln's parts hold them) into DIR at the
same time. Prints one JSON line: the seconds until the last one finished,
and the seconds the slowest one took to copy its share in memory (clone():
the host-memory copy a background checkpoint's stall is measured against).

    /usr/bin/python3 perf/torch_save_shares.py MODEL WRITERS DIR
"""
import json
import multiprocessing as mp
import os
import sys
import time

import torch


def shapes(model):
    blocks, C = {"small": (12, 768), "medium": (24, 1024)}[model]
    V, T, H = 50304, 32, 4 * C
    layers = [[(V, C), (T, C)]]
    layers += [[(C,), (C,), (3 * C, C), (3 * C,), (C, C), (C,), (C,), (C,), (H, C), (H,), (C, H), (C,)]] * blocks
    layers += [[(C,), (C,), (V, C)]]
    return layers


def write(model, writers, index, directory, barrier, out):
    torch.set_num_threads(1)
    mine = [layer for k, layer in enumerate(shapes(model)) if k % writers == index]
    state = {f"{k}.{kind}.{j}": torch.randn(shape) for k, layer in enumerate(mine) for j, shape in enumerate(layer)
             for kind in ("param", "m", "v")}
    c0 = time.perf_counter()
    copies = {name: t.clone() for name, t in state.items()}
    copy = time.perf_counter() - c0
    del copies
    barrier.wait()
    t0 = time.perf_counter()
    path = os.path.join(directory, f"share-{index}.pt")
    torch.save(state, path)
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    out.put((time.perf_counter() - t0, copy))


def main():
    model, writers, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(directory, exist_ok=True)
    barrier, out = mp.Barrier(writers), mp.Queue()
    procs = [mp.Process(target=write, args=(model, writers, i, directory, barrier, out)) for i in range(writers)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    seconds, copy = max(r[0] for r in results), max(r[1] for r in results)
    for p in procs:
        p.join()
    params = sum(int(torch.Size(shape).numel()) for layer in shapes(model) for shape in layer)
    print(json.dumps({"bench": "checkpoint", "model": model, "ranks": writers, "mode": "torch.save", "writers": writers,
                      "state_gb": round(12 * params / 1e9, 2), "stall_s": seconds, "write_s": seconds,
                      "write_gb_per_s": round(12 * params / 1e9 / seconds, 3), "copy_s": round(copy, 3)}))


if __name__ == "__main__":
    main()

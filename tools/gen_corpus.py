#!/usr/bin/env python3
"""Generates a synthetic text corpus of a given size for benchmarks.

Documents of Zipf-distributed pseudo-words, log-normally distributed lengths
(median 403 words unless --median-words), written as JSON Lines ({"text": ...}) or as several
files of blank-line separated blocks. Deterministic for a given seed.
"""
import argparse
import json
import math
import os
import random


def words(rng, n):
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qu", "an", "er", "ol", "ing", "th"]
    vocab = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(n)})
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    return vocab, weights


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, help="output .jsonl file")
    p.add_argument("--mb", type=float, default=200.0, help="size in MB")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--median-words", type=float, default=None, help="median document length in words (default e^6, 403)")
    a = p.parse_args()
    rng = random.Random(a.seed)
    vocab, weights = words(rng, 20000)
    target = int(a.mb * 1e6)
    mu = 6.0 if a.median_words is None else math.log(a.median_words)
    written = 0
    with open(a.out + ".tmp", "w") as out:
        while written < target:
            n = max(5, int(rng.lognormvariate(mu, 1.0)))
            ws = rng.choices(vocab, weights, k=n)
            for i in range(12, n, 12):
                ws[i] = ws[i] + (".\n" if i % 60 == 0 else ",")
            line = json.dumps({"text": " ".join(ws)}) + "\n"
            out.write(line)
            written += len(line)
    os.replace(a.out + ".tmp", a.out)
    print(f"gen_corpus: {written / 1e6:.1f} MB -> {a.out}")


if __name__ == "__main__":
    main()

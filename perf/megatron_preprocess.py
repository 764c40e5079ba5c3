#!/usr/bin/env python3
"""Megatron-LM's data preparation (tools/preprocess_data.py) reduced to what it does for one JSON Lines file,
for perf/bench_prep_megatron.sh: a multiprocessing.Pool of WORKERS encodes the documents (imap, chunks of 25),
each with a transformers tokenizer made from TOKENIZER.json, the EOD appended (--append-eod); the main process
adds each document to megatron-core's IndexedDatasetBuilder (the dtype preprocess_data.py picks: uint16 below
65,500 ids) and finalizes OUT_PREFIX.bin/.idx. Prints one JSON line with the time of it all.

    python megatron_preprocess.py CORPUS.jsonl TOKENIZER.json EOD_TOKEN WORKERS OUT_PREFIX
"""
import json
import multiprocessing
import os
import sys
import time

import numpy
import torch
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

tokenizer = None
eod = None


def start_worker(tokenizer_path, eod_token):
    global tokenizer, eod
    from transformers import PreTrainedTokenizerFast
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_path)
    eod = tokenizer.convert_tokens_to_ids(eod_token)


def encode(line):
    ids = tokenizer(json.loads(line)["text"]).input_ids
    return ids + [eod], len(line)


def main():
    corpus, tokenizer_path, eod_token, workers, prefix = sys.argv[1:6]
    workers = int(workers)
    start = time.perf_counter()
    start_worker(tokenizer_path, eod_token)
    dtype = numpy.uint16 if len(tokenizer) < 65500 else numpy.int32
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    documents = tokens = text_bytes = 0
    with multiprocessing.Pool(workers, initializer=start_worker, initargs=(tokenizer_path, eod_token)) as pool, \
            open(corpus, encoding="utf-8") as lines:
        for ids, size in pool.imap(encode, lines, 25):
            builder.add_document(torch.tensor(ids, dtype=torch.int64), [len(ids)])
            documents += 1
            tokens += len(ids)
            text_bytes += size
    builder.finalize(prefix + ".idx")
    seconds = time.perf_counter() - start
    print(json.dumps({"tool": "megatron preprocess_data (pool, transformers, megatron-core builder)", "processes": workers,
                      "seconds": round(seconds, 2), "text_mb_s": round(text_bytes / 1e6 / seconds, 1),
                      "M_tokens_s_per_process": round(tokens / seconds / workers / 1e6, 3), "tokens": tokens,
                      "documents": documents}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()

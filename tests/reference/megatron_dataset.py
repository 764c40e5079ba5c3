#!/usr/bin/env python3
"""A Megatron-LM indexed dataset of a JSON Lines corpus, written as Megatron-LM's tools/preprocess_data.py
writes one: each document's text encoded by a Hugging Face tokenizer, the EOD appended (--append-eod), the
document added with megatron-core's own IndexedDatasetBuilder. Every other document is stored as two
sequences, as --split-sentences stores a document of two sentences.

    python megatron_dataset.py CORPUS.jsonl TOKENIZER.json EOS_TOKEN DTYPE OUT_PREFIX

DTYPE is a numpy integer type (uint16 is what preprocess_data.py picks for a vocabulary under 65500; int32
above). Prints the number of documents and ids written.
"""
import json
import sys

import numpy
import torch
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder
from tokenizers import Tokenizer


def main():
    corpus, tokenizer_path, eos_token, dtype, prefix = sys.argv[1:6]
    tokenizer = Tokenizer.from_file(tokenizer_path)
    eod = tokenizer.token_to_id(eos_token)
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=getattr(numpy, dtype))
    documents = ids = 0
    for n, line in enumerate(open(corpus, encoding="utf-8")):
        tokens = tokenizer.encode(json.loads(line)["text"], add_special_tokens=False).ids + [eod]
        half = len(tokens) // 2
        lengths = [half, len(tokens) - half] if n % 2 and half > 0 else [len(tokens)]
        builder.add_document(torch.tensor(tokens), lengths)
        documents += 1
        ids += len(tokens)
    builder.finalize(prefix + ".idx")
    written = IndexedDataset(prefix)  # Megatron's reader agrees with what was added
    assert len(written.document_indices) - 1 == documents, (len(written.document_indices), documents)
    print(f"{documents} documents, {ids} ids, {dtype}")


if __name__ == "__main__":
    main()

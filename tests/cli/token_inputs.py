#!/usr/bin/env python3
"""Pre-tokenized corpora for tests/cli/token_inputs.sh (issue 39, item 3), written as the tools that make them
write them, with GPT-2's vocabulary (50257 ids, EOS 50256):

  OUT/mega.idx, OUT/mega.bin   Megatron-LM indexed dataset (MMIDIDX version 1, uint16, code 8): documents of 1
                               or 2 sequences (preprocess_data.py --split-sentences), each ending with the EOD
                               (--append-eod), as its _IndexWriter lays them out
  OUT/flat.npy                 a 1-D int32 array, each document preceded by the EOS (nanoGPT's fineweb.py)
  OUT/llmc.bin                 llm.c's format: 256 int32 of header (20240520, version 1, count), uint16 ids
  OUT/raw.bin                  headerless uint16 ids, each document followed by the EOS (nanoGPT's
                               openwebtext prepare.py), 3 MB: shared by the ranks in pieces
  OUT/bad.npy                  one id past the vocabulary (50300), in document 3
  OUT/expected-*.txt           each input's documents as kiln must store them (no EOS), one per line

    python token_inputs.py OUT
"""
import struct
import sys

import numpy

EOS = 50256


def documents(rng, count):
    return [rng.integers(0, EOS, size=int(rng.integers(1, 3000))).tolist() for _ in range(count)]


def write_expected(path, docs):
    with open(path, "w") as out:
        for doc in docs:
            out.write(" ".join(map(str, doc)) + "\n")


def megatron(prefix, docs, rng):
    lengths, pointers, boundaries, data = [], [], [0], bytearray()
    for doc in docs:
        ids = doc + [EOS]
        cut = int(rng.integers(1, len(ids))) if len(ids) > 2 and rng.random() < 0.5 else len(ids)
        for piece in (ids[:cut], ids[cut:]):
            if not piece:
                continue
            pointers.append(len(data))
            lengths.append(len(piece))
            data += numpy.asarray(piece, dtype=numpy.uint16).tobytes()
        boundaries.append(len(lengths))
    open(prefix + ".bin", "wb").write(bytes(data))
    with open(prefix + ".idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00")
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", 8))
        idx.write(struct.pack("<Q", len(lengths)))
        idx.write(struct.pack("<Q", len(boundaries)))
        idx.write(numpy.asarray(lengths, dtype=numpy.int32).tobytes())
        idx.write(numpy.asarray(pointers, dtype=numpy.int64).tobytes())
        idx.write(numpy.asarray(boundaries, dtype=numpy.int64).tobytes())


def main():
    out = sys.argv[1]
    rng = numpy.random.default_rng(39)
    mega = documents(rng, 900)
    megatron(f"{out}/mega", mega, rng)
    write_expected(f"{out}/expected-mega.txt", mega)
    flat = documents(rng, 300)
    numpy.save(f"{out}/flat.npy", numpy.asarray([t for doc in flat for t in [EOS] + doc], dtype=numpy.int32))
    write_expected(f"{out}/expected-flat.txt", flat)
    llmc = documents(rng, 200)
    ids = numpy.asarray([t for doc in llmc for t in [EOS] + doc], dtype=numpy.uint16)
    header = numpy.zeros(256, dtype=numpy.int32)
    header[:3] = [20240520, 1, len(ids)]
    open(f"{out}/llmc.bin", "wb").write(header.tobytes() + ids.tobytes())
    write_expected(f"{out}/expected-llmc.txt", llmc)
    raw = documents(rng, 1000)
    open(f"{out}/raw.bin", "wb").write(numpy.asarray([t for doc in raw for t in doc + [EOS]], dtype=numpy.uint16).tobytes())
    write_expected(f"{out}/expected-raw.txt", raw)
    bad = documents(rng, 5)
    bad[3][7] = 50300
    numpy.save(f"{out}/bad.npy", numpy.asarray([t for doc in bad for t in doc + [EOS]], dtype=numpy.int64))


if __name__ == "__main__":
    main()

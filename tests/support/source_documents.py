#!/usr/bin/env python3
"""Prints every document of a kiln source, one a line, as its token ids separated by spaces, in shard order
(shard-NNNNN.h5 by number): read from the shards with h5dump (hdf5-tools), so that a test checks what is stored without
going through kiln's own reader.

    python source_documents.py DATA_DIR/SOURCE > documents.txt
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy


def dataset(shard, name, dtype, scratch):
    path = os.path.join(scratch, name)
    subprocess.run(["h5dump", "-d", name, "-b", "LE", "-o", path, shard], check=True, stdout=subprocess.DEVNULL)
    return numpy.fromfile(path, dtype=dtype)


def main():
    source = sys.argv[1]
    manifest = json.load(open(os.path.join(source, "manifest.json")))
    dtype = numpy.uint16 if manifest["token_bits"] == 16 else numpy.uint32
    with tempfile.TemporaryDirectory() as scratch:
        for path in sorted(glob.glob(os.path.join(source, "shard-*.h5"))):
            tokens = dataset(path, "tokens", dtype, scratch)
            offsets = dataset(path, "doc_offsets", numpy.uint64, scratch)
            for a, b in zip(offsets[:-1], offsets[1:]):
                print(" ".join(map(str, tokens[a:b].tolist())))


if __name__ == "__main__":
    main()

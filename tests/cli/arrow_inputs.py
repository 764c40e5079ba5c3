#!/usr/bin/env python3
"""Parquet and Arrow inputs for tests/cli/arrow_inputs.sh (issue 39, items 2 and 3a), written with pyarrow as
the datasets people bring are:

  OUT/fineweb.parquet   FineWeb's layout: text, id, url, token_count columns; 1000 rows in row groups of 100,
                        one null text and one empty text among them
  OUT/fineweb.arrow     the same table as an Arrow IPC file (record batches of 128 rows)
  OUT/fineweb.stream    the same table as an Arrow IPC stream
  OUT/ids.parquet       IBM fms-fsdp's layout: one document a row as a list<int32> column input_ids (GPT-2's
                        vocabulary, some rows ending with its EOS 50256), 600 rows in row groups of 50
  OUT/bad-ids.parquet   the same with id 60000 in row 17
  OUT/expected-ids.txt  the ids kiln must store for each row of ids.parquet (no trailing EOS), a row a line
  OUT/expected.json     documents and text bytes of fineweb.*

    python arrow_inputs.py OUT
"""
import json
import random
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq


def main():
    out = sys.argv[1]
    rng = random.Random(39)
    words = "the quick brown fox jumps over a lazy dog café 日本語 😀 1234".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 400))) for _ in range(1000)]
    texts[10], texts[500] = None, "   "
    table = pa.table({"text": texts, "id": [f"<urn:uuid:{i}>" for i in range(1000)],
                      "url": [f"https://example.com/{i}" for i in range(1000)],
                      "token_count": [len(t.split()) if t else 0 for t in texts]})
    pq.write_table(table, f"{out}/fineweb.parquet", row_group_size=100)
    with ipc.new_file(f"{out}/fineweb.arrow", table.schema) as writer:
        for batch in table.to_batches(max_chunksize=128):
            writer.write_batch(batch)
    with ipc.new_stream(f"{out}/fineweb.stream", table.schema) as writer:
        for batch in table.to_batches(max_chunksize=300):
            writer.write_batch(batch)
    good = [t for t in texts if t and t.strip()]
    json.dump({"documents": len(good), "bytes": sum(len(t.encode()) for t in good)}, open(f"{out}/expected.json", "w"))

    rows = []
    for i in range(600):
        ids = [rng.randrange(0, 50256) for _ in range(rng.randint(1, 500))]
        rows.append(ids + ([50256] if i % 3 == 0 else []))
    ids_type = pa.list_(pa.int32())
    pq.write_table(pa.table({"input_ids": pa.array(rows, type=ids_type)}), f"{out}/ids.parquet", row_group_size=50)
    with open(f"{out}/expected-ids.txt", "w") as f:
        for r in rows:
            f.write(" ".join(map(str, r[:-1] if r[-1] == 50256 else r)) + "\n")
    bad = [list(r) for r in rows]
    bad[17][3] = 60000
    pq.write_table(pa.table({"input_ids": pa.array(bad, type=ids_type)}), f"{out}/bad-ids.parquet", row_group_size=50)


if __name__ == "__main__":
    main()

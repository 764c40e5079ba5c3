#!/usr/bin/env python3
"""Writes the demo corpora kiln's demo trains on, from text Debian packages ship.

  quotes.jsonl   one JSON object per fortune cookie (package 'fortunes'):
                 short, witty, conversational text
The second demo source, the Vim reference manuals (package 'vim-runtime'),
is read by kiln prep directly, one document per file: long technical prose.
"""
import argparse
import json
import os
import sys

FORTUNES = "/usr/share/games/fortunes"


def fortunes(directory):
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if "." in name or not os.path.isfile(path):
            continue  # skip the .dat indexes and .u8 links
        raw = open(path, "rb").read()
        for index, chunk in enumerate(raw.split(b"\n%\n")):
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError:
                text = chunk.decode("latin-1")  # the older fortune files are Latin-1
            text = text.strip("\n%")
            if text.strip():
                yield {"text": text, "collection": name, "index": index}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory for the raw corpora")
    args = parser.parse_args()
    if not os.path.isdir(FORTUNES):
        sys.exit(f"demo_corpora: {FORTUNES} is missing; install the Debian package 'fortunes'")
    os.makedirs(args.out, exist_ok=True)
    target = os.path.join(args.out, "quotes.jsonl")
    count = 0
    with open(target + ".tmp", "w", encoding="utf-8") as out:
        for record in fortunes(FORTUNES):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    os.replace(target + ".tmp", target)
    print(f"demo_corpora: {count} quotes -> {target}")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Tokenizing speed of kiln prep with a Hugging Face tokenizer.json against the `tokenizers` wheel (issues 39 and
# 53): tokenizers of four designs trained by `tokenizers` on the licence texts (16 k ids): GPT-2's (ByteLevel
# and its regex), Qwen's (NFC normalizer, its Split regex, ByteLevel), Llama 2's SentencePiece style (Prepend and
# Replace normalizers, no pre-tokenizer: each document one piece, byte fallback) and Mistral's (Metaspace, not
# split, byte fallback). The corpus of perf/bench_prep_formats.sh (licence text and base64), its first DOCS
# documents (default 10000, about 39 MB), encoded by kiln prep on 1 rank and by Tokenizer.encode_batch on 1
# thread (RAYON_NUM_THREADS=1). One JSON line per tool and design, then a line per design with the ratio.
#
#   ./bootstrap.sh test (or reference) && perf/bench_tokenizers.sh [DOCS]
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
python=${KILN_REFERENCE_PYTHON:-$root/.deps/torch-2.15.0/bin/python}
docs=${1:-10000}
work=$build/perf-tokenizers
rm -rf "$work"
mkdir -p "$work"
[ -f "$build/perf-prep-formats/corpus.jsonl" ] || perf/bench_prep_formats.sh >/dev/null
head -n "$docs" "$build/perf-prep-formats/corpus.jsonl" >"$work/corpus.jsonl"
corpus=$work/corpus.jsonl
designs=(gpt2 qwen llama2 mistral)
RAYON_NUM_THREADS=1 "$python" - "$work" "$corpus" "${designs[@]}" <<'PY'
import glob, json, sys, time
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
work, corpus, designs = sys.argv[1], sys.argv[2], sys.argv[3:]
texts = [open(p, errors="replace").read() for p in sorted(glob.glob("/usr/share/common-licenses/*"))]
docs = [json.loads(line)["text"] for line in open(corpus)]
mb = sum(len(d.encode()) for d in docs) / 1e6
QWEN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level(name):
    tok = Tokenizer(models.BPE())
    if name == "qwen":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN), behavior="isolated"),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=16000, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    return tok


def sentencepiece_style(name):
    normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]) if name == "llama2" else None
    pre = None if name == "llama2" else pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    trainer = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer.normalizer, trainer.pre_tokenizer = normalizer, pre
    # Words cut at spaces for training (a whole document is no word to learn from); encoding is as the design says.
    trainer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=16000, special_tokens=["<unk>", "<s>", "</s>"],
                                                           limit_alphabet=200, show_progress=False))
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
    for piece, _ in sorted(trainer.get_vocab().items(), key=lambda item: item[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in json.loads(trainer.to_str())["model"]["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.normalizer, tok.pre_tokenizer = normalizer, pre
    return tok


for name in designs:
    tok = byte_level(name) if name in ("gpt2", "qwen") else sentencepiece_style(name)
    tok.save(f"{work}/{name}.json")
    start = time.perf_counter()
    ids = tok.encode_batch(docs, add_special_tokens=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(e.ids) for e in ids)
    print(json.dumps({"tool": "tokenizers encode_batch, 1 thread", "design": name, "seconds": round(seconds, 2),
                      "text_mb_s": round(mb / seconds, 1), "M_tokens_s": round(tokens / seconds / 1e6, 2), "tokens": tokens}))
    json.dump({"seconds": seconds, "tokens": tokens}, open(f"{work}/{name}.reference.json", "w"))
PY
for name in "${designs[@]}"; do
  "$kiln" prep --source "$name" --input "$corpus" --format jsonl --tokenizer "$work/$name.json" --out "$work/data" --quiet \
    >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  python3 - "$work/$name.log" "$work/$name.reference.json" "$name" <<'PY'
import json, re, sys
log = open(sys.argv[1]).read()
m = re.search(r"kiln prep: (\d+) documents, (\d+) tokens .* in ([0-9.]+) s \(([0-9.]+) MB/s", log)
tokens, seconds, mb_s = int(m.group(2)), float(m.group(3)), float(m.group(4))
ref = json.load(open(sys.argv[2]))
print(json.dumps({"tool": "kiln prep, 1 rank", "design": sys.argv[3], "seconds": seconds, "text_mb_s": mb_s,
                  "M_tokens_s": round(tokens / seconds / 1e6, 2), "tokens": tokens}))
print(f"TOKENIZE design={sys.argv[3]} kiln_vs_tokenizers={ref['seconds'] / seconds:.2f}x same_tokens={tokens == ref['tokens']}")
PY
done

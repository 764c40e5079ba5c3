#!/usr/bin/env python3
"""Byte-level BPE tokenizers trained with Hugging Face `tokenizers`, and the ids it gives, for
tests/reference/tokenizer_parity.sh (issue 39, item 4):

  OUT/corpus.jsonl        300 documents (and 150 of their characters shuffled and random numbers, which the
                          tokenizers never saw, so that merges stop between whole words): Latin with accents, Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai,
                          Chinese, Japanese, Korean, emoji (with skin tones, ZWJ families, flags), numbers
                          (long digit runs, decimals), whitespace runs (spaces, tabs, CR LF, no-break and
                          ideographic spaces), contractions in both cases, and special tokens inside the text
  OUT/gpt2/tokenizer.json GPT-2's design: ByteLevel pre-tokenizer with its regex, <|endoftext|>
  OUT/llama3/             Llama 3's design: Sequence [Split (Llama 3's regex), ByteLevel], ignore_merges,
                          <|begin_of_text|> and <|end_of_text|>, with tokenizer_config.json naming the EOS
  OUT/qwen/               Qwen 2's design: NFC normalizer, Sequence [Split (Qwen's regex: one digit at a time),
                          ByteLevel], <|endoftext|>
  OUT/nfkc/               GPT-2's design behind an NFKC normalizer (full-width forms, ligatures, superscripts
                          folded)
  OUT/llama2/             Llama 2's SentencePiece style: normalizer Sequence [Prepend "▁", Replace " " by "▁"], no
                          pre-tokenizer, characters as symbols, byte fallback to <0x00>..<0xFF> for characters left
                          out of its alphabet, <unk> fused, </s>
  OUT/mistral/            Mistral's: no normalizer, Metaspace (prepend_scheme first, not split), the same model
  OUT/metaspace/          Metaspace split before each "▁" (prepend_scheme always), as older SentencePiece
                          conversions have it
  OUT/*/expected.txt      `tokenizers`' ids of every document (encode, add_special_tokens=False), a line each

    python hf_tokenizers.py OUT
"""
import json
import os
import random
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")

PIECES = [
    "The café naïve résumé", "Ελληνικά κείμενα", "Русский текст, ёж", "مرحبا بالعالم", "שלום עולם",
    "नमस्ते दुनिया", "สวัสดีชาวโลก", "中文文本测试", "日本語のテキスト、カタカナ", "한국어 텍스트",
    "emoji 😀🎉👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵", "numbers 1234567890 3.14159 2026-12-03 +49 30 123456",
    "spaces     and\ttabs\t\t here", "lines\r\nwith CR LF\n\n\nand blanks", "no-break\u00a0space and\u3000ideographic",
    "it's we'LL they'RE I'm you'd", "code: def f(x): return x**2  # comment", "URL https://example.com/a?b=c&d=e",
    "trailing spaces   ", "   leading spaces", "<|endoftext|>", "a<|endoftext|>b", "<|end_of_text|> and <|begin_of_text|>",
    # Combining characters (composed by NFC), full-width forms, ligatures and compatibility characters (folded by
    # NFKC), and the same letters precomposed.
    "cafe\u0301 A\u030a n\u0303 e\u0301\u0302 Å é ñ", "ＡＢＣ ｆｕｌｌ－ｗｉｄｔｈ １２３　全角", "ﬁnd ﬂow oﬀice ﬃ ﬄ ß ẞ",
    "x² H₂O ① ㎏ ㍻ Ⅻ ½ ™ ℃", "ｶﾀｶﾅ ﾊﾝｶｸ ガ ｶﾞ", "한글 자모 \u1112\u1161\u11ab",
]


def corpus(rng):
    docs = []
    for _ in range(300):
        docs.append("".join(rng.choice(PIECES) + rng.choice(["", " ", "\n", "  ", "\t"]) for _ in range(rng.randint(1, 12))))
    return docs


def unseen(rng):
    """Text the tokenizers were not trained on: the pieces' characters shuffled, and random numbers, so that words
    end up between merges rather than whole in the vocabulary."""
    chars = list("".join(PIECES))
    docs = []
    for _ in range(150):
        words = ["".join(rng.sample(chars, rng.randint(1, 12))) for _ in range(rng.randint(1, 30))]
        words += [str(rng.randint(0, 10 ** rng.randint(1, 15))) for _ in range(rng.randint(0, 5))]
        rng.shuffle(words)
        docs.append(rng.choice([" ", "  ", "\n", ""]).join(words))
    return [d for d in docs if d.strip()]


def save(tok, directory, docs, eos=None, decodes=True):
    os.makedirs(directory, exist_ok=True)
    tok.save(f"{directory}/tokenizer.json")
    if eos:
        json.dump({"eos_token": eos}, open(f"{directory}/tokenizer_config.json", "w"))
    with open(f"{directory}/expected.txt", "w") as out:
        for doc in docs:
            out.write(" ".join(map(str, tok.encode(doc, add_special_tokens=False).ids)) + "\n")
    # Decoding gives back the text (BPE with every byte at hand loses nothing; a normalizer does).
    for doc in docs[:20] if decodes else []:
        assert tok.decode(tok.encode(doc, add_special_tokens=False).ids, skip_special_tokens=False) == doc


def main():
    out = sys.argv[1]
    rng = random.Random(39)
    trained = corpus(rng)
    docs = trained + unseen(rng)
    with open(f"{out}/corpus.jsonl", "w") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    training = trained * 3

    gpt2 = Tokenizer(models.BPE())
    gpt2.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    gpt2.decoder = decoders.ByteLevel()
    gpt2.train_from_iterator(training, trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>"],
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    save(gpt2, f"{out}/gpt2", docs)

    llama3 = Tokenizer(models.BPE(ignore_merges=True))
    llama3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    llama3.decoder = decoders.ByteLevel()
    llama3.train_from_iterator(training, trainers.BpeTrainer(
        vocab_size=1500, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    save(llama3, f"{out}/llama3", docs, eos="<|end_of_text|>")

    qwen = Tokenizer(models.BPE())
    qwen.normalizer = normalizers.NFC()
    qwen.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    qwen.decoder = decoders.ByteLevel()
    qwen.train_from_iterator(training, trainers.BpeTrainer(vocab_size=1300, special_tokens=["<|endoftext|>"],
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    save(qwen, f"{out}/qwen", docs, decodes=False)

    nfkc = Tokenizer(models.BPE())
    nfkc.normalizer = normalizers.NFKC()
    nfkc.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    nfkc.decoder = decoders.ByteLevel()
    nfkc.train_from_iterator(training, trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>"],
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    save(nfkc, f"{out}/nfkc", docs, decodes=False)

    sizes = {}
    for name, normalizer, pre_tokenizer in (
            ("llama2", normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]), None),
            ("mistral", None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)),
            ("metaspace", None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True))):
        tok = sentencepiece_style(training, normalizer, pre_tokenizer)
        save(tok, f"{out}/{name}", docs, eos="</s>")
        sizes[name] = tok.get_vocab_size()
    print(f"{len(docs)} documents; vocabularies gpt2 {gpt2.get_vocab_size()}, llama3 {llama3.get_vocab_size()}, "
          f"qwen {qwen.get_vocab_size()}, nfkc {nfkc.get_vocab_size()}, {sizes}")


def sentencepiece_style(training, normalizer, pre_tokenizer):
    """A BPE over characters as Llama 2's and Mistral's tokenizer.json have it: <unk>, <s>, </s>, then the 256
    byte tokens <0x00>..<0xFF> in the vocabulary (not added tokens), then the merges' pieces; characters left out
    of the alphabet (150 most frequent) fall back to their bytes."""
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tok.normalizer = normalizer
    trainer_tok.pre_tokenizer = pre_tokenizer
    trainer_tok.train_from_iterator(training, trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"],
                                                                  limit_alphabet=150))
    trained = trainer_tok.get_vocab()
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for piece, _ in sorted(trained.items(), key=lambda item: item[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    import json as _json
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1))
              for m in _json.loads(trainer_tok.to_str())["model"]["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return tok


if __name__ == "__main__":
    main()

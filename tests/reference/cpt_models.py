#!/usr/bin/env python3
"""Stand-ins for the checkpoints a team continues to pre-train (issue 53, item 5), for
tests/reference/continued_pretraining.sh, which runs docs/continued-pretraining.md on them. Each directory holds
what a Hugging Face model repository holds: config.json, model.safetensors, tokenizer.json and
tokenizer_config.json; the tokenizer is of the family's design, trained by `tokenizers` on the licence texts, and
the model (random weights, transformers-made) has its vocabulary.

  OUT/models/Llama-3.1-8B  a LlamaForCausalLM of Llama 3.1's design, small: GQA, rope_theta 500000, Llama 3.1's
                           llama3 rotary scaling (its original context 64, so that the scaling acts on 64-token
                           sequences), Llama 3's tokenizer design (Split regex, ByteLevel, ignore_merges,
                           <|begin_of_text|> <|end_of_text|>)
  OUT/models/Qwen3-8B      a Qwen3ForCausalLM, small: q/k norms, head_dim 24 apart from hidden_size / heads,
                           Qwen's tokenizer design (NFC, Split regex with single digits, ByteLevel, <|endoftext|>)
  OUT/corpus/part-000.jsonl  the licence texts' paragraphs, one JSON line each

    python cpt_models.py OUT
"""
import glob
import json
import os
import sys

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
        r"\s*[\r\n]+|\s+(?!\S)|\s+")


def tokenizer(texts, pattern, specials, nfc):
    tok = Tokenizer(models.BPE(ignore_merges=not nfc))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=800, special_tokens=specials, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def main():
    out = sys.argv[1]
    texts = [open(p, errors="replace").read() for p in sorted(glob.glob("/usr/share/common-licenses/*"))]
    os.makedirs(f"{out}/corpus", exist_ok=True)
    with open(f"{out}/corpus/part-000.jsonl", "w") as f:
        for text in texts:
            for paragraph in text.split("\n\n"):
                if paragraph.strip():
                    f.write(json.dumps({"text": paragraph}) + "\n")
    torch.manual_seed(53)
    llama_dir, qwen_dir = f"{out}/models/Llama-3.1-8B", f"{out}/models/Qwen3-8B"
    llama_tok = tokenizer(texts, LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>"], nfc=False)
    qwen_tok = tokenizer(texts, QWEN, ["<|endoftext|>"], nfc=True)
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=llama_tok.get_vocab_size(), hidden_size=64, intermediate_size=96, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, max_position_embeddings=256,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=1))
    qwen = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=qwen_tok.get_vocab_size(), hidden_size=64, intermediate_size=96, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, rms_norm_eps=1e-6, rope_theta=1e6,
        max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=None, eos_token_id=0))
    with torch.no_grad():
        for name, p in qwen.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.uniform_(0.5, 1.5)
    for model, tok, directory, eos in ((llama, llama_tok, llama_dir, "<|end_of_text|>"),
                                       (qwen, qwen_tok, qwen_dir, "<|endoftext|>")):
        model.save_pretrained(directory)
        tok.save(f"{directory}/tokenizer.json")
        json.dump({"eos_token": eos}, open(f"{directory}/tokenizer_config.json", "w"))
    print(f"saved {llama_dir} (vocabulary {llama_tok.get_vocab_size()}), {qwen_dir} "
          f"(vocabulary {qwen_tok.get_vocab_size()}) and {out}/corpus")


if __name__ == "__main__":
    main()

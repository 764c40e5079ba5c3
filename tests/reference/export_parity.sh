#!/usr/bin/env bash
# kiln's models in the reference implementation (issue 38, item 4a): models trained by kiln, exported with
# `kiln export`, loaded by Hugging Face transformers from PyPI (the virtual environment ./bootstrap.sh makes
# beside the CUDA build's torch: .deps/torch-VERSION) give kiln's logits to 1e-4 relative.
# Pass criteria, each printed as PASS:
#  1. gpt2 trained on 2 pipeline stages loads as GPT2LMHeadModel with kiln's logits, and without a warning
#     about its config (eos_token_id is the byte tokenizer's 256, inside the vocabulary; bos_token_id null).
#  2. llama with grouped-query attention (4 heads, 2 key/value heads, rope_theta 500000) trained on 2+1
#     pipelines of 2-wide stages (6 ranks, 3 nodes of 2) loads as LlamaForCausalLM with kiln's logits.
#  3. The same llama exported in files of at most 0.3 MB (--max-shard-mb: numbered safetensors files cut at layer
#     boundaries and model.safetensors.index.json, as save_pretrained writes a large model) loads in transformers
#     with kiln's logits; with --reference-max-mb 0 no kiln_reference.json is written and the export says why.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 python=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/../fault/lib.sh"
# Found, not imported: importing both costs 5-6 CPU-s, and hf_logits.py imports them anyway.
if ! "$python" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ('transformers', 'torch')))"; then
  fail "no Python with transformers and torch at $python: ./bootstrap.sh test (or ./bootstrap.sh reference) installs them"
fi
here=$(dirname "$0")

must gpt2 2 --set cluster.ranks_per_node=1 --set plan.pipelines=2 --set fault.f=0 --set run.steps=3
"$kiln" export "$work/gpt2/tiny/ckpt/step-00000003.h5" "$work/hf-gpt2" >"$work/export-gpt2.txt"
python3 -c "import json, sys; c = json.load(open('$work/hf-gpt2/config.json')); sys.exit(0 if c['eos_token_id'] == 256 and c['bos_token_id'] is None else 1)" ||
  fail "config.json's eos/bos ids are not the byte tokenizer's 256 and null"

must llama 6 --set model.family=llama --set model.kv_heads=2 --set model.rope_theta=500000 \
  --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1 --set run.steps=3
grep -q "layout     2+1 (2x2+1x2 stages x ranks)" "$work/llama.log" || fail "the llama did not train on 2+1 of 2-wide stages"
"$kiln" export "$work/llama/tiny/ckpt/step-00000003.h5" "$work/hf-llama" >"$work/export-llama.txt"

"$kiln" export "$work/llama/tiny/ckpt/step-00000003.h5" "$work/hf-sharded" --max-shard-mb 0.3 >"$work/export-sharded.txt"
shards=$(ls "$work/hf-sharded" | grep -c '^model-0000[0-9]-of-0000[0-9].safetensors$' || true)
[ "$shards" -ge 3 ] && [ -f "$work/hf-sharded/model.safetensors.index.json" ] && [ ! -e "$work/hf-sharded/model.safetensors" ] ||
  { ls "$work/hf-sharded"; fail "not cut into numbered files with an index"; }
python3 - "$work/hf-sharded" <<'PY' || fail "a shard is larger than 0.3 MB (with more than one layer) or the index does not list every tensor"
import json, os, struct, sys
d = sys.argv[1]
index = json.load(open(f"{d}/model.safetensors.index.json"))
named = set(index["weight_map"].values())
listed, total = set(), 0
for f in sorted(named):
    raw = open(f"{d}/{f}", "rb").read()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    tensors = [k for k in header if k != "__metadata__"]
    listed.update(tensors)
    total += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__")
    layers = {k.split(".")[2] if k.startswith("model.layers.") else k for k in tensors}
    assert os.path.getsize(f"{d}/{f}") <= 0.3 * 1048576 + 4096 or len(layers) == 1, (f, len(layers))
assert listed == set(index["weight_map"]) and total == index["metadata"]["total_size"], (len(listed), total)
PY
"$kiln" export "$work/llama/tiny/ckpt/step-00000003.h5" "$work/hf-noref" --reference-max-mb 0 >"$work/export-noref.txt"
[ ! -e "$work/hf-noref/kiln_reference.json" ] && grep -q "note: kiln_reference.json not written" "$work/export-noref.txt" ||
  { cat "$work/export-noref.txt"; fail "--reference-max-mb 0 wrote the reference or said nothing"; }
# The three exports in one transformers process (importing torch and transformers costs about 5 CPU-s a process): a
# JSON line and a PASS or FAIL line each, in order.
"$python" "$here/hf_logits.py" "$work/hf-gpt2" GPT2LMHeadModel 1e-4 -- "$work/hf-llama" LlamaForCausalLM 1e-4 \
  -- "$work/hf-sharded" LlamaForCausalLM 1e-4 >"$work/parity" 2>"$work/parity.stderr" ||
  { cat "$work/parity" "$work/parity.stderr"; fail "transformers does not load kiln's exports with kiln's logits"; }
if grep -q "must be \`None\` or an integer within the vocabulary" "$work/parity.stderr"; then cat "$work/parity.stderr"; fail "transformers warns about an exported config"; fi
check_line() { grep '^{' "$work/parity" | sed -n "${1}p"; }
[ "$(grep -c '^{' "$work/parity")" = 3 ] || { cat "$work/parity"; fail "transformers ran $(grep -c '^{' "$work/parity") checks, not 3"; }
echo "PASS 1: gpt2 trained on 2 stages, in transformers: $(check_line 1)"
echo "PASS 2: llama with grouped-query attention trained on 2+1 pipelines of 2-wide stages, in transformers: $(check_line 2)"
echo "PASS 3: the llama in $shards files with an index, in transformers: $(check_line 3)"

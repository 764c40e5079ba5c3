#!/usr/bin/env bash
# A checkpoint leaves kiln: `kiln checkpoint` lists and verifies it, `kiln export` writes it for Hugging Face
# transformers, and tests/cli/gpt2_numpy.py loads the export outside kiln (safetensors parsed by hand, GPT-2's
# forward in numpy) and finds kiln's own logits to 1e-4. Pass criteria, printed as PASS:
#  1. kiln checkpoint says every tensor reads back; the export holds GPT2LMHeadModel's tensors and config, and
#     its logits equal kiln's.
#  2. A llama (grouped-query attention, rope_theta 500000) trained on 2 stages exports as LlamaForCausalLM:
#     config.json holds its shape, and tests/cli/llama_numpy.py (Llama's forward in numpy from the config
#     alone) gives kiln's logits to 1e-4. Its model.max_positions (4096, against data.seq_len 64) is the export's
#     max_position_embeddings and comes back through kiln import (issue 65).
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
"$mpirun" -n 2 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work" --set data.dir="$data" \
  --set data.mix=licenses:1 --set data.tokenizer=bytes --set cluster.ranks_per_node=1 --set plan.pipelines=2 --set fault.f=0 \
  --set run.steps=3 >"$work/run.log" 2>&1 || { cat "$work/run.log"; echo "FAIL: training"; exit 1; }
ckpt="$work/tiny/ckpt/step-00000003.h5"
"$kiln" checkpoint "$ckpt" >"$work/checkpoint.txt" || { cat "$work/checkpoint.txt"; echo "FAIL: kiln checkpoint"; exit 1; }
grep -q "every tensor reads back and matches its checksum" "$work/checkpoint.txt" || { cat "$work/checkpoint.txt"; echo "FAIL: not verified"; exit 1; }
"$kiln" export "$ckpt" "$work/hf" >"$work/export.txt" || { cat "$work/export.txt"; echo "FAIL: kiln export"; exit 1; }
/usr/bin/python3 tests/cli/gpt2_numpy.py "$work/hf" 1e-4 || { echo "FAIL: the export does not load as GPT-2"; exit 1; }
echo "PASS 1: verified, exported, and loaded outside kiln with kiln's logits"

# 2. A llama with grouped-query attention, trained on 2 stages, exported as LlamaForCausalLM.
"$mpirun" -n 2 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work/llama" --set data.dir="$data" \
  --set data.mix=licenses:1 --set data.tokenizer=bytes --set cluster.ranks_per_node=1 --set plan.pipelines=2 --set fault.f=0 \
  --set run.steps=3 --set model.family=llama --set model.kv_heads=2 --set model.rope_theta=500000 \
  --set model.max_positions=4096 >"$work/llama.log" 2>&1 || { cat "$work/llama.log"; echo "FAIL: training the llama"; exit 1; }
"$kiln" export "$work/llama/tiny/ckpt/step-00000003.h5" "$work/hf-llama" >"$work/export-llama.txt" ||
  { cat "$work/export-llama.txt"; echo "FAIL: kiln export of the llama"; exit 1; }
grep -q "LlamaForCausalLM.from_pretrained" "$work/export-llama.txt" || { cat "$work/export-llama.txt"; echo "FAIL: the export does not say how to load it"; exit 1; }
python3 -c "import json, sys; c = json.load(open('$work/hf-llama/config.json')); sys.exit(0 if c['num_key_value_heads'] == 2 and c['rope_theta'] == 500000 and c['num_attention_heads'] == 4 and c['max_position_embeddings'] == 4096 else 1)" ||
  { cat "$work/hf-llama/config.json"; echo "FAIL: config.json does not hold the deck's llama shape"; exit 1; }
/usr/bin/python3 tests/cli/llama_numpy.py "$work/hf-llama" 1e-4 || { echo "FAIL: the export does not load as Llama"; exit 1; }
# Issue 65: the model's own context (4096 positions) survives a run at data.seq_len 64, the checkpoint, the export
# and kiln import of the export.
"$kiln" import "$work/hf-llama" >"$work/import-llama.txt" 2>&1 || { cat "$work/import-llama.txt"; echo "FAIL: kiln import of the export"; exit 1; }
grep -qx "max_positions = 4096" "$work/import-llama.txt" ||
  { cat "$work/import-llama.txt"; echo "FAIL: the export's context did not come back through kiln import"; exit 1; }
echo "PASS 2: a llama with grouped-query attention exported as LlamaForCausalLM, loaded outside kiln with kiln's logits"
echo "PASS 2b: the model's 4096 positions kept through a run at 64, its checkpoint, the export and kiln import"

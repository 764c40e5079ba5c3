#!/usr/bin/env bash
# Models made by Hugging Face transformers, started from in kiln (issue 38, item 4b; model.init_from): random
# LlamaForCausalLM and GPT2LMHeadModel saved with save_pretrained (tests/reference/hf_models.py) give in kiln
# the logits transformers gives, to 1e-4 relative. kiln runs one step at learning rate 0 (the weights as
# loaded), `kiln export` writes kiln's logits for two sequences, and tests/reference/hf_logits.py runs the
# original directory through transformers on those sequences.
# Pass criteria, each printed as PASS:
#  1. The llama (GQA, rope_theta 500000, saved in 7 shards with an index): `kiln import` prints its [model]
#     section; kiln started from it on 2+1 pipelines of 2-wide stages (each rank reads only its shards of
#     its layers) gives transformers' logits.
#  2. The gpt2 (head tied to the embedding, 128 positions for a 64-token run): the same on 1 rank.
#  3. Refused by name: a rotary scaling kiln does not compute (rope_type dynamic), a Qwen sliding its window on
#     some layers only (kiln import), and a deck whose model is not the directory's (kiln run names
#     model.kv_heads and num_key_value_heads).
#  4. Llama 3.1's rotary scaling (llama3, issue 53; its original context 64 positions, so that the head's
#     frequencies meet the kept, the blended and the divided regimes): kiln import prints the model.rope_* lines; started
#     from on 2+1 pipelines of 2-wide stages it gives transformers' logits, and its export loads in
#     transformers as LlamaForCausalLM with the same scaling and kiln's logits (both ways).
#  5. The same both ways, on 2+1 pipelines of 2-wide stages, for linear and YaRN scaling, a MistralForCausalLM without a window
#     (model_type mistral, v0.3's form: a Llama, exported as MistralForCausalLM by the model.hf_architecture
#     kiln import sets) and one with sliding_window 4 (v0.1's form, shorter than the reference sequences).
#  6. Qwen 2 (q/k/v biases) and Qwen 3 (q/k norms per head, head_dim 24 apart from hidden_size / heads = 16),
#     their biases and norm weights drawn at random: kiln import prints model.qkv_bias, model.qk_norm and
#     model.head_dim; started from on 2+1 pipelines of 2-wide stages, both ways, exported as Qwen2ForCausalLM
#     and Qwen3ForCausalLM.
#  7. Mixtures of experts (issue 54): a MixtralForCausalLM, a Qwen3MoeForCausalLM (norm_topk_prob, q/k norms
#     per head, head_dim 24) and an OlmoeForCausalLM (the softmax before top-k, q/k norms over the whole
#     projections), 8 experts of which 2 per token, their routers drawn at 0.3 so that routing is decisive:
#     kiln import prints model.experts and its keys; started from on 2+1 pipelines of 2-wide stages (4 experts
#     on each rank, each reading only its own experts' tensors), both ways, exported as the class they came
#     from, one tensor per expert. A Qwen 3 MoE with dense layers among its sparse ones (decoder_sparse_step
#     2) is refused by that field.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 python=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/../fault/lib.sh"
. "$(dirname "$0")/lib.sh"
frozen=(--set train.lr=0 --set train.min_lr=0 --set run.steps=1)
# The transformers checks are queued as the runs finish and run together at the end (one_way, both_ways); the PASS
# lines that quote them are said then (said), in order.
checks=() pass_lines=()
queue() { [ ${#checks[@]} -eq 0 ] || checks+=(--); checks+=("$@"); }
# NAME:ARCHITECTURE: transformers on the original directory gives the logits kiln computed from it.
one_way() {
  local name architecture
  IFS=: read -r name architecture <<<"$1"
  "$kiln" export "$work/$name/tiny/ckpt/step-00000001.h5" "$work/kiln-$name" >/dev/null
  queue "$work/hf/$name" "$architecture" 1e-4 "$work/kiln-$name/kiln_reference.json"
}
# Both ways: transformers on the original directory and on kiln's export give the logits kiln computed. Each
# NAME:ARCHITECTURE[:EXPORT_ARCHITECTURE] (the export's default LlamaForCausalLM): two checks.
both_ways() {
  local spec name architecture exported
  for spec in "$@"; do
    IFS=: read -r name architecture exported <<<"$spec"
    "$kiln" export "$work/$name/tiny/ckpt/step-00000001.h5" "$work/kiln-$name" >/dev/null
    queue "$work/hf/$name" "$architecture" 1e-4 "$work/kiln-$name/kiln_reference.json"
    queue "$work/kiln-$name" "${exported:-LlamaForCausalLM}" 1e-4
  done
}
check_line() { grep '^{' "$work/parity" | sed -n "${1}p"; }  # the Nth queued check's JSON line
said() { pass_lines+=("$1"); }  # a PASS line, expanded once the checks have run

"$kiln" import "$work/hf/llama" >"$work/import-llama.txt"
grep -q "kv_heads = 2" "$work/import-llama.txt" && grep -q "rope_theta = 500000" "$work/import-llama.txt" ||
  { cat "$work/import-llama.txt"; fail "kiln import does not give the llama's shape"; }
# shellcheck disable=SC2046
must llama 6 $(model_settings "$work/hf/llama") --set model.init_from="$work/hf/llama" "${frozen[@]}" \
  --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
grep -q "weights from .*hf/llama (Hugging Face LlamaForCausalLM)" "$work/llama.log" || { cat "$work/llama.log"; fail "the llama run does not say where its weights came from"; }
one_way llama:LlamaForCausalLM
said 'PASS 1: a transformers LlamaForCausalLM (GQA, 7 shards) started from on 2+1 pipelines of 2-wide stages: $(check_line 1)'

# shellcheck disable=SC2046
must gpt2 1 $(model_settings "$work/hf/gpt2") --set model.init_from="$work/hf/gpt2" "${frozen[@]}" \
  --set plan.pipelines= --set fault.f=0
one_way gpt2:GPT2LMHeadModel
said 'PASS 2: a transformers GPT2LMHeadModel with a tied head started from in kiln: $(check_line 2)'

if "$kiln" import "$work/hf/llama-scaled" >"$work/scaled.txt" 2>&1; then fail "a config with dynamic rope scaling was accepted"; fi
grep -q "llama-scaled/config.json: rope_scaling.rope_type = 'dynamic' .* kiln cannot start from this model" "$work/scaled.txt" ||
  { cat "$work/scaled.txt"; fail "rope_type dynamic not refused by name"; }
if "$kiln" import "$work/hf/qwen2-mixed" >"$work/sliding.txt" 2>&1; then fail "a Qwen sliding its window on some layers was accepted"; fi
grep -q "qwen2-mixed/config.json: use_sliding_window = true on 2 of 4 layers" "$work/sliding.txt" ||
  { cat "$work/sliding.txt"; fail "a window on some layers only is not refused by name"; }
# shellcheck disable=SC2046
if run "$work/mismatch" 1 $(model_settings "$work/hf/llama") --set model.kv_heads=4 --set model.init_from="$work/hf/llama" \
  "${frozen[@]}" --set plan.pipelines= --set fault.f=0 >"$work/mismatch.log" 2>&1; then
  fail "a deck with another model than the directory's was accepted"
fi
grep -q "model.kv_heads = 4 in the deck, num_key_value_heads = 2 in config.json" "$work/mismatch.log" ||
  { cat "$work/mismatch.log"; fail "the mismatch is not named"; }
echo "PASS 3: rope_scaling of type dynamic, a window on some layers only and a deck of another model are refused by name"

"$kiln" import "$work/hf/llama31" >"$work/import-llama31.txt"
grep -q "rope_scaling = llama3" "$work/import-llama31.txt" && grep -q "rope_original_context = 64" "$work/import-llama31.txt" ||
  { cat "$work/import-llama31.txt"; fail "kiln import does not give Llama 3.1's rotary scaling"; }
# shellcheck disable=SC2046
must llama31 6 $(model_settings "$work/hf/llama31") --set model.init_from="$work/hf/llama31" "${frozen[@]}" \
  --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
both_ways llama31:LlamaForCausalLM
python3 -c "
import json, sys
c = json.load(open('$work/kiln-llama31/config.json'))
r = c.get('rope_scaling') or {}
sys.exit(0 if r.get('rope_type') == 'llama3' and r.get('factor') == 8 and r.get('original_max_position_embeddings') == 64 else 1)" ||
  fail "the export's config.json does not carry the llama3 scaling"
said 'PASS 4: Llama 3.1'"'"'s rotary scaling on 2+1 pipelines of 2-wide stages, both ways: $(check_line 3); exported: $(check_line 4)'

"$kiln" import "$work/hf/mistral-window" | grep -q "^sliding_window = 4" || fail "kiln import does not give the window"
for name in llama-linear llama-yarn mistral mistral-window; do
  # shellcheck disable=SC2046
  must "$name" 6 $(model_settings "$work/hf/$name") --set model.init_from="$work/hf/$name" "${frozen[@]}" \
    --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
done
both_ways llama-linear:LlamaForCausalLM llama-yarn:LlamaForCausalLM mistral:MistralForCausalLM:MistralForCausalLM \
  mistral-window:MistralForCausalLM:MistralForCausalLM
said 'PASS 5: linear and YaRN scaling and a MistralForCausalLM with and without a sliding window, both ways: $(check_line 11)'

"$kiln" import "$work/hf/qwen2" | grep -q "^qkv_bias = true" || fail "kiln import does not give Qwen 2's biases"
"$kiln" import "$work/hf/qwen3" >"$work/import-qwen3.txt"
grep -q "^qk_norm = true" "$work/import-qwen3.txt" && grep -q "^head_dim = 24" "$work/import-qwen3.txt" ||
  { cat "$work/import-qwen3.txt"; fail "kiln import does not give Qwen 3's norms and head_dim"; }
for name in qwen2 qwen3; do
  # shellcheck disable=SC2046
  must "$name" 6 $(model_settings "$work/hf/$name") --set model.init_from="$work/hf/$name" "${frozen[@]}" \
    --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
done
both_ways qwen2:Qwen2ForCausalLM:Qwen2ForCausalLM qwen3:Qwen3ForCausalLM:Qwen3ForCausalLM
said 'PASS 6: Qwen 2 (q/k/v biases) and Qwen 3 (q/k norms, head_dim 24) on 2+1 pipelines of 2-wide stages, both ways: $(check_line 15); exported: $(check_line 16)'
"$kiln" import "$work/hf/olmoe" >"$work/import-olmoe.txt"
grep -q "^experts = 8" "$work/import-olmoe.txt" && grep -q "^experts_per_token = 2" "$work/import-olmoe.txt" &&
  grep -q "^router_softmax = before_topk" "$work/import-olmoe.txt" && grep -q "^qk_norm_over = projection" "$work/import-olmoe.txt" ||
  { cat "$work/import-olmoe.txt"; fail "kiln import does not give OLMoE's experts and norms"; }
for name in mixtral qwen3-moe olmoe; do
  # shellcheck disable=SC2046
  must "$name" 6 $(model_settings "$work/hf/$name") --set model.init_from="$work/hf/$name" "${frozen[@]}" \
    --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
done
both_ways mixtral:MixtralForCausalLM:MixtralForCausalLM qwen3-moe:Qwen3MoeForCausalLM:Qwen3MoeForCausalLM \
  olmoe:OlmoeForCausalLM:OlmoeForCausalLM
"$python" -c "
import json, sys
from safetensors import safe_open
names = set(safe_open('$work/kiln-mixtral/model.safetensors', 'np').keys())
sys.exit(0 if 'model.layers.3.block_sparse_moe.experts.7.w2.weight' in names else 1)" ||
  fail "the Mixtral export does not hold one tensor per expert under transformers' names"
cp -r "$work/hf/qwen3-moe" "$work/hf/qwen3-moe-dense"
python3 -c "
import json, sys
path = sys.argv[1] + '/config.json'
config = json.load(open(path))
config['decoder_sparse_step'] = 2
json.dump(config, open(path, 'w'))" "$work/hf/qwen3-moe-dense"
if "$kiln" import "$work/hf/qwen3-moe-dense" >"$work/dense.txt" 2>&1; then fail "a Qwen 3 MoE with dense layers was accepted"; fi
grep -q "decoder_sparse_step = 2 (kiln's experts are in every block)" "$work/dense.txt" ||
  { cat "$work/dense.txt"; fail "decoder_sparse_step is not refused by name"; }
said 'PASS 7: Mixtral, Qwen 3 MoE and OLMoE on 2+1 pipelines of 2-wide stages (experts spread over each stage'"'"'s ranks), both ways: $(check_line 17); $(check_line 19); $(check_line 21)'
# Every check in one transformers process (importing torch and transformers costs about 5 CPU-s a process):
# $work/parity holds a JSON line and a PASS or FAIL line per check, in the order they were queued.
"$python" "$here/hf_logits.py" "${checks[@]}" >"$work/parity" 2>"$work/parity.stderr" ||
  { cat "$work/parity" "$work/parity.stderr"; fail "transformers does not give kiln's logits (the FAIL lines above)"; }
[ "$(grep -c '^{' "$work/parity")" = 22 ] || { cat "$work/parity"; fail "transformers ran $(grep -c '^{' "$work/parity") checks, not 22"; }
for line in "${pass_lines[@]}"; do eval "echo \"$line\""; done

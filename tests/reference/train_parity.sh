#!/usr/bin/env bash
# Training parity with plain PyTorch (issue 38, item 4c): a random LlamaForCausalLM made by transformers
# (tests/reference/hf_models.py: GQA, SwiGLU, rope_theta 500000) is trained for 30 steps by kiln, on 1 rank and
# on 2+1 pipelines of 2-wide stages, and by tests/reference/train_parity.py in PyTorch (torch.optim.AdamW) on the
# batches kiln trained on (`kiln data --dump`), with the settings of kiln's deck.resolved.ini: warm-up and
# cosine schedule, weight decay, clipping at 1.0 (which binds in the first steps).
# Pass criteria, each printed as PASS:
#  1. `kiln data --dump` writes the 30 global batches, and they are those of any rank count (dumped on 3 ranks too).
#  2. Every step's loss and gradient norm of both kiln runs are within 1e-4 (relative) of PyTorch's, in fp32
#     (the norm: or 3 times how far PyTorch's own norm moves when its weights move by 1e-7 after every step,
#     where that is more: the steps of a loss spike; train_parity.py measures it).
#  3. The same for the llama with its head tied to the embedding (one parameter in PyTorch; in kiln a copy on
#     the first and on the last stage, whose gradients the tied sum adds): on 1 rank, and on 2+1 pipelines of
#     2-wide stages (the 2-stage pipeline's first and last stages sum across stages, the 1-stage pipeline's
#     ranks hold both copies). Its export has tie_word_embeddings = true, no lm_head.weight, and kiln's two
#     copies equal bit for bit after 30 steps; transformers loads it and gives kiln's logits.
#  4. Llama 3.1's rotary scaling (issue 53: rope_type llama3, factor 8, original context 64, so that every
#     regime of the rule is met): 30 steps on 2+1 pipelines of 2-wide stages agree with PyTorch the same way.
#  5. Qwen 3 (q/k RMSNorm per head, head_dim 24 apart from hidden_size / heads): the same. On a 2-wide stage
#     each rank holds the norms whole and its heads give part of their gradient: the stage sums the parts.
#  6. Mixtures of experts (issue 54), the routers' losses included (model.router_aux_loss 0.01, the default, and
#     model.router_z_loss 0.001, written out in train_parity.py): a Mixtral (softmax after top-k) and an OLMoE
#     (softmax before top-k, q/k norms over the projections), 8 experts of which 2 per token, 30 steps on 2+1
#     pipelines of 2-wide stages (4 experts on each rank), agree with PyTorch the same way.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 python=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/../fault/lib.sh"
. "$(dirname "$0")/lib.sh"
steps=30
trained=(--set model.init_from="$work/hf/llama" --set run.steps=$steps --set train.grad_clip=1)
data_settings=(--set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes)
# The PyTorch side of every check runs in one Python at the end (train_parity.py --jobs): a process costs 5-6 CPU-s
# of imports. parity NAME HF_DIR DECK LOSSES...: a check, its output in $work/NAME.log; parity_passed NAME WHAT.
: >"$work/parity.jobs"
parity() {
  local name=$1 hf=$2 deck=$3
  shift 3
  echo "$work/$name.log $hf $work/batches.npy $deck 1e-4 $*" >>"$work/parity.jobs"
}
parity_passed() {
  [ "$(cat "$work/$1.log.status" 2>/dev/null)" = 0 ] || { cat "$work/$1.log" "$work/parity-jobs.log" 2>/dev/null || true; fail "$2"; }
}

"$kiln" data input/tiny-cpu.ini "${data_settings[@]}" --steps $steps --show 0 --dump "$work/batches.npy" >"$work/data.log" 2>&1 ||
  { cat "$work/data.log"; fail "kiln data --dump"; }
"$mpirun" -n 3 --oversubscribe "$kiln" data input/tiny-cpu.ini "${data_settings[@]}" --steps $steps --show 0 \
  --dump "$work/batches-3.npy" >"$work/data-3.log" 2>&1 || { cat "$work/data-3.log"; fail "kiln data --dump on 3 ranks"; }
cmp -s "$work/batches.npy" "$work/batches-3.npy" || fail "the batches dumped on 1 and 3 ranks differ"
"$python" -c "import numpy, sys; b = numpy.load(sys.argv[1]); assert b.shape == ($steps, 16, 65) and b.dtype == numpy.uint32, b.shape" \
  "$work/batches.npy" || fail "the dump is not a uint32 array of 30 x 16 x 65"
echo "PASS 1: kiln data --dump wrote $steps batches of 16 x 65 tokens, the same on 1 and 3 ranks"

# shellcheck disable=SC2046
must one 1 $(model_settings "$work/hf/llama") "${trained[@]}" --set plan.pipelines= --set fault.f=0
# shellcheck disable=SC2046
must wide 6 $(model_settings "$work/hf/llama") "${trained[@]}" \
  --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
losses one
losses wide
parity parity "$work/hf/llama" "$work/one/tiny/deck.resolved.ini" "$work/one.losses" "$work/wide.losses"

tied_trained=(--set model.init_from="$work/hf/llama-tied" --set run.steps=$steps --set train.grad_clip=1)
"$kiln" import "$work/hf/llama-tied" | grep -q "^tie_embeddings = true" || fail "kiln import does not keep the tie"
# shellcheck disable=SC2046
must tied-one 1 $(model_settings "$work/hf/llama-tied") "${tied_trained[@]}" --set plan.pipelines= --set fault.f=0
# shellcheck disable=SC2046
must tied-wide 6 $(model_settings "$work/hf/llama-tied") "${tied_trained[@]}" \
  --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
grep -q "tied embeddings" "$work/tied-wide.log" || { cat "$work/tied-wide.log"; fail "the tied run does not say it is tied"; }
losses tied-one
losses tied-wide
parity tied "$work/hf/llama-tied" "$work/tied-one/tiny/deck.resolved.ini" "$work/tied-one.losses" "$work/tied-wide.losses"
"$kiln" export "$work/tied-wide/tiny/ckpt/step-$(printf %08d $steps).h5" "$work/kiln-tied" >"$work/export-tied.log" 2>&1 ||
  { cat "$work/export-tied.log"; fail "kiln export of the tied run"; }
grep -q "the last stage's copy equals it bit for bit" "$work/export-tied.log" ||
  { cat "$work/export-tied.log"; fail "the tied copies are not equal after $steps steps"; }
"$python" - "$work/kiln-tied" <<'PY' || fail "the tied export is not a tied LlamaForCausalLM"
import json, sys
from safetensors import safe_open
config = json.load(open(f"{sys.argv[1]}/config.json"))
assert config["tie_word_embeddings"] is True, config
names = set(safe_open(f"{sys.argv[1]}/model.safetensors", "pt").keys())
assert "lm_head.weight" not in names and "model.embed_tokens.weight" in names, sorted(names)
PY
"$python" "$here/hf_logits.py" "$work/kiln-tied" LlamaForCausalLM 1e-4 >"$work/tied.parity" 2>"$work/tied.stderr" ||
  { cat "$work/tied.parity" "$work/tied.stderr"; fail "transformers does not give the tied export's logits"; }

# shellcheck disable=SC2046
must llama31-wide 6 $(model_settings "$work/hf/llama31") --set model.init_from="$work/hf/llama31" --set run.steps=$steps \
  --set train.grad_clip=1 --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
grep -q "llama3 factor 8" "$work/llama31-wide.log" || { cat "$work/llama31-wide.log"; fail "the run does not say its rotary scaling"; }
losses llama31-wide
parity llama31 "$work/hf/llama31" "$work/llama31-wide/tiny/deck.resolved.ini" "$work/llama31-wide.losses"

# shellcheck disable=SC2046
must qwen3-wide 6 $(model_settings "$work/hf/qwen3") --set model.init_from="$work/hf/qwen3" --set run.steps=$steps \
  --set train.grad_clip=1 --set cluster.ranks_per_node=2 --set plan.stage_width=2 --set plan.pipelines=2+1 --set fault.f=1
losses qwen3-wide
parity qwen3 "$work/hf/qwen3" "$work/qwen3-wide/tiny/deck.resolved.ini" "$work/qwen3-wide.losses"

for name in mixtral olmoe; do
  # shellcheck disable=SC2046
  must "$name-wide" 6 $(model_settings "$work/hf/$name") --set model.init_from="$work/hf/$name" --set run.steps=$steps \
    --set train.grad_clip=1 --set model.router_z_loss=0.001 --set cluster.ranks_per_node=2 --set plan.stage_width=2 \
    --set plan.pipelines=2+1 --set fault.f=1
  grep -q "balance [0-9.]*  z [0-9.]*" "$work/$name-wide.log" || { cat "$work/$name-wide.log"; fail "$name: the log has no router losses"; }
  losses "$name-wide"
  parity "$name" "$work/hf/$name" "$work/$name-wide/tiny/deck.resolved.ini" "$work/$name-wide.losses"
done

"$python" "$here/train_parity.py" --jobs "$work/parity.jobs" >"$work/parity-jobs.log" 2>&1 || true
parity_passed parity "training parity"
echo "PASS 2: 30 steps of kiln (1 rank; 2+1 pipelines of 2-wide stages) and PyTorch agree: $(tail -1 "$work/parity.log")"
parity_passed tied "tied training parity"
echo "PASS 3: the tied llama, 30 steps on 1 rank and on 2+1 pipelines of 2-wide stages, agrees with PyTorch: $(tail -1 "$work/tied.log"); exported tied, copies equal, in transformers: $(head -1 "$work/tied.parity")"
parity_passed llama31 "Llama 3.1 training parity"
echo "PASS 4: Llama 3.1's rotary scaling, 30 steps on 2+1 pipelines of 2-wide stages, agrees with PyTorch: $(tail -1 "$work/llama31.log")"
parity_passed qwen3 "Qwen 3 training parity"
echo "PASS 5: Qwen 3's q/k norms and head_dim, 30 steps on 2+1 pipelines of 2-wide stages, agree with PyTorch: $(tail -1 "$work/qwen3.log")"
for name in mixtral olmoe; do parity_passed "$name" "$name training parity"; done
echo "PASS 6: Mixtral and OLMoE with their routers' losses, 30 steps on 2+1 pipelines of 2-wide stages, agree with PyTorch: $(tail -1 "$work/mixtral.log"); $(tail -1 "$work/olmoe.log")"

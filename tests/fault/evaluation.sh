#!/usr/bin/env bash
# Held-out validation (issue 38, item 5): data.eval_mix names a source the run never trains on (the licence
# texts cut into paragraphs), evaluated after steps 5 and 10 (train.eval_every = 5, 2 global batches each).
# Pass criteria, each printed as PASS:
#  1. On 6 ranks as 2+1 pipelines, diag.h5 holds both evaluations (/eval: `kiln diag --eval`, --json, the text
#     summary) and the log says each; the held-out loss falls; the training losses are those of a run without
#     evaluation (an evaluation takes no step and changes nothing).
#  2. The same held-out losses, to 1e-6 relative, on 1 rank and on 3 pipelines of 1 node (1+1+1): the same
#     tokens are evaluated whatever the layout.
#  3. A rank killed during the evaluation after step 5: the run recovers, redoes it on the new layout, and
#     finishes with the failure-free held-out and training losses; /failures names the rank.
#  4. Refused by key: train.eval_every without data.eval_mix, and a held-out source that data.mix trains on.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work/data"
. "$(dirname "$0")/lib.sh"
ln -s "$(cd "$data/licenses" && pwd)" "$work/data/licenses"
"$kiln" prep --source heldout --input /usr/share/common-licenses --format blocks --out "$work/data" --quiet >"$work/prep.log" 2>&1 ||
  { cat "$work/prep.log"; fail "kiln prep of the held-out source"; }
data=$work/data
evaluated=(--set data.eval_mix=heldout:1 --set train.eval_every=5 --set train.eval_batches=2)
evals() { "$kiln" diag "$work/$1/tiny/diag.h5" --eval >"$work/$1.eval"; }
same_eval() {  # reference candidate: the same steps and losses to 1e-6 relative
  paste "$work/$1.eval" "$work/$2.eval" | awk '{ n++; d = $2 - $5; if (d < 0) d = -d; if ($1 != $4 || d > 1e-6 * $2) bad++ }
    END { if (n != 2 || bad) exit 1 }' || { paste "$work/$1.eval" "$work/$2.eval"; fail "$2: held-out losses differ from $1's"; }
}

must plain 6 --set plan.pipelines=2+1
must eval 6 --set plan.pipelines=2+1 "${evaluated[@]}"
losses plain
losses eval
same_curve "$work/plain.losses" "$work/eval.losses" 10 || fail "an evaluation changed the training losses"
evals eval
[ "$(awk '{ print $1 }' "$work/eval.eval" | tr '\n' ' ')" = "5 10 " ] || { cat "$work/eval.eval"; fail "not evaluated after steps 5 and 10"; }
awk 'NR == 1 { first = $2 } NR == 2 { if (!($2 < first)) exit 1 }' "$work/eval.eval" || { cat "$work/eval.eval"; fail "the held-out loss does not fall"; }
grep -q "eval after step 5: held-out loss" "$work/eval.log" || fail "the log does not say the evaluation"
json eval | python3 -c "import json, sys; e = json.load(sys.stdin)['eval']; assert [r['step'] for r in e] == [5, 10] and e[0]['tokens'] == 2 * 16 * 64, e" ||
  fail "diag --json has not the evaluations"
"$kiln" diag "$work/eval/tiny/diag.h5" | grep -q "held-out loss (2048 tokens each; best" || fail "the text summary has no held-out loss"
echo "PASS 1: evaluated after steps 5 and 10 on 2+1 pipelines: $(tr '\n' ' ' <"$work/eval.eval"); training losses unchanged"

must one 1 --set plan.pipelines= --set fault.f=0 "${evaluated[@]}"
must three 6 --set plan.pipelines=1+1+1 "${evaluated[@]}"
evals one
evals three
same_eval eval one
same_eval eval three
echo "PASS 2: the same held-out losses on 1 rank and on 1+1+1 pipelines"

must killed 6 --set plan.pipelines=2+1 "${evaluated[@]}" --set fault.inject=3:4:eval
losses killed
evals killed
same_curve "$work/plain.losses" "$work/killed.losses" 10 || fail "training losses changed by the failure"
same_eval eval killed
json killed | python3 -c "import json, sys; f = json.load(sys.stdin)['failures']; assert len(f) == 1 and f[0]['failed_ranks'] == '3', f" ||
  fail "/failures does not name rank 3 alone"
grep -q "eval after step 5: held-out loss" "$work/killed.log" || fail "the evaluation was not redone"
echo "PASS 3: rank 3 killed during the evaluation after step 5: recovered, evaluated again, the failure-free losses"

if run "$work/noeval" 1 --set plan.pipelines= --set fault.f=0 --set train.eval_every=5 >"$work/noeval.log" 2>&1; then
  fail "train.eval_every without data.eval_mix was accepted"
fi
grep -q "train.eval_every = 5 (--set) but data.eval_mix names no held-out sources" "$work/noeval.log" || { cat "$work/noeval.log"; fail "not named"; }
if run "$work/overlap" 1 --set plan.pipelines= --set fault.f=0 --set data.eval_mix=licenses:1 >"$work/overlap.log" 2>&1; then
  fail "a held-out source that is trained on was accepted"
fi
grep -q "data.eval_mix (--set): source 'licenses' is also in data.mix" "$work/overlap.log" || { cat "$work/overlap.log"; fail "not named"; }
echo "PASS 4: train.eval_every without data.eval_mix, and a trained source held out, are refused by key"

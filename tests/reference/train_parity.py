#!/usr/bin/env python3
"""Training parity (issue 38, item 4c): the model a kiln run started from (a Hugging Face directory), trained
in plain PyTorch on the batches kiln trained on (`kiln data DECK --dump`), with kiln's AdamW settings read from
the run's deck.resolved.ini; every step's loss and gradient norm compared with each kiln run's
(`kiln diag --losses`).

What kiln does, written out here in PyTorch terms: the loss is the mean cross entropy over every target token
of the global batch; the gradient norm is the global L2 norm before clipping, and gradients are scaled by
grad_clip / (norm + 1e-6) when the norm exceeds grad_clip; the learning rate warms up linearly
(lr * (step + 1) / warmup_steps) and then follows a cosine to min_lr over decay_steps (0: the rest of the run);
AdamW decays matrices and embeddings, not norms. torch.optim.AdamW is the optimiser, with one parameter group
for the decayed tensors and one for the others. A mixture of experts adds its routers' losses (model.router_aux_loss
and model.router_z_loss, written out here from the router scores transformers returns): per block, the
balance loss E sum_e f_e P_e of each sequence (f_e the share of its k T choices that went to expert e, P_e
expert e's mean probability) averaged over the sequences, and the squared log-sum-exp of each token's scores
averaged over the tokens; both summed over the blocks.

    python train_parity.py HF_DIR BATCHES.npy DECK_RESOLVED.ini TOLERANCE KILN_LOSSES [KILN_LOSSES ...]
    python train_parity.py --jobs FILE

With --jobs, one process makes every check of FILE (a line each: LOG and then the arguments above), each
check's output in its LOG and its exit status in LOG.status, since importing torch and transformers costs
5-6 CPU-s a process; it exits 0 when every check did.

Prints one line per step, then a JSON summary; exit 0 when every run's every step's loss is within TOLERANCE
(relative) of PyTorch's, and its gradient norm within TOLERANCE or, where PyTorch's own norm is ill-conditioned,
3 times how far it moves when PyTorch's weights move by 1e-7 after every step (measured by a second PyTorch run,
made only when some norm is off by more than TOLERANCE).
"""
import configparser
import contextlib
import json
import math
import sys
import traceback

import numpy
import torch
from transformers import AutoModelForCausalLM


def learning_rate(train, steps, step):
    lr, min_lr = float(train["lr"]), float(train["min_lr"])
    warmup, decay = int(train["warmup_steps"]), int(train["decay_steps"])
    if step < warmup:
        return lr * (step + 1) / warmup
    if decay == 0:
        decay = steps - warmup if steps > warmup else 1
    progress = min(1.0, (step - warmup) / decay)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def kiln_curve(path):
    rows = [line.split() for line in open(path) if line.strip()]
    return {int(r[0]): (float(r[1]), float(r[2])) for r in rows}


def run_jobs(path):
    worst = 0
    for line in open(path):
        if not line.strip():
            continue
        log, *args = line.split()
        with open(log, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                status = main(args)
            except Exception:
                traceback.print_exc()
                status = 1
        with open(log + ".status", "w") as out:
            out.write(f"{status}\n")
        worst = max(worst, status)
    return worst


def main(args):
    directory, batches_path, deck_path, tolerance = args[0], args[1], args[2], float(args[3])
    curves = {path: kiln_curve(path) for path in args[4:]}
    deck = configparser.ConfigParser(inline_comment_prefixes=("#",))
    deck.read(deck_path)
    train = deck["train"]
    if train["precision"] != "fp32":
        print(f"FAIL: {deck_path}: train.precision = {train['precision']}; parity is checked in fp32")
        return 1
    batches = torch.from_numpy(numpy.load(batches_path).astype(numpy.int64))
    steps = batches.shape[0]
    torch.set_num_threads(1)
    model_deck = deck["model"] if deck.has_section("model") else {}
    reference = pytorch_curve(directory, batches, train, int(deck["run"]["steps"]), model_deck=model_deck)
    # How far PyTorch's own gradient norm moves when its weights move by 1e-7 (relative, random) after every
    # step, as fp32 rounding in another summation order moves them: at a step where the loss spikes the norm
    # of some models (a tied embedding's) is ill-conditioned, and no fp32 computation in another summation
    # order can be held closer than that. (Moving the initial weights alone underestimated it: AdamW's first
    # steps damp such a move, while kiln's 2-wide stages round differently at every step.) The norm's
    # tolerance at each step is the larger of TOLERANCE and 3 times that movement; the loss's is TOLERANCE.
    # That second run is needed only where some run's norm is off by more than TOLERANCE.
    def within(path, step):
        return step in curves[path] and abs(curves[path][step][1] - reference[step][1]) / reference[step][1] <= tolerance

    if all(within(path, step) for path in curves for step in range(len(reference))):
        norm_tolerance = [tolerance] * len(reference)
    else:
        moved = pytorch_curve(directory, batches, train, int(deck["run"]["steps"]), perturbation=1e-7, model_deck=model_deck)
        norm_tolerance = [max(tolerance, 3 * abs(m[1] - r[1]) / r[1]) for r, m in zip(reference, moved)]
    worst = {path: 0.0 for path in curves}
    bad_norm = {path: [] for path in curves}
    for step, (loss, norm) in enumerate(reference):
        line = f"step {step:3d}  pytorch loss {loss:.7f} |g| {norm:.6f} (norm tolerance {norm_tolerance[step]:.1e})"
        for path, curve in curves.items():
            if step not in curve:
                print(f"FAIL: {path} has no step {step}")
                return 1
            kiln_loss, kiln_norm = curve[step]
            worst[path] = max(worst[path], abs(kiln_loss - loss) / abs(loss))
            if abs(kiln_norm - norm) / norm > norm_tolerance[step]:
                bad_norm[path].append(step)
            line += f"  | kiln {kiln_loss:.7f} |g| {kiln_norm:.6f}"
        print(line)
    summary = {"steps": len(reference), "tolerance": tolerance, "max_norm_tolerance": max(norm_tolerance),
               "steps_norm_tolerance_above_tolerance": sum(t > tolerance for t in norm_tolerance),
               "runs": [{"losses": path, "max_relative_loss_difference": worst[path],
                         "max_relative_grad_norm_difference": max(abs(curve[s][1] - n) / n for s, (_, n) in enumerate(reference)),
                         "steps_norm_beyond_tolerance": bad_norm[path]} for path, curve in curves.items()]}
    print(json.dumps(summary))
    bad = [path for path in curves if worst[path] > tolerance or bad_norm[path]]
    if bad:
        print(f"FAIL: beyond the tolerances: {', '.join(bad)}")
        return 1
    return 0


def router_losses(router_logits, sequences, k, aux, z):
    """kiln's router losses (model.router_aux_loss, model.router_z_loss) from each block's (B T, E) scores."""
    total = 0.0
    for scores in router_logits:
        scores = scores.float()
        E = scores.shape[-1]
        T = scores.shape[0] // sequences
        probabilities = torch.softmax(scores, -1)
        chosen = probabilities.topk(k, -1).indices.view(sequences, T * k)
        counts = torch.zeros(sequences, E).scatter_add_(1, chosen, torch.ones(sequences, T * k))
        balance = E * (counts / (k * T) * probabilities.view(sequences, T, E).mean(1)).sum(-1)
        total = total + aux * balance.mean() + z * (torch.logsumexp(scores, -1) ** 2).mean()
    return total


def pytorch_curve(directory, batches, train, run_steps, perturbation=0.0, model_deck=None):
    """Every step's loss and gradient norm (before clipping) of the model trained in plain PyTorch."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    model.train()
    noise = torch.Generator().manual_seed(1)

    def perturb():
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + perturbation * torch.randn(p.shape, generator=noise))

    if perturbation:
        perturb()
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimiser = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": float(train["weight_decay"])}, {"params": others, "weight_decay": 0.0}],
        lr=0.0, betas=(float(train["beta1"]), float(train["beta2"])), eps=float(train["eps"]))
    clip = float(train["grad_clip"])
    experts = getattr(model.config, "num_experts_per_tok", 0)
    aux, z = float(model_deck.get("router_aux_loss", 0.01)), float(model_deck.get("router_z_loss", 0.0))
    curve = []
    for step in range(batches.shape[0]):
        tokens = batches[step]
        if experts:
            out = model(input_ids=tokens[:, :-1], output_router_logits=True)
        else:
            out = model(input_ids=tokens[:, :-1])
        logits = out.logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        objective = loss
        if experts:
            objective = loss + router_losses(out.router_logits, tokens.shape[0], experts, aux, z)
        optimiser.zero_grad(set_to_none=False)
        objective.backward()
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())).item()
        if clip > 0 and norm > clip:
            for p in model.parameters():
                p.grad.mul_(clip / (norm + 1e-6))
        for group in optimiser.param_groups:
            group["lr"] = learning_rate(train, run_steps, step)
        optimiser.step()
        if perturbation:
            perturb()
        curve.append((loss.item(), norm))
    return curve


if __name__ == "__main__":
    sys.exit(run_jobs(sys.argv[2]) if sys.argv[1] == "--jobs" else main(sys.argv[1:]))

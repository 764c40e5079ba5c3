#!/usr/bin/env python3
"""Loads a `kiln export` directory with Hugging Face transformers, as a user would (AutoModelForCausalLM,
float32), checks the architecture it loads as, runs kiln_reference.json's token sequences through it and
compares the logits with kiln's own. Exit 0 when the largest difference is within TOLERANCE of the largest
logit (relative).

    python hf_logits.py MODEL_DIR ARCHITECTURE TOLERANCE [REFERENCE_JSON] [-- MODEL_DIR ARCHITECTURE ...]

REFERENCE_JSON (default MODEL_DIR/kiln_reference.json) may come from another directory: the export of a kiln
run that started from MODEL_DIR, to check that kiln computes what transformers does with the same weights.
Several checks separated by -- run in one process (importing torch and transformers takes 2 s a process), a
JSON line and a PASS or FAIL line each, in order; the exit status is 1 if any fails.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    groups, group = [], []
    for arg in sys.argv[1:]:
        if arg == "--":
            groups.append(group)
            group = []
        else:
            group.append(arg)
    groups.append(group)
    return max(check(*g) for g in groups)


def check(directory, architecture, tolerance, reference_path=None):
    tolerance = float(tolerance)
    reference_path = reference_path or f"{directory}/kiln_reference.json"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    model.eval()
    loaded = type(model).__name__
    if loaded != architecture:
        print(f"FAIL: {directory} loads as {loaded}, not {architecture}")
        return 1
    reference = json.load(open(reference_path))
    worst, largest = 0.0, 0.0
    with torch.no_grad():
        for ids, kiln_logits in zip(reference["tokens"], reference["logits"]):
            ours = model(torch.tensor([ids])).logits[0]
            if reference["positions"] == "last":
                ours = ours[-1:]
            kiln = torch.tensor(kiln_logits, dtype=torch.float32)
            worst = max(worst, (ours - kiln).abs().max().item())
            largest = max(largest, kiln.abs().max().item())
    relative = worst / largest
    print(json.dumps({"architecture": loaded, "sequences": len(reference["tokens"]), "max_abs_difference": worst,
                      "largest_logit": largest, "relative": relative, "tolerance": tolerance}))
    if relative > tolerance:
        print(f"FAIL: transformers' logits differ from kiln's by {relative:.3g} relative (tolerance {tolerance})")
        return 1
    print(f"PASS: transformers loads the export as {loaded} and gives kiln's logits ({relative:.2g} relative)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

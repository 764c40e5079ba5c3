"""What the numpy checks of a `kiln export` share: safetensors parsed by hand, and the comparison of a
forward's logits with kiln_reference.json (the sequences and logits kiln wrote beside the export)."""
import json
import struct

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"]).astype(np.float64)
    return tensors


def compare_with_kiln(directory, forward, weights, config, tolerance, what):
    """Runs forward(weights, config, ids) on kiln's sequences; 0 when every logit is within the tolerance."""
    reference = json.load(open(f"{directory}/kiln_reference.json"))
    worst = 0.0
    for ids, kiln_logits in zip(reference["tokens"], reference["logits"]):
        ours = forward(weights, config, ids)
        if reference["positions"] == "last":
            ours = ours[-1:]
        worst = max(worst, float(np.abs(ours - np.array(kiln_logits)).max()))
    print(json.dumps({"sequences": len(reference["tokens"]), "max_abs_logit_difference": worst, "tolerance": tolerance}))
    if worst > tolerance:
        print(f"FAIL: logits differ by {worst} (tolerance {tolerance})")
        return 1
    print(f"PASS: the export loads as {what} and gives kiln's logits")
    return 0

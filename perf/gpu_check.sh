#!/usr/bin/env bash
# The GPU check of issue 13, one script for one H200 (about 5 minutes).
# Prepared here by perf/gpu_pack.sh (kiln built against the machine's
# libtorch, gathered in .gpu/ with the libraries it needs); run there from the
# checkout, with .gpu carried:
#
#   perf/gpu_check.sh [STEPS]        results in $OUT (or /tmp/gpu-check)
#
# 1. Correctness: the demo-sized model for 8 steps in fp32 by kiln on the CPU
#    and on the GPU of the same machine, same data: losses compared step by
#    step (GPU kernels sum in other orders: agreement to 1e-3 relative).
# 2. Speed: input/h200-gpt-350m.ini (24 blocks, d_model 1024, 16 heads,
#    vocabulary 50304, sequence 2048, global batch 8, bf16) by kiln, then the
#    same model and step by PyTorch eager and torch.compile
#    (perf/pytorch_gpt.py), in this one run: tokens/s and MFU of each, and
#    kiln's ratio to each. One JSON line per measurement, a summary at the end.
#    kiln's memory line: the GPU allocator's peak against the planned stage.
# 3. Recovery with the model on the GPU: 3 ranks share the one GPU (NCCL needs
#    a GPU per rank, so kiln's transport is MPI through host memory there),
#    pipelines 2+1, f = 1; rank 1 killed in step 4's backward, the survivors
#    regroup and migrate layers out of GPU memory; losses step by step against
#    the same run without a failure (which sums after backward, the killed one
#    layer by layer inside it). (NCCL across ranks needs 2 GPUs: not here.)
set -uo pipefail
steps=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
pack=$root/.gpu
out=${OUT:-/tmp/gpu-check}
work=/tmp/kiln-gpu-check
mkdir -p "$out" "$work"
log() { echo "[gpu_check] $*" | tee -a "$out/gpu_check.log"; }
[ -x "$pack/bin/kiln" ] || { log "no .gpu/bin/kiln: run perf/gpu_pack.sh on the build machine and carry .gpu"; exit 1; }
python=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$out/gpu_check.log"
torch_lib=$("$python" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
torch_version=$("$python" -c 'import torch; print(torch.__version__.split("+")[0])')
[ "$torch_version" = "$(cat "$pack/torch-version")" ] \
  || log "WARNING: kiln was built against libtorch $(cat "$pack/torch-version"), this machine has $torch_version"
# The wheels' CUDA libraries (cuBLAS, cuDNN, NCCL...) sit in nvidia/*/lib beside torch.
nvidia_libs=$("$python" - <<'EOF'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join(sorted({os.path.dirname(p) for p in glob.glob(os.path.join(site, "nvidia", "**", "lib*.so*"), recursive=True)})))
EOF
)
# Only kiln and its mpirun see the carried libraries: Python keeps the machine's own.
with_pack() {
  OPAL_PREFIX=$pack/ompi PATH=$pack/ompi/bin:$PATH \
  LD_LIBRARY_PATH=$pack/lib:$pack/ompi/lib:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$@"
}
kiln() { with_pack "$pack/bin/kiln" "$@"; }
kiln version 2>&1 | tee -a "$out/gpu_check.log" || { log "kiln does not start here"; exit 1; }

# Data: 8 MB of synthetic text, byte tokens (the 350M model pads the vocabulary to 50304).
"$python" - "$work/text" <<'EOF'
import os, random, sys
random.seed(7)
words = ["kiln", "fires", "clay", "at", "high", "heat", "and", "the", "glaze", "melts", "into", "glass", "over",
         "hours", "while", "potters", "wait", "for", "cooling", "slowly", "cracks", "form", "when", "rushed"]
os.makedirs(sys.argv[1], exist_ok=True)
for d in range(64):
    with open(os.path.join(sys.argv[1], f"doc{d:03}.txt"), "w") as f:
        f.write(" ".join(random.choice(words) for _ in range(25000)))
EOF
kiln prep --source synth --input "$work/text" --out "$work/data" --overwrite --quiet >>"$out/gpu_check.log" 2>&1 \
  || { log "kiln prep failed"; tail "$out/gpu_check.log"; exit 1; }
common=(--set data.dir="$work/data" --set data.mix=synth:1 --set data.tokenizer=bytes --set run.out_dir="$work/runs"
        --set checkpoint.resume=false)

# 1. Correctness: CPU against GPU, fp32, the demo model's shape.
for device in cpu cuda; do
  kiln run input/tiny-cpu.ini "${common[@]}" --set run.name="tiny-$device" --set train.device=$device \
    --set fault.f=0 --set cluster.ranks_per_node=0 --set plan.pipelines= --set run.steps=8 --set checkpoint.every=0 \
    >"$out/tiny-$device.log" 2>&1 || { log "tiny run on $device failed"; tail -20 "$out/tiny-$device.log"; }
done
"$python" - "$out/tiny-cpu.log" "$out/tiny-cuda.log" <<'EOF' | tee -a "$out/gpu_check.log"
import json, re, sys
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"^step +\d+/\d+ +loss ([0-9.]+)", open(path).read(), re.M)]
cpu, gpu = losses(sys.argv[1]), losses(sys.argv[2])
worst = max((abs(a - b) / abs(a) for a, b in zip(cpu, gpu)), default=float("nan"))
print(json.dumps({"check": "loss_cpu_vs_gpu", "steps": min(len(cpu), len(gpu)), "cpu": cpu, "gpu": gpu,
                  "max_relative_difference": worst, "pass": len(cpu) == len(gpu) == 8 and worst < 1e-3}))
EOF

# 2. Speed: kiln, then PyTorch eager and compiled, the same model and step.
kiln run input/h200-gpt-350m.ini "${common[@]}" --set run.steps="$steps" >"$out/kiln-350m.log" 2>&1 \
  || { log "kiln run of the 350M model failed"; tail -30 "$out/kiln-350m.log"; }
kiln diag "$work/runs/h200-gpt-350m/diag.h5" --json >"$out/kiln-350m-diag.json" 2>>"$out/gpu_check.log"
# The memory model on the GPU (issue 22, item 4): the allocator's peak against the plan.
grep -E "^  memory  " "$out/kiln-350m.log" | tee -a "$out/gpu_check.log"
cp "$work/runs/h200-gpt-350m/diag.h5" "$out/kiln-350m-diag.h5" 2>/dev/null
for mode in eager compile; do
  flag=(); [ $mode = compile ] && flag=(--compile)
  PYTHONUNBUFFERED=1 "$python" perf/pytorch_gpt.py --vocab 50304 --seq 2048 --d-model 1024 --heads 16 --blocks 24 \
    --micro-batch 8 --global-batch 8 --steps "$steps" --warmup 5 --threads 4 --device cuda --bf16 "${flag[@]}" \
    >"$out/pytorch-$mode.json" 2>"$out/pytorch-$mode.err" || { log "PyTorch $mode failed"; tail "$out/pytorch-$mode.err"; }
done
"$python" - "$out" <<'EOF' | tee -a "$out/gpu_check.log" | tee "$out/summary.json"
import json, os, sys
out = sys.argv[1]
L, C, T, V = 24, 1024, 2048, 50304
params = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + C * V
# Training FLOPs per token: 6 per weight of the matrix products (embedding
# lookups excluded) plus attention's scores and sums, forward and backward.
flops_per_token = 6 * (params - V * C - T * C) + 12 * L * C * T
peak = 989e12  # H200 SXM, dense bf16
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
rows = {}
kiln = load("kiln-350m-diag.json")
if kiln:
    rows["kiln"] = T * 8 / kiln["median_step_s"]
for mode in ("eager", "compile"):
    r = load(f"pytorch-{mode}.json")
    if r:
        rows[f"pytorch_{mode}"] = r["tokens_per_s"]
summary = {"check": "speed_350m", "parameters": params, "flops_per_token": flops_per_token,
           "tokens_per_s": rows, "mfu": {k: v * flops_per_token / peak for k, v in rows.items()}}
if "kiln" in rows:
    summary["kiln_vs"] = {k: rows["kiln"] / v for k, v in rows.items() if k != "kiln"}
print(json.dumps(summary))
EOF
# 3. Recovery on the GPU: the same run with and without a kill, losses compared.
for name in recover-ref recover-kill; do
  # The killed run also starts its sums inside the last backward (train.grad_sums), as NCCL runs do.
  inject=""; sums=auto; [ $name = recover-kill ] && { inject=1:4:backward; sums=during_backward; }
  timeout 300 env OPAL_PREFIX="$pack/ompi" PATH="$pack/ompi/bin:$PATH" \
    LD_LIBRARY_PATH="$pack/lib:$pack/ompi/lib:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    "$pack/ompi/bin/mpirun" -n 3 --oversubscribe --with-ft ulfm "$pack/bin/kiln" run \
    input/tiny-cpu.ini "${common[@]}" --set run.name=$name --set train.device=cuda --set fault.f=1 \
    --set cluster.ranks_per_node=1 --set plan.pipelines=2+1 --set run.steps=8 --set checkpoint.every=0 \
    --set fault.inject="$inject" --set train.grad_sums=$sums >"$out/$name.log" 2>&1 || log "$name ended with status $? (see $name.log)"
  kiln diag "$work/runs/$name/diag.h5" --losses >"$out/$name.losses" 2>>"$out/gpu_check.log"
done
"$python" - "$out/recover-ref.losses" "$out/recover-kill.losses" "$out/recover-kill.log" <<'EOF' | tee -a "$out/gpu_check.log"
import json, sys
def losses(path):  # kiln diag --losses: step, loss, gradient norm per line
    return [float(line.split()[1]) for line in open(path) if line.strip() and not line.startswith("#")]
ref, kill = losses(sys.argv[1]), losses(sys.argv[2])
text = open(sys.argv[3]).read()
worst = max((abs(a - b) / abs(a) for a, b in zip(ref, kill)), default=float("nan"))
print(json.dumps({"check": "recovery_on_gpu", "steps": min(len(ref), len(kill)), "reference": ref, "with_kill": kill,
                  "max_relative_difference": worst, "migrated": "migrat" in text.lower(),
                  "pass": len(ref) == len(kill) == 8 and worst < 1e-4}))
EOF
log "done; files in $out"

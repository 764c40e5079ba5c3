# Shared by kiln's jobscripts (sourced, not submitted): where kiln is, and the
# job's shape as Slurm granted it.
#
# kiln is found as $KILN (a path to the kiln executable), else `kiln` on PATH
# (put the install prefix's bin/, or the build directory, on PATH before
# sbatch: sbatch passes the environment on). The launcher is the kiln-mpirun
# next to it: the Open MPI 5 (ULFM) kiln was built with, --with-ft ulfm on.

kiln_fail() { echo "kiln jobscript: error: $*" >&2; exit 2; }

KILN=${KILN:-$(command -v kiln || true)}
[ -n "$KILN" ] && [ -x "$KILN" ] || kiln_fail "kiln not found: put its bin/ directory (or the build directory) on PATH before sbatch, or set KILN=/path/to/kiln"
KILN_MPIRUN=${KILN_MPIRUN:-$(dirname "$KILN")/kiln-mpirun}
[ -x "$KILN_MPIRUN" ] || kiln_fail "$KILN_MPIRUN not found: kiln-mpirun (the ULFM launcher kiln was built with) belongs next to kiln; set KILN_MPIRUN"

# Ranks per node: Slurm's tasks per node (sbatch --ntasks-per-node=R; the first
# node's count of SLURM_TASKS_PER_NODE, e.g. "4(x8)", otherwise).
kiln_nodes=${SLURM_JOB_NUM_NODES:?not inside a Slurm job (submit with sbatch)}
kiln_ranks_per_node=${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE%%(*}}
kiln_ranks_per_node=${kiln_ranks_per_node%%,*}
[ -n "$kiln_ranks_per_node" ] || kiln_fail "Slurm gave no tasks per node: submit with --ntasks-per-node=R"
# With GPUs, one rank each: Slurm's GPUs on a node must match its ranks (kiln
# binds rank i of a node to the node's i-th visible GPU).
if [ -n "${SLURM_GPUS_ON_NODE:-}" ] && [ "${SLURM_GPUS_ON_NODE}" != "$kiln_ranks_per_node" ]; then
  kiln_fail "Slurm gave $SLURM_GPUS_ON_NODE GPUs and $kiln_ranks_per_node tasks per node; kiln runs one rank per GPU: submit with --ntasks-per-node equal to --gpus-per-node"
fi
kiln_ranks=$((kiln_nodes * kiln_ranks_per_node))

kiln_attempt_header() {
  echo "=== kiln: job ${SLURM_JOB_ID} attempt $(( ${SLURM_RESTART_COUNT:-0} + 1 )) on $kiln_nodes nodes (${SLURM_JOB_NODELIST}) x $kiln_ranks_per_node ranks, $(date -Is) ==="
}

# Sourced by tour.sh into the shell that runs the README's tour: `sbatch` as the tour's Slurm block uses it.
# Without --gpus-per-node the job runs under the test's private Slurm (SLURM_CONF) and must end COMPLETED
# having trained every step; with it, on a machine without GPUs, the submission is checked instead: the
# jobscript exists from the reader's directory, one rank per GPU, and the deck with its overrides passes
# `kiln deck --check` with cluster.ranks_per_node 0 (from Slurm) or Slurm's tasks per node.
sbatch() {
  local arg tasks="" gpus="" script="" rest=() out
  for arg in "$@"; do
    if [ -n "$script" ]; then rest+=("$arg"); continue; fi
    case $arg in
      --ntasks-per-node=*) tasks=${arg#*=} ;;
      --gpus-per-node=*) gpus=${arg#*=} ;;
      -*) ;;
      *) script=$arg ;;
    esac
  done
  [ -f "$script" ] || { echo "tour-sbatch: no jobscript '$script' from $PWD"; return 1; }
  [ -n "$tasks" ] || { echo "tour-sbatch: no --ntasks-per-node"; return 1; }
  if [ -n "$gpus" ]; then
    [ "$gpus" = "$tasks" ] || { echo "tour-sbatch: $gpus GPUs but $tasks tasks per node"; return 1; }
    out=$(kiln deck --check "${rest[@]}" 2>&1) || { echo "$out"; echo "tour-sbatch: the GPU form's deck is refused"; return 1; }
    grep -qE "^ranks_per_node = (0|$tasks)( |$)" <<<"$out" || { echo "$out" | grep ranks_per_node; echo "tour-sbatch: the deck's ranks per node disagree with $tasks"; return 1; }
    grep -q "^device = cuda" <<<"$out" || { echo "tour-sbatch: the GPU form does not train on cuda"; return 1; }
    echo "tour-sbatch: GPU form checked ($tasks ranks per node, train.device = cuda)"
    return 0
  fi
  out=$(mktemp "$PWD/slurm-tour.XXXXXX.out")
  local job
  job=$(command sbatch --parsable --wait -o "$out" "$@") || { cat "$out"; echo "tour-sbatch: job failed"; return 1; }
  grep -q "kiln run: steps 0 to" "$out" || { cat "$out"; echo "tour-sbatch: job $job trained nothing"; return 1; }
  echo "tour-sbatch: job $job COMPLETED ($out)"
}

#!/usr/bin/env bash
# The TensorBoard picture of docs/running.md, made again: a run of the tiny deck on 6 ranks as 3 nodes
# (fault.f = 1, kiln's own layout) that meets a straggler (rebalanced, then retired and taken back), a node
# asked for and admitted, and a node killed; TensorBoard serving its event files; Chromium, headless, drawing
# its Scalars tab for the tags given.
#   tools/tensorboard_screenshot.sh [OUT.png]      (default docs/images/tensorboard.png)
# Needs ./bootstrap.sh test done (build/kiln, Open MPI, the environment with tensorboard) and Chromium
# (apt-get install chromium).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/docs/images/tensorboard.png}
work=$(mktemp -d /tmp/kiln-tb-shot.XXXXXX)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=^ofi OMPI_MCA_mtl=^ofi
kiln=$root/build/kiln mpirun=$root/.deps/ompi/bin/mpirun python=$root/.deps/torch-2.15.0/bin/python
"$kiln" prep --source licenses --input /usr/share/common-licenses --format file --out "$work/data" --quiet
mkdir -p "$work/runs/tiny" && echo 1 >"$work/runs/tiny/admit"
# Rank 2 (node 1) 50 ms slower a microbatch from step 50 to 300 (rebalanced, retired, then taken back), rank 1 slowed at step 1 (the admitted node starts meanwhile), rank 4
# (node 2) killed at step 400.
"$mpirun" -n 6 --oversubscribe --with-ft ulfm "$kiln" run "$root/input/tiny-cpu.ini" --set data.dir="$work/data" \
  --set data.mix=licenses:1 --set data.tokenizer=bytes --set run.out_dir="$work/runs" --set run.steps=500 \
  --set cluster.ranks_per_node=2 --set plan.pipelines= --set checkpoint.every=100 --set train.log_every=50 \
  --set fault.step_deadline_floor_s=30 --set train.peak_tflops=0.05 \
  --set "fault.inject=1:1:forward:slow,2:50-300:slow=0.05,4:400:forward" >"$work/run.log" 2>&1 ||
  { cat "$work/run.log"; exit 1; }
port=$((20000 + RANDOM % 20000))
"$python" -m tensorboard.main --logdir "$work/runs" --port "$port" --host 127.0.0.1 >"$work/tensorboard.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/data/runs" | grep -q tiny && break; sleep 1; done
tags='train/loss|train/tokens_per_s|train/mfu|kiln/layout/spares|kiln/layout/tolerance|kiln/failure/recovery_s'
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1500,780 \
  --virtual-time-budget=20000 --screenshot="$out" \
  "http://127.0.0.1:$port/?darkMode=false#scalars&tagFilter=$(python3 -c "import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1], safe=''))" "$tags")&_smoothingWeight=0" \
  >/dev/null 2>&1
echo "wrote $out"

#!/usr/bin/env bash
# The GPU checks (issue "GPU measurements"), one run on a lent GPU machine, each step under its own time limit and
# writing its table under $OUT:
#   1. tests/test_cuda.py                                   -> $OUT/test_cuda.txt
#   2. bench_throughput at base size, bf16: clip, embed, albef -> $OUT/throughput.txt
#   3. the chat-VLM answer-scoring benchmark at base width     -> $OUT/answer.txt
# Prepare the wheels first (scripts/gpu_wheels.sh, here), then run from the repository root with .whl carried.
# Limits (seconds) add up to under 9 minutes; a step that runs out is cut and the next one runs.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src HF_HUB_OFFLINE=1 WANDB_MODE=offline
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheels did not install" | tee "$OUT/setup.txt"; exit 1; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; date -u; python3 -c \
  "import torch, transformers, lightning; print(torch.__version__, transformers.__version__, lightning.__version__)"; } \
  2>&1 | tee "$OUT/setup.txt"

step() {  # step NAME LIMIT COMMAND...: run COMMAND under LIMIT seconds, its output in $OUT/NAME.txt
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s): $*"
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name: exit $? after ${SECONDS}s in all"; tail -n 25 "$OUT/$name.txt"
}
step test_cuda 200 python3 -m pytest tests/test_cuda.py -n 0 -q -p no:cacheprovider
step throughput 200 python3 scripts/bench_throughput.py --size base --device cuda --precisions bf16 \
  --workloads clip embed albef
step answer 90 python3 scripts/bench_answer.py --size base --device cuda --precision bf16

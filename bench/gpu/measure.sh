#!/bin/bash
# Measures, on one GPU, the runs cellsched's estimator and reconfiguration-cost benchmarks use as truth:
#   1. `cellsched profile gpus --json` (the machine);
#   2. `cellsched profile run` of torchvision ResNet-50 and Wide-ResNet-50-2 at two batch sizes, fp32 and
#      bf16 autocast, and of Hugging Face GPT-2/BERT models (train.py), into a profile DB (median iteration
#      time, NVML peak memory, start to first iteration);
#   3. checkpoint save and restart to the first iteration of GPT/BERT models under the elastic contract
#      (restart_cost.py), one JSON line per model.
# Usage: bench/gpu/measure.sh OUTDIR [BUDGET_S]   (phases that would not fit in BUDGET_S are skipped)
# Output: OUTDIR/{log.txt,gpus.json,profile.csv,profile-runs.jsonl,restart.jsonl}
set -u
OUT=${1:?usage: measure.sh OUTDIR [BUDGET_S]}
BUDGET=${2:-420}
HERE=$(cd "$(dirname "$0")" && pwd)
CS=${CELLSCHED:-$HERE/../../target/release/cellsched}
PY=${PYTHON:-python3}
ITERS=${ITERS:-20}
T0=$(date +%s)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
left() { echo $((BUDGET - ($(date +%s) - T0))); }
stamp() { echo "== $(($(date +%s) - T0)) s: $*"; }

stamp "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
$PY -c 'import torch, torchvision, transformers; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))'
df -h "${CKPT_ROOT:-/tmp}" | tail -1
"$CS" --version
"$CS" profile gpus --json >"$OUT/gpus.json" || echo "profile gpus failed"

# prof LABEL BATCH MAX_S -- COMMAND...: one profiled run (skipped when MAX_S no longer fits).
prof() {
    local label=$1 batch=$2 max=$3
    shift 4
    if (($(left) < max)); then stamp "skip $label bs$batch (budget)"; return; fi
    stamp "profile $label bs$batch"
    timeout $((max + 20)) "$CS" profile run --db "$OUT/profile.csv" --model "$label" --batch "$batch" \
        --plan dp=1,tp=1,pp=1,mb=1,zero=0,ckpt=off --warmup 5 --iters "$ITERS" --duration "$max" \
        --interval-ms 200 ${PROFILE_FLAGS:-} --json -- "$@" >>"$OUT/profile-runs.jsonl" || echo "  failed: $label bs$batch ($?)"
    tail -n 1 "$OUT/profile-runs.jsonl"
}
N=$((ITERS + 8))
for prec in fp32 bf16; do
    sfx=; [[ $prec == bf16 ]] && sfx=_bf16
    for b in 64 256; do prof "resnet50$sfx" $b 60 -- $PY "$HERE/train.py" cnn resnet50 $b $prec $N; done
    for b in 32 128; do prof "wide_resnet50_2$sfx" $b 60 -- $PY "$HERE/train.py" cnn wide_resnet50_2 $b $prec $N; done
done
# The H100 runs' dimensions (../shared/data/h100): catalog GPT entries, BERT at sequence 512 / vocabulary 30522;
# GPT-2 1.3B with a 32,128-token vocabulary (bench estimator describes it so).
prof gpt__350M 8 60 -- $PY "$HERE/train.py" gpt 24 1024 16 1024 51200 8 $N
prof gpt__350M 16 60 -- $PY "$HERE/train.py" gpt 24 1024 16 1024 51200 16 $N
prof gpt__1.3B 8 80 -- $PY "$HERE/train.py" gpt 24 2048 32 1024 32128 8 $N
prof bert__350M 32 60 -- $PY "$HERE/train.py" bert 24 1024 16 512 30522 32 $N

# restart LABEL MAX_S ARGS...: one reconfiguration (signal, checkpoint, restart) of a transformer.
restart() {
    local label=$1 max=$2
    shift 2
    if (($(left) < max)); then stamp "skip restart $label (budget)"; return; fi
    stamp "restart $label"
    timeout "$max" $PY "$HERE/restart_cost.py" "$label" 8 -- $PY "$HERE/train.py" "$@" 12 >>"$OUT/restart.jsonl" ||
        echo "  failed: restart $label ($?)"
    tail -n 1 "$OUT/restart.jsonl"
}
restart gpt__125M 60 gpt 12 768 12 1024 51200 16
restart gpt__350M 70 gpt 24 1024 16 1024 51200 8
restart bert__350M 70 bert 24 1024 16 512 30522 32
restart gpt__760M 90 gpt 24 1536 16 1024 51200 8
restart gpt__1.3B 150 gpt 24 2048 32 1024 32128 8
stamp "done"

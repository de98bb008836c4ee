#!/usr/bin/env python3
"""Writes bench/replay/small.csv: a seeded 40-job mixed DL trace for the
live replay (`cellsched bench replay`) on the local test cluster.

Shape: most users ask for the popular a100 (1-8 GPUs) while v100/a10 sit
mostly idle; a few ask for v100 or a10. Run times on the requested Cell
(from `cellsched estimate`) are log-uniform in 200-1500 trace seconds,
long and short jobs mixed; arrivals over ~20 trace minutes with a burst
at the start; declared limits overestimate the run 1.5-3x (rounded up to
5 minutes); a few jobs opt into layer freezing.

Usage: python3 bench/replay/make-small.py [CELLSCHED_BINARY] > bench/replay/small.csv
"""
import math, random, re, subprocess, sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/debug/cellsched"
rng = random.Random(7)
MODELS = [("gpt__350M", 64), ("bert__760M", 64), ("resnet50", 256), ("moe__690M", 64),
          ("wide_resnet__500M", 128), ("transformer_multi30k", 128), ("gpt__1.3B", 32)]
NODE = {"a100": 4, "v100": 8, "a10": 4}
cache = {}

def iter_time(model, batch, gpu, n):
    key = (model, batch, gpu, n)
    if key not in cache:
        out = subprocess.run([BIN, "estimate", "--model", model, "--batch", str(batch), "--gpu", gpu,
                              "--gpus", str(n), "--gpus-per-node", str(NODE[gpu])],
                             capture_output=True, text=True)
        m = re.search(r"iteration\s+([0-9.]+) s", out.stdout)
        cache[key] = float(m.group(1)) if m else None
    return cache[key]

rows, t, jid = [], 0.0, 1
while len(rows) < 40:
    gpu = rng.choices(["a100", "v100", "a10"], weights=[70, 18, 12])[0]
    n = rng.choice([1, 1, 2, 2, 4, 4, 8] if gpu != "a10" else [1, 2, 4])
    model, batch = rng.choice(MODELS)
    it = iter_time(model, batch, gpu, n)
    if it is None:
        continue  # does not fit this Cell: draw again
    run = math.exp(rng.uniform(math.log(200), math.log(1500)))
    iters = max(10, round(run / it))
    deadline = math.ceil(iters * it * rng.uniform(1.5, 3.0) / 300) * 300
    freeze = rng.choices(["", "conservative", "auto"], weights=[80, 10, 10])[0]
    rows.append((jid, round(t, 1), iters, model, deadline, batch, n, gpu, "u%d" % rng.randint(1, 6), freeze))
    jid += 1
    t += rng.expovariate(1 / 15.0) if jid <= 12 else rng.expovariate(1 / 40.0)

print("job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type,user,freeze")
for r in rows:
    print(",".join(str(x) for x in r))

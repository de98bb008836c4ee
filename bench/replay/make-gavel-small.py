#!/usr/bin/env python3
"""Writes bench/replay/gavel-small.csv: a seeded 40-job DL trace for the live
replay (`cellsched bench replay`) on the Gavel-type cluster
(bench/replay/gavel-cluster.toml: v100 2x8, p100 1x8, k80 1x8).

Every job's requested Cell (type, 1-8 GPUs on one node) has a measured
truth point in etc/examples/truth-gavel.csv (Gavel's measured throughputs),
so the emulated trainer never lacks a speed on the requested Cell. Shape: most
users ask for the popular v100 while p100/k80 sit mostly idle; true run
times on the requested Cell are log-uniform in 200-1500 trace seconds;
arrivals over ~5 trace minutes, a burst at the start; declared limits
overestimate the true run 1.5-3x (rounded up to 5 minutes).

Usage: python3 bench/replay/make-gavel-small.py [SEED] > bench/replay/gavel-small.csv
SEED defaults to 7 (gavel-small.csv); bench/replay/gavel-small-s11.csv is
`python3 bench/replay/make-gavel-small.py 11`, the second replay trace.
"""
import csv, math, random, sys

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
truth = {}
with open("etc/examples/truth-gavel.csv") as f:
    rows = csv.DictReader(l for l in f if not l.startswith("#"))
    for r in rows:
        t = float(r["iter_time_s"])
        if t > 0 and r["nodes"] == "1":
            truth[(r["model"], int(r["batch"]), r["gpu_type"], int(r["gpus_per_node"]))] = t
# (model, per-GPU batch) classes that Gavel measured at several GPU counts.
classes = sorted({(m, b // g) for (m, b, ty, g) in truth if g > 1})
print("job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type,user,freeze")
t = 0.0
for i in range(1, 41):
    while True:
        model, per = rng.choice(classes)
        n = rng.choice([1, 1, 2, 2, 4, 8])
        ty = rng.choices(["v100", "p100", "k80"], weights=[6, 1, 1])[0]
        key = (model, per * n, ty, n)
        if key in truth:
            break
    run_s = math.exp(rng.uniform(math.log(200), math.log(1500)))
    iters = max(1, round(run_s / truth[key]))
    limit = math.ceil(iters * truth[key] * rng.uniform(1.5, 3.0) / 300) * 300
    t += rng.expovariate(1 / 8.0) if i > 8 else 1.5
    print(f"{i},{t:.1f},{iters},{model},{limit},{per * n},{n},{ty},u{rng.randint(1, 6)},")

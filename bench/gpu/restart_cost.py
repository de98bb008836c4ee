"""Measure one reconfiguration of an elastic training job, as cellsched performs it.

  python3 restart_cost.py LABEL ITERS_BEFORE_SIGNAL -- TRAIN_COMMAND...

Runs TRAIN_COMMAND (train.py in this folder) with CELLSCHED_CKPT_DIR set and CELLSCHED_RESTART=0,
sends SIGUSR1 after ITERS_BEFORE_SIGNAL `cellsched-iter` lines, and times the signal to the process's
exit (exit 75 expected); then starts the same command with CELLSCHED_RESTART=1 and times the process
start to the end of its first iteration. Prints one JSON object:
  cold_first_iter_wall_s (spawn to the first `cellsched-iter` line of the first run, no checkpoint),
  save_s (the script's own signal-to-file time), signal_to_exit_s, bytes, load_s,
  restart_s (process start to the end of the first iteration, by the script), restart_wall_s (the same
  seen from here: spawn to the `cellsched-restart` line), exit codes.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

label, before = sys.argv[1], int(sys.argv[2])
cmd = sys.argv[sys.argv.index("--") + 1:]
d = tempfile.mkdtemp(prefix="cellsched-ckpt-", dir=os.environ.get("CKPT_ROOT", "/tmp"))
env = dict(os.environ, CELLSCHED_CKPT_DIR=d, CELLSCHED_RECONF_EXIT="75")
out = {"label": label, "ckpt_dir_fs": d}


def lines(p):
    for raw in p.stdout:
        yield time.perf_counter(), raw.decode(errors="replace").strip()


p = subprocess.Popen(cmd, env=dict(env, CELLSCHED_RESTART="0"), stdout=subprocess.PIPE)
t_spawn = time.perf_counter()
seen, t_sig = 0, None
for t, line in lines(p):
    if line.startswith("cellsched-iter"):
        seen += 1
        if seen == 1:
            out["cold_first_iter_wall_s"] = round(t - t_spawn, 3)
        if seen == before and t_sig is None:
            t_sig = time.perf_counter()
            p.send_signal(signal.SIGUSR1)
    elif line.startswith("cellsched-save"):
        _, s, b = line.split()
        out["save_s"], out["bytes"] = float(s), int(b)
p.wait()
out["exit_first"] = p.returncode
out["signal_to_exit_s"] = round(time.perf_counter() - t_sig, 3) if t_sig else None

t_start = time.perf_counter()
p = subprocess.Popen(cmd, env=dict(env, CELLSCHED_RESTART="1"), stdout=subprocess.PIPE)
iters = []
for t, line in lines(p):
    w = line.split()
    if not w:
        continue
    if w[0] == "cellsched-load":
        out["load_s"] = float(w[1])
    elif w[0] == "cellsched-restart":
        out["restart_s"] = float(w[1])
        out["restart_wall_s"] = round(t - t_start, 3)
    elif w[0] == "cellsched-iter":
        iters.append(float(w[1]))
p.wait()
out["exit_resume"] = p.returncode
out["resume_iters"] = len(iters)
out["resume_iter_median_s"] = sorted(iters)[len(iters) // 2] if iters else None
shutil.rmtree(d, ignore_errors=True)
print(json.dumps(out), flush=True)

#!/usr/bin/env python3
"""cellsched profile comm: times NCCL collectives with torch.distributed.

Run one process per GPU under the site's launcher (srun, torchrun, mpirun);
rank 0 prints one line per measurement:

    cellsched-comm <collective> <bytes per rank> <median seconds> <nodes> <gpus per node> <gpu name>

and exits 3 after printing `cellsched-comm-error: ...` when torch, CUDA or
NCCL is unavailable. Ranks and world size come from the launcher's
environment (RANK/WORLD_SIZE/LOCAL_RANK, or SLURM_PROCID/SLURM_NTASKS/
SLURM_LOCALID with MASTER_ADDR/MASTER_PORT set by the caller).
"""
import os
import socket
import sys


def fail(msg):
    print(f"cellsched-comm-error: {msg}", flush=True)
    sys.exit(3)


def env_int(*names, default=None):
    for n in names:
        v = os.environ.get(n)
        if v is not None and v != "":
            return int(v)
    return default


def main():
    try:
        import torch
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        fail(f"torch is not importable ({e}); install PyTorch with CUDA in the job's environment")
    if not torch.cuda.is_available():
        fail("torch.cuda.is_available() is False: no GPU or no CUDA build of PyTorch")
    if not dist.is_nccl_available():
        fail("this PyTorch has no NCCL backend")
    rank = env_int("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", default=0)
    world = env_int("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", default=1)
    local = env_int("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", default=0)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 28
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("nccl", rank=rank, world_size=world)
    # Shape: nodes from the hosts of all ranks.
    host = socket.gethostname()
    hosts = [None] * world
    dist.all_gather_object(hosts, host)
    nodes = len(set(hosts))
    per_node = world // max(nodes, 1)
    name = torch.cuda.get_device_name()

    def timed(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            dist.barrier()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1000.0)
        t = torch.tensor([sorted(times)[len(times) // 2]], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    size = 1 << 16
    while size <= max_bytes:
        n = size // 4
        buf = torch.ones(n, dtype=torch.float32, device="cuda")
        out = [torch.empty(n // world if n >= world else 1, dtype=torch.float32, device="cuda") for _ in range(world)]
        shard = torch.ones(max(n // world, 1), dtype=torch.float32, device="cuda")
        results = [("all_reduce", timed(lambda: dist.all_reduce(buf)))]
        if world > 1:
            results.append(("all_gather", timed(lambda: dist.all_gather(out, shard))))
            peer = world - 1  # the last rank: another node when the job spans nodes

            def p2p():
                if rank == 0:
                    dist.send(buf, peer)
                elif rank == peer:
                    dist.recv(buf, 0)

            results.append(("p2p", timed(p2p)))
        if rank == 0:
            for coll, t in results:
                print(f"cellsched-comm {coll} {size} {t:.9f} {nodes} {per_node} {name}", flush=True)
        size *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

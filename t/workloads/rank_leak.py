#!/usr/bin/env python3
"""
rank_leak.py — one rank of a job of several (srun's tasks, torchrun's
workers) where only one rank leaks.

    rank_leak.py [--steps N] [--leaky-rank R] [--mib M] [--step-ms MS]

Marks N steps with the client (leakproof.step()), one every MS ms. The
rank is SLURM_PROCID, else RANK (torchrun), else 0. Rank R keeps M MiB
(touched) per step; every other rank allocates the same and frees it, so
all ranks do the same work and only one grows. Units: MiB, ms.
"""
import argparse
import mmap
import os
import time

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def touched(nbytes):
    m = mmap.mmap(-1, nbytes)
    for off in range(0, nbytes, PAGE_BYTES):
        m[off] = 1
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--leaky-rank", type=int, default=1)
    ap.add_argument("--mib", type=float, default=1.0)
    ap.add_argument("--step-ms", type=float, default=50)
    a = ap.parse_args()
    import leakproof            # on PYTHONPATH under leakproof run
    rank = int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")))
    kept = []
    for _ in range(a.steps):
        block = touched(int(a.mib * (1 << 20)))
        if rank == a.leaky_rank:
            kept.append(block)
        else:
            block.close()
        time.sleep(a.step_ms / 1000)
        leakproof.step()
    print(f"rank {rank}: {len(kept)} blocks kept", flush=True)


if __name__ == "__main__":
    main()

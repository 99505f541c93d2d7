#!/usr/bin/env python3
"""
gc_cycles.py — memory that rises and falls: every step builds a reference
cycle holding --cycle-kib (1024 by default, every page touched) that
nothing refers to, and every --every steps (60 by default) gc.collect()
frees them all. Memory climbs by about a MiB a step and falls back: a
sawtooth whose floors and peaks do not rise. Automatic collection is off,
so the period is the job's own.

With --keep-kib K, each step also keeps a block of K KiB (touched) for
good: the floor of the sawtooth rises by K KiB a step, a leak. Each kept
block is a mapping of its own (as a large array's storage is), apart from
the heap the cycles use: kept as bytearrays, the blocks filled the holes
the collected cycles left in the heap, and the floor stayed at 55 MiB for
five cycles while 18 MiB were kept (it rose 25-45 KiB a step over 600
steps for 64 KiB kept), so the workload's own truth was not what the
process held.

    --steps N        steps (default 600)
    --every K        steps between collections (default 60)
    --cycle-kib C    held by each step's cycle (default 1024)
    --keep-kib K     kept for good each step (default 0)

Prints EXPECTED_GROWTH_BYTES_PER_STEP=<K KiB in bytes> on stderr at the
start. Marks steps with leakproof.step().
"""
import argparse
import gc
import mmap
import sys
import types

try:
    import leakproof
except ImportError:  # not under leakproof: its client is not on the path
    leakproof = types.SimpleNamespace(step=lambda *a, **k: None)

KIB = 1 << 10


class Node:
    def __init__(self, size):
        self.payload = bytearray(b"\x01" * size)
        self.me = self          # a cycle: only the collector frees it


def kept_block(size):
    """size bytes, every page touched, in a mapping of their own"""
    m = mmap.mmap(-1, size)
    m.write(b"\x01" * size)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--every", type=int, default=60)
    ap.add_argument("--cycle-kib", type=int, default=1024)
    ap.add_argument("--keep-kib", type=int, default=0)
    args = ap.parse_args()
    print(f"EXPECTED_GROWTH_BYTES_PER_STEP={args.keep_kib * KIB}", file=sys.stderr, flush=True)
    gc.disable()
    kept = []
    for step in range(args.steps):
        Node(args.cycle_kib * KIB)
        if args.keep_kib:
            kept.append(kept_block(args.keep_kib * KIB))
        if step % args.every == args.every - 1:
            gc.collect()
        leakproof.step()


if __name__ == "__main__":
    main()

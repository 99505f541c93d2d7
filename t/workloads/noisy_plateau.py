#!/usr/bin/env python3
"""
noisy_plateau.py — memory that grows fast, then stops, under heavy noise:
not a leak, though a least-squares slope through it says it is.

Steps 0..8 grow a buffer by doubling (1, 2, 4, ..., 256 MiB, every page
touched), as a cache or a growing array would. Then memory stays flat: each
step frees the previous step's temporary and makes a new one of a random
size (up to --noise-mib, 48 by default, every page touched), which is still
alive when the step ends, so the noise shows in memory measured at step
ends. Each step marks its end, then rests for the rest of --step-ms, so
memory holds still while the step's end is measured. Temporaries are anonymous mappings of their own, so the allocator
returns them at once and nothing creeps.

At the end it prints, on stderr, the slope a least-squares fit through its
own RSS per step finds (LSQ_SLOPE_BYTES_PER_STEP, what a naive check would
call a leak) and the slope over the flat part (FLAT_SLOPE_BYTES_PER_STEP,
about 0).

    --steps N        steps in all (default 110)
    --step-ms MS     minimum time per step (default 40)
    --noise-mib M    largest temporary (default 48)
    --seed S         random seed (default 182: its noise has no trend of its
                     own, Kendall's tau -0.003 over the flat part, so a test
                     of the judgment does not hang on luck; with iid noise
                     about one seed in a hundred trends at p < 0.01)

Units: bytes, MiB where named. Marks steps with leakproof.step().
"""
import argparse
import mmap
import os
import random
import sys
import time
import types

try:
    import leakproof
except ImportError:  # not under leakproof: its client is not on the path
    leakproof = types.SimpleNamespace(step=lambda *a, **k: None)

MIB = 1 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
DOUBLINGS = 9          # 1 MiB .. 256 MiB


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_BYTES


def touched_mapping(nbytes):
    """An anonymous mapping of nbytes with every page written."""
    m = mmap.mmap(-1, nbytes)
    for off in range(0, nbytes, PAGE_BYTES):
        m[off] = 1
    return m


def lsq_slope(ys):
    n = len(ys)
    if n < 2:
        return 0.0
    mx = (n - 1) / 2
    my = sum(ys) / n
    sxy = sum((i - mx) * (y - my) for i, y in enumerate(ys))
    sxx = sum((i - mx) ** 2 for i in range(n))
    return sxy / sxx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=110)
    ap.add_argument("--step-ms", type=float, default=40)
    ap.add_argument("--noise-mib", type=float, default=48)
    ap.add_argument("--seed", type=int, default=182)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    buf = None
    tmp = None
    rss = []
    t0 = time.monotonic()
    for step in range(args.steps):
        t_step = time.monotonic()
        if step < DOUBLINGS:
            grown = touched_mapping(MIB << step)
            if buf is not None:
                grown[:len(buf)] = buf
                buf.close()
            buf = grown
        else:
            if tmp is not None:
                tmp.close()
            tmp = touched_mapping(max(PAGE_BYTES,
                                      int(rng.uniform(0, args.noise_mib) * MIB)
                                      // PAGE_BYTES * PAGE_BYTES))
        rss.append(rss_bytes())
        leakproof.step()
        # Rest after the step's end, so memory holds still while it is measured.
        left = args.step_ms / 1000 - (time.monotonic() - t_step)
        if left > 0:
            time.sleep(left)

    print(f"LSQ_SLOPE_BYTES_PER_STEP={lsq_slope(rss):.0f}", file=sys.stderr)
    print(f"FLAT_SLOPE_BYTES_PER_STEP={lsq_slope(rss[DOUBLINGS:]):.0f}", file=sys.stderr)
    print(f"steps={args.steps} seconds={time.monotonic() - t0:.1f} "
          f"rss_min_flat={min(rss[DOUBLINGS:])} rss_max_flat={max(rss[DOUBLINGS:])}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

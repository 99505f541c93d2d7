#!/usr/bin/env python3
"""
slow_leak.py — a slow leak on a large baseline, under noise: the case where
a leak is small beside everything else and must still be found.

A baseline of --baseline-mib (384 by default, every page touched) is
allocated first. Then every step keeps a new --leak-kib block (48 KiB by
default, every byte written, from the malloc heap as a small allocation
is) and, like noisy_plateau.py, replaces a temporary of random size up to
--noise-mib (8 by default, touched) that is still alive at the step's end.

Prints EXPECTED_GROWTH_BYTES_PER_STEP=<leak bytes> on stderr at the start,
and at the end MEASURED_GROWTH_BYTES_PER_STEP from its own RSS (a
least-squares slope after the first 10 steps; the noise averages out).

    --steps N          steps (default 400)
    --step-ms MS       minimum time per step (default 8)
    --leak-kib K       kept per step (default 48)
    --baseline-mib M   (default 384)
    --noise-mib M      largest temporary (default 8)

Units: bytes, KiB/MiB where named. Marks steps with leakproof.step().
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

KIB = 1 << 10
MIB = 1 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_BYTES


def touched_mapping(nbytes):
    m = mmap.mmap(-1, nbytes)
    for off in range(0, nbytes, PAGE_BYTES):
        m[off] = 1
    return m


def lsq_slope(ys):
    n = len(ys)
    mx = (n - 1) / 2
    my = sum(ys) / n
    sxy = sum((i - mx) * (y - my) for i, y in enumerate(ys))
    sxx = sum((i - mx) ** 2 for i in range(n))
    return sxy / sxx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--step-ms", type=float, default=8)
    ap.add_argument("--leak-kib", type=float, default=48)
    ap.add_argument("--baseline-mib", type=float, default=384)
    ap.add_argument("--noise-mib", type=float, default=8)
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    leak_bytes = int(args.leak_kib * KIB)

    baseline = touched_mapping(int(args.baseline_mib * MIB) // PAGE_BYTES * PAGE_BYTES)
    print(f"EXPECTED_GROWTH_BYTES_PER_STEP={leak_bytes}", file=sys.stderr, flush=True)
    kept = []
    tmp = None
    rss = []
    t0 = time.monotonic()
    for step in range(args.steps):
        t_step = time.monotonic()
        kept.append(b"\x01" * leak_bytes)      # the leak: bytes, every byte written
        if tmp is not None:
            tmp.close()
        noise = int(rng.uniform(0, args.noise_mib) * MIB) // PAGE_BYTES * PAGE_BYTES
        tmp = touched_mapping(max(PAGE_BYTES, noise))
        rss.append(rss_bytes())
        leakproof.step()
        # Rest after the step's end, so memory holds still while it is measured.
        left = args.step_ms / 1000 - (time.monotonic() - t_step)
        if left > 0:
            time.sleep(left)

    elapsed = time.monotonic() - t0
    print(f"MEASURED_GROWTH_BYTES_PER_STEP={lsq_slope(rss[10:]):.0f}", file=sys.stderr)
    print(f"steps={args.steps} seconds={elapsed:.1f} baseline_bytes={len(baseline)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

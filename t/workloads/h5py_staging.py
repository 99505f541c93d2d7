#!/usr/bin/env python3
"""
h5py_staging.py — an h5py data pipeline whose memory grows inside libhdf5,
not in Python: every batch is staged in an in-memory HDF5 file
(driver='core', backing_store=False), written, read back, and the File
object is kept open in a list (as a pipeline that caches its staging files
"for later" would). Each open in-memory file holds its image and libhdf5's
per-file state (metadata cache, free-space managers): several times the
batch itself. With --close each file is closed after use: no leak.

    --close        close each staging file (no leak)
    --steps N      batches (default 250)
    --step-ms MS   minimum time per batch (default 20)
    --rows R       rows of 256 float32 per batch (default 256: 256 KiB)

Prints MEASURED_GROWTH_BYTES_PER_STEP (RSS after batch 20 to the end, per
batch) on stderr. Marks steps with leakproof.step().
"""
import argparse
import os
import sys
import time
import types

import h5py
import numpy as np

try:
    import leakproof
except ImportError:  # not under leakproof: its client is not on the path
    leakproof = types.SimpleNamespace(step=lambda *a, **k: None,
                                      metric=lambda **k: None)

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
COLUMNS = 256
SKIP = 20


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_BYTES


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--close", action="store_true")
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--step-ms", type=float, default=20)
    ap.add_argument("--rows", type=int, default=256)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    staged = []
    rss = []
    total = 0.0
    t0 = time.monotonic()
    for step in range(args.steps):
        t_step = time.monotonic()
        batch = rng.standard_normal((args.rows, COLUMNS), dtype=np.float32)
        f = h5py.File(f"staging-{step}.h5", "w", driver="core", backing_store=False)
        f.create_dataset("x", data=batch)
        f.attrs["step"] = step
        back = f["x"][...]
        if not np.array_equal(back, batch):
            print("h5py_staging: staged batch differs", file=sys.stderr)
            return 1
        total += float(back.mean())
        if args.close:
            f.close()
        else:
            staged.append(f)
        rss.append(rss_bytes())
        leakproof.step()
        left = args.step_ms / 1000 - (time.monotonic() - t_step)
        if left > 0:
            time.sleep(left)

    n = len(rss) - 1 - SKIP
    measured = (rss[-1] - rss[SKIP]) / n if n > 0 else 0.0
    print(f"MEASURED_GROWTH_BYTES_PER_STEP={measured:.0f}", file=sys.stderr)
    print(f"steps={args.steps} seconds={time.monotonic() - t0:.1f} open_files={len(staged)} "
          f"batch_bytes={args.rows * COLUMNS * 4} checksum={total:.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

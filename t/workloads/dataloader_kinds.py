#!/usr/bin/env python3
"""
dataloader_kinds.py — a real torch DataLoader with forked workers, for the
growth kinds (docs/internals/growth-kinds.md).

  --data objects   the dataset is a Python list of floats: every read in a
                   worker writes the float's reference count, so the worker
                   privately copies the parent's page (copy-on-write); with
                   the sequential order each worker copies its batches'
                   pages through the first epoch, then nothing more
                   (persistent workers)
  --data numpy     the same numbers as one numpy array: reading it writes
                   nothing, the workers copy nothing: flat
  --keep-kib K     each worker also keeps K KiB per batch it makes (a leak
                   in the workers; the parent stays flat)
  --pause-ms M     the parent sleeps M ms after each batch, so that the
                   workers' copying spreads over a longer epoch (they run
                   only a few batches ahead of it)

Marks a step per batch received (leakproof.step(), when run under
leakproof) and an epoch per epoch. Units: items, KiB where named.
"""
import argparse
import time
import types

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

try:
    import leakproof
except ImportError:  # not under leakproof
    leakproof = types.SimpleNamespace(step=lambda *a, **k: None, epoch=lambda *a, **k: None)

KEPT = []            # per worker (each has its own copy after the fork)


class Numbers(Dataset):
    def __init__(self, data, keep_kib, batch):
        self.data, self.keep_kib, self.batch = data, keep_kib, batch

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        if self.keep_kib and i % self.batch == 0:
            KEPT.append(bytearray(self.keep_kib << 10))   # touched: zero-filled
        return float(self.data[i])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=("objects", "numpy"), default="objects")
    ap.add_argument("--items", type=int, default=3_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep-kib", type=int, default=0)
    ap.add_argument("--pause-ms", type=float, default=0)
    a = ap.parse_args()

    if a.data == "objects":
        data = [float(i) + 0.5 for i in range(a.items)]
    else:
        data = np.arange(a.items, dtype=np.float64) + 0.5
    loader = DataLoader(Numbers(data, a.keep_kib, a.batch), batch_size=a.batch,
                        shuffle=False, num_workers=a.workers, persistent_workers=True,
                        multiprocessing_context="fork")
    total = 0.0
    for epoch in range(a.epochs):
        for batch in loader:
            total += float(batch[0])
            if a.pause_ms:
                time.sleep(a.pause_ms / 1000)
            leakproof.step()
        leakproof.epoch()
    print(f"done {total:.1f}", flush=True)


if __name__ == "__main__":
    main()

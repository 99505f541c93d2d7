"""Training input read from an HDF5 file with h5py, one contiguous batch
of rows per step: the page cache holds what was read, the process's
memory stays flat. Not a leak. Steps are printed."""
import os
import time
import h5py
import numpy as np
import corpus_truth as truth

PATH = os.path.join(truth.data_dir(), "features.h5")
ROWS, COLS = 98304, 512          # float32: 192 MiB

if truth.want_prepare():
    if not os.path.exists(PATH):
        rng = np.random.default_rng(0)
        with h5py.File(PATH + ".tmp", "w") as f:
            d = f.create_dataset("x", (ROWS, COLS), dtype="f4")
            for lo in range(0, ROWS, 8192):
                d[lo:lo + 8192] = rng.standard_normal((8192, COLS), dtype=np.float32)
        os.replace(PATH + ".tmp", PATH)
    raise SystemExit(0)

w = np.ones(COLS, dtype=np.float32)
batch = 1024
with h5py.File(PATH, "r") as f:
    d = f["x"]
    for k, lo in enumerate(range(0, ROWS, batch)):
        x = d[lo:lo + batch]
        float((x @ w).mean())
        time.sleep(0.05)               # the model's step
        print("epoch 1 batch %d/%d" % (k + 1, ROWS // batch), flush=True)
        truth.step()

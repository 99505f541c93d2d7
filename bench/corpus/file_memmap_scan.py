"""Reading a large token file through np.memmap, a window per step, as a
language-model data loader does: mapped file pages pile up in the
process (clean, the kernel's to drop). Not a leak."""
import os
import time
import numpy as np
import leakproof
import corpus_truth as truth

PATH = os.path.join(truth.data_dir(), "tokens.u16")
N = 96 << 20                     # uint16: 192 MiB

if truth.want_prepare():
    if not os.path.exists(PATH) or os.path.getsize(PATH) != 2 * N:
        rng = np.random.default_rng(0)
        with open(PATH + ".tmp", "wb") as f:
            for _ in range(N // (8 << 20)):
                f.write(rng.integers(0, 50000, 8 << 20, dtype=np.uint16).tobytes())
        os.replace(PATH + ".tmp", PATH)
    raise SystemExit(0)

tok = np.memmap(PATH, dtype=np.uint16, mode="r")
win = 1 << 20
counts = np.zeros(50000, dtype=np.int64)
for k, lo in enumerate(range(0, len(tok), win)):
    counts += np.bincount(tok[lo:lo + win], minlength=50000)
    time.sleep(0.03)
    leakproof.step()
    truth.step()

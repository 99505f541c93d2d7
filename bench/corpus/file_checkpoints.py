"""A training loop that writes a checkpoint file every step (rotating
nothing; the disk has room): the page cache grows by what was written,
clean once written back. Not a leak."""
import os
import time
import numpy as np
import leakproof
import corpus_truth as truth

out = truth.scratch_dir()
rng = np.random.default_rng(0)
weights = rng.standard_normal(1 << 20).astype(np.float32)      # 4 MiB
for i in range(truth.scale(60)):
    weights *= 0.999
    with open(os.path.join(out, "ckpt-%04d.npy" % i), "wb") as f:
        np.save(f, weights)
    time.sleep(0.1)
    leakproof.step()
    truth.step()

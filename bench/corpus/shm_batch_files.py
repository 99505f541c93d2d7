"""A preprocessing stage that hands batches to a consumer through
/dev/shm files, and forgets to delete them: tmpfs grows 1 MiB a step in
files no process maps."""
import os
import time
import numpy as np
import leakproof
import corpus_truth as truth

d = "/dev/shm/" + truth.shm_prefix()
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(0)
for i in range(truth.scale(80)):
    b = rng.standard_normal((256, 1024)).astype(np.float32)    # 1 MiB
    np.save(os.path.join(d, "batch-%05d.npy" % i), b)
    time.sleep(0.1)
    leakproof.step()
    truth.step((i + 1) * b.nbytes)

"""A fixed 48 MiB shared-memory ring of batches, made once and rewritten
slot by slot every step: shared memory fills during the first lap, then
stays. Not a leak."""
import time
from multiprocessing import shared_memory
import numpy as np
import leakproof
import corpus_truth as truth

slots, slot_floats = 24, 1 << 19                  # 24 x 2 MiB
shm = shared_memory.SharedMemory(name=truth.shm_prefix() + "-ring", create=True, size=slots * slot_floats * 4)
ring = np.ndarray((slots, slot_floats), np.float32, buffer=shm.buf)
rng = np.random.default_rng(0)
try:
    for i in range(truth.scale(120)):
        ring[i % slots] = rng.standard_normal(slot_floats, dtype=np.float32)
        time.sleep(0.05)
        leakproof.step()
        truth.step()
finally:
    del ring
    shm.close()
    shm.unlink()

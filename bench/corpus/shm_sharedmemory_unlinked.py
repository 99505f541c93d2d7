"""multiprocessing.shared_memory blocks made per step to pass arrays to a
worker, closed but never unlink()ed: POSIX shared memory grows 2 MiB a
step though every handle is closed. Steps are printed."""
import time
from multiprocessing import shared_memory, resource_tracker
import numpy as np
import corpus_truth as truth

rng = np.random.default_rng(0)
prefix = truth.shm_prefix()
for i in range(truth.scale(50)):
    a = rng.standard_normal(1 << 18)             # 2 MiB of float64
    shm = shared_memory.SharedMemory(name="%s-%d" % (prefix, i), create=True, size=a.nbytes)
    np.ndarray(a.shape, a.dtype, buffer=shm.buf)[:] = a
    shm.close()
    # the tracker would unlink at exit and warn: this job "hands them on"
    resource_tracker.unregister(shm._name, "shared_memory")
    time.sleep(0.15)
    print("step %d sent %s" % (i + 1, shm.name), flush=True)
    truth.step((i + 1) * a.nbytes)

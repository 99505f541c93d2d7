"""Feature extraction behind functools.lru_cache(maxsize=64): the cache
fills during the first steps (512 KiB an entry), then evicts as fast as
it adds, the ids being drawn from a pool of 400. Warm-up, then flat."""
import functools
import random
import time
import numpy as np
import leakproof
import corpus_truth as truth


@functools.lru_cache(maxsize=64)
def features(sample_id):
    return np.random.default_rng(sample_id).standard_normal(1 << 16)     # 512 KiB


rnd = random.Random(0)
for i in range(truth.scale(140)):
    f = features(rnd.randrange(400))
    float(f.sum())
    time.sleep(0.05)
    leakproof.step()
    truth.step()

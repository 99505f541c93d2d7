"""An augmentation cache that lives for one epoch: filled during the
epoch (about 0.75 MiB a step), cleared when the epoch ends. 5 epochs of
30 steps. Not a leak."""
import time
import numpy as np
import leakproof
import corpus_truth as truth

rng = np.random.default_rng(0)
for epoch in range(5):
    cache = {}
    for k in range(truth.scale(30)):
        cache[k] = rng.standard_normal((96, 1024))      # 768 KiB
        time.sleep(0.05)
        leakproof.step()
        truth.step()
    del cache
    leakproof.epoch()

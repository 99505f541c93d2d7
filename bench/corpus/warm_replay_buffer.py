"""A reinforcement-learning replay buffer, a deque(maxlen=3000) of
transitions (about 10 KiB each): it fills for the first 40 % of the run,
then each new transition pushes out the oldest. Warm-up, then flat."""
import collections
import time
import numpy as np
import leakproof
import corpus_truth as truth

rng = np.random.default_rng(0)
n = truth.scale(150)
per_step = 50
buf = collections.deque(maxlen=int(n * 0.4) * per_step)
for i in range(n):
    for _ in range(per_step):
        obs = rng.standard_normal(1280).astype(np.float32)       # 5 KiB
        buf.append((obs, int(rng.integers(4)), float(rng.standard_normal()), obs * 0.5))
    batch = [buf[j] for j in rng.integers(0, len(buf), 64)]
    float(sum(b[2] for b in batch))
    time.sleep(0.04)
    leakproof.step()
    truth.step()

"""A training script that logs each step's statistics as a dict in a
module-level list `history` (with a per-layer list of gradient norms),
meant for a plot at the end: the list grows by one record a step."""
import time
import numpy as np
import leakproof
import corpus_truth as truth

history = []
rng = np.random.default_rng(0)
for i in range(truth.scale(300)):
    g = rng.standard_normal(64 * 1024)
    history.append({"step": i, "loss": float(g.mean()), "lr": 1e-3,
                    "grad_norms": [float(x) for x in g[:24]], "sample": g[:8192].copy()})   # 64 KiB array
    time.sleep(0.08)
    leakproof.step()
    truth.step()

"""Flat training for the first 60 % of the run; then an evaluation phase
that keeps every batch's logits for a confusion matrix it never
computes: a leak that starts late (768 KiB a step)."""
import time
import numpy as np
import leakproof
import corpus_truth as truth

rng = np.random.default_rng(0)
w = rng.standard_normal((512, 192)).astype(np.float32)
n = truth.scale(160)
outputs = []
kept = 0
for i in range(n):
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    logits = x @ w
    if i >= int(0.6 * n):
        outputs.append(logits)      # 1024 x 192 x 4 = 768 KiB
        kept += logits.nbytes
    time.sleep(0.04)
    leakproof.step()
    truth.step(kept)

"""A preprocessing loop whose temporaries vary from 4 to 48 MiB a step,
with a slow leak under them: 160 KiB a step kept in a list of
per-step statistics arrays."""
import time
import numpy as np
import leakproof
import corpus_truth as truth

rng = np.random.default_rng(0)
stats = []
kept = 0
tmp = None
for i in range(truth.scale(240)):
    mb = int(rng.integers(4, 48))
    tmp = np.ones(mb << 17)                 # mb MiB, every page touched
    stats.append(np.full(20480, tmp[0]))    # 160 KiB
    kept += stats[-1].nbytes
    if rng.random() < 0.5:
        tmp = None                          # held to the next step half the time
    time.sleep(0.03)
    leakproof.step()
    truth.step(kept)

"""A Trainer object that appends each step's batch summary to its own
attribute `self.history`: the classic leak through an instance."""
import time
import numpy as np
import leakproof
import corpus_truth as truth


class Trainer:
    def __init__(self):
        self.history = []
        self.rng = np.random.default_rng(0)

    def train_step(self, i):
        out = self.rng.standard_normal(8192)
        self.history.append((i, out))          # 64 KiB a step
        return float(out.mean())


t = Trainer()
for i in range(truth.scale(300)):
    t.train_step(i)
    time.sleep(0.08)
    leakproof.step()
    truth.step()

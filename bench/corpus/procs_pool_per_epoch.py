"""An evaluation that makes a new multiprocessing.Pool each epoch and
keeps a reference to it without close()/join(): 2 more forked workers
stay alive every epoch. Steps are printed."""
import multiprocessing as mp
import time
import numpy as np
import corpus_truth as truth


def score(x):
    return float(np.tanh(np.arange(1000) * x).sum())


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    pools = []
    step = 0
    for epoch in range(truth.scale(10, 4)):
        pool = ctx.Pool(2)
        pools.append(pool)                       # the bug: never closed
        for k in range(8):
            pool.map(score, range(50))
            time.sleep(0.08)
            step += 1
            print("epoch %d step %d" % (epoch, step), flush=True)
            truth.step()
    for p in pools:
        p.terminate()
        p.join()

"""Feature extraction with multiprocessing.Pool (fork): the parent holds
a large list of Python tuples, the workers read it by index. Reading
touches reference counts, so the 3 workers copy the parent's pages as
they go, at most once each. Results come back per chunk (a step)."""
import multiprocessing as mp
import time
import leakproof
import corpus_truth as truth

ROWS = [(float(i), float(i) * 0.5, "row-%d" % i) for i in range(truth.scale(400000, 40000))]


def featurize(span):
    lo, hi = span
    s = 0.0
    for r in ROWS[lo:hi]:
        s += r[0] * r[1] + len(r[2])
    time.sleep(0.04)
    return s


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    chunk = 2000
    spans = [(lo, lo + chunk) for lo in range(0, len(ROWS), chunk)]
    with ctx.Pool(3) as pool:
        for _ in range(2):
            for s in pool.imap(featurize, spans):
                leakproof.step()
                truth.step()

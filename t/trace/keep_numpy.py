"""
keep_numpy.py — a Python job for the tracer's test: grow_step() keeps a numpy
array each step (the line marked KEEP below) among short-lived arrays made by
churn(). Prints KEPT_BYTES=<bytes the kept arrays hold> and KEEP_LINE=<line>.
"""
import sys

import numpy as np

keep = []


def grow_step(i):
    keep.append(np.ones(25000 + i % 1000))  # KEEP


def churn():
    for _ in range(20):
        np.zeros(30000).sum()


def main():
    for i in range(400):
        grow_step(i)
        churn()
    with open(__file__) as f:
        line = next(n for n, text in enumerate(f, 1) if text.rstrip().endswith("# KEEP"))
    print("KEPT_BYTES=%d" % sum(a.nbytes for a in keep))
    print("KEEP_LINE=%d" % line)
    sys.stdout.flush()


main()

#!/usr/bin/env python3
"""
census_oom.py — a job that keeps a numpy array a step in a module global
list until something ends it: the OOM flight recorder's census case
(docs/internals/growth-kinds.md). Run under a memory budget, it is
budget-killed (or OOM-killed) with the census of its objects stored.

    census_oom.py [KIB [SLEEP]]   KIB KiB kept a step (default 512), SLEEP
                                  seconds between steps (default 0.02)

Marks a step after each array. Units: KiB, seconds.
"""
import sys
import time

import numpy as np

import leakproof

kib = int(sys.argv[1]) if len(sys.argv) > 1 else 512
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
kept = []
while True:
    kept.append(np.ones(kib * 1024 // 8))     # touched: resident
    leakproof.step()
    time.sleep(pause)

"""
corpus_truth.py: what a corpus workload tells the accuracy harness
(bench/accuracy) about itself, beside what it tells leakproof.

leakproof.step() marks a step for leakproof; step() here writes the same
step's time (CLOCK_MONOTONIC, the clock the harness samples /proc with)
to the file named by $CORPUS_TRUTH, so the harness can put its own
measurements of the job on the job's steps. `retained` is what the
workload knows it keeps for good by then, in bytes (a leak's own count),
when it knows it.

Outside the harness ($CORPUS_TRUTH unset) everything here does nothing,
and the workloads run alone: `/usr/bin/python3 bench/corpus/anon_numpy_history.py`.

Also: scale() (CORPUS_SCALE, to shorten a run), data_dir() (where
prepared inputs live), shm_prefix() (names under /dev/shm the harness
sums and removes), prepared() (make the inputs of --prepare).
"""
import os
import sys
import time

_path = os.environ.get("CORPUS_TRUTH")
_out = None
_n = 0


def step(retained=None):
    """One step ended; `retained`: bytes kept for good so far, if known."""
    global _out, _n
    _n += 1
    if not _path:
        return
    if _out is None:
        _out = open(_path, "a", buffering=1)
    _out.write("%.6f %d %s %d\n" % (time.monotonic(), _n, "-" if retained is None else int(retained),
                                    os.getpid()))


def scale(n, least=8):
    """n steps (or items) scaled by $CORPUS_SCALE, at least `least`."""
    return max(least, int(round(n * float(os.environ.get("CORPUS_SCALE", "1")))))


def data_dir():
    d = os.environ.get("CORPUS_DATA") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..", "build", "corpus-data")
    os.makedirs(d, exist_ok=True)
    return d


def scratch_dir():
    """A directory of this run's own files (the harness removes it)."""
    d = os.environ.get("CORPUS_SCRATCH") or os.path.join(data_dir(), "scratch-%d" % os.getpid())
    os.makedirs(d, exist_ok=True)
    return d


def shm_prefix():
    """The prefix of every name this run makes under /dev/shm."""
    return os.environ.get("CORPUS_SHM_PREFIX") or "lpcorpus-%d" % os.getpid()


def want_prepare():
    return "--prepare" in sys.argv[1:]

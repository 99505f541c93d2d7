"""leakproof.pytest_plugin — a pytest check that a function does not leak.

A test hands a function to the ``leakproof_check`` fixture; the fixture calls
it repeatedly in the test's own process, one step per call, measures the
process's memory after each call, and has the ``leakproof judge`` command
judge the series with leakproof's own statistics — the judgment a
``leakproof run`` summary makes of a job's steps: warm-up skipped, growth
per call as a Theil–Sen slope with its 95% interval, Mann–Kendall
significance, a floor that must rise, growth that must not slow down. A
leaking function fails the test with that summary; one that only fills a
cache or warms up passes::

    def test_step_does_not_leak(leakproof_check):
        model, batch = make_model(), make_batch()
        leakproof_check(lambda: train_step(model, batch), steps=200)

Registered through the ``pytest11`` entry point when leakproof is installed
with pip; from a source tree, ``pytest -p leakproof.pytest_plugin`` with
``python/`` on the path.

Memory is the process's resident set (``measure="rss"``, /proc/self/statm:
cheap enough for every call), its proportional set size (``"pss"``,
/proc/self/smaps_rollup), or PyTorch's CUDA allocator
(``"cuda"``, ``torch.cuda.memory_allocated()``). Units: bytes. The garbage
collector runs after every call (``collect=True``) so memory held only by
unreachable cycles does not count as growth; the objects that exist before
the first call are frozen (gc.freeze) meanwhile, so that collection costs
microseconds, not the tens of milliseconds a full one takes with PyTorch
loaded; not when the test process has frozen objects itself (gc.unfreeze
would thaw those too): then every collection is a full one. With glibc, malloc_trim(0) after every call gives freed heap back
to the kernel: without it, memory freed earlier in the process (a previous
test's) is reused by the function under test and hides its growth from the
resident set.

The binary is found as $LEAKPROOF_BIN, else the build/ of the source tree
this file lies in, else <sys.prefix>/bin/leakproof (a pip install), else
PREFIX/bin/leakproof for the copy under PREFIX/lib/leakproof/python, else
``leakproof`` on PATH. Standard library and pytest only.
"""

import ctypes
import gc
import os
import shutil
import subprocess
import sys
import warnings

import pytest

_PAGE = os.sysconf("SC_PAGE_SIZE")
_EXIT_NO_LEAK, _EXIT_LEAK, _EXIT_INCONCLUSIVE = 0, 1, 2


class LeakproofInconclusive(UserWarning):
    """The judgment could say neither leak nor no leak (too few calls)."""


def _binary():
    env = os.environ.get("LEAKPROOF_BIN")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "..", os.environ.get("LEAKPROOF_BUILD", "build"), "leakproof"),
                  os.path.join(sys.prefix, "bin", "leakproof"),
                  # the copy a job gets on PYTHONPATH: PREFIX/lib/leakproof/python/leakproof
                  os.path.join(here, "..", "..", "..", "..", "bin", "leakproof")]
    for c in candidates:
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which("leakproof")
    if found:
        return found
    raise RuntimeError("leakproof_check: no leakproof binary (set LEAKPROOF_BIN, or install leakproof)")


def _rss():
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


def _pss():
    with open("/proc/self/smaps_rollup", "rb") as f:
        for line in f:
            if line.startswith(b"Pss:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no Pss line in /proc/self/smaps_rollup")


def _cuda():
    import torch
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


_MEASURES = {"rss": _rss, "pss": _pss, "cuda": _cuda}


def _malloc_trim():
    """glibc's malloc_trim(0), or a function doing nothing elsewhere."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = [ctypes.c_size_t]
    return lambda: trim(0)


def judge(series, min_growth=None):
    """Judge a list of byte counts (one per step) with `leakproof judge`.

    Returns (verdict, text): verdict "leak", "no-leak" or "inconclusive",
    text the judgment as `leakproof judge` prints it."""
    argv = [_binary(), "judge"]
    if min_growth is not None:
        argv += ["--min-growth", str(int(min_growth))]
    data = "".join("%d %d\n" % (i + 1, int(v)) for i, v in enumerate(series))
    r = subprocess.run(argv, input=data, capture_output=True, text=True, timeout=120)
    verdicts = {_EXIT_NO_LEAK: "no-leak", _EXIT_LEAK: "leak", _EXIT_INCONCLUSIVE: "inconclusive"}
    if r.returncode not in verdicts:
        raise RuntimeError("leakproof judge failed (exit %d): %s" % (r.returncode, r.stderr.strip()))
    return verdicts[r.returncode], r.stdout


def check_no_leak(fn, steps=200, measure="rss", collect=True, min_growth=None, inconclusive="warn"):
    """Call fn() `steps` times, measuring memory after each call, and fail
    the current test when leakproof judges the series a leak.

    measure: "rss", "pss" or "cuda". min_growth: bytes over the judged
    window that matter (default leakproof's: 1 MiB and 1% of the baseline).
    inconclusive: "warn" (a LeakproofInconclusive warning), "fail" or
    "pass". Returns the judgment's text."""
    if measure not in _MEASURES:
        raise ValueError("measure must be one of %s" % ", ".join(sorted(_MEASURES)))
    if inconclusive not in ("warn", "fail", "pass"):
        raise ValueError('inconclusive must be "warn", "fail" or "pass"')
    read = _MEASURES[measure]
    trim = _malloc_trim()
    series = []
    # gc.unfreeze() thaws the whole permanent generation: objects the test
    # process froze itself would be thawed with ours, so then nothing is
    # frozen here (each collection is a full one, slower, same series)
    freeze = collect and hasattr(gc, "freeze") and gc.get_freeze_count() == 0
    if collect:
        gc.collect()
    if freeze:
        gc.freeze()
    try:
        for _ in range(steps):
            fn()
            if collect:
                gc.collect()
            trim()
            series.append(read())
    finally:
        if freeze:
            gc.unfreeze()
    verdict, text = judge(series, min_growth)
    name = getattr(fn, "__qualname__", repr(fn))
    summary = "leakproof: %s over %d calls (one step per call, measure %s)\n%s" % (name, steps, measure, text)
    if verdict == "leak" or (verdict == "inconclusive" and inconclusive == "fail"):
        pytest.fail(summary, pytrace=False)
    if verdict == "inconclusive" and inconclusive == "warn":
        warnings.warn(LeakproofInconclusive(summary))
    return text


@pytest.fixture
def leakproof_check():
    """check(fn, steps=200, measure="rss", collect=True, min_growth=None,
    inconclusive="warn"): fail the test when calling fn repeatedly leaks."""
    return check_no_leak

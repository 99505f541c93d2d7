"""
`leakproof run` measures the whole process tree, and by default (PSS) counts
memory that forked workers share once, not once per worker.
"""
import re

import pytest

BUFFER_MIB = 256
WORKERS = 4


@pytest.mark.slow
@pytest.mark.parametrize("options", [[], ["--no-cgroup"]], ids=["cgroup", "no-cgroup"])
def test_forked_workers_sharing_a_buffer_count_it_once(lp, options):
    # Workers forked after the job started must be seen: in its cgroup (where
    # the machine gives it one) and by the /proc walk (--no-cgroup).
    r = lp.run([lp.py, lp.workload("shared_workers.py"), "--buffer-mib", str(BUFFER_MIB),
                "--workers", str(WORKERS), "--seconds", "4"],
               "--interval", "50ms", "--status-line", *options, timeout=120)
    assert r.rc == 0, r
    buffer_bytes = BUFFER_MIB * lp.MIB

    pss = lp.report()                      # the run's own measure: pss
    assert pss["measure"] == "pss"
    rss = lp.report(measure="rss")
    assert rss["measure"] == "rss"

    # RSS sums the buffer once per process: five times.
    assert rss["peak_bytes"] > (WORKERS + 1) * buffer_bytes * 0.95, lp.describe(rss)
    # PSS splits each shared page between its sharers: about once, plus the
    # interpreters (a few tens of MiB for five Python processes).
    assert pss["peak_bytes"] >= buffer_bytes * 0.98, lp.describe(pss)
    assert pss["peak_bytes"] < buffer_bytes + 128 * lp.MIB, lp.describe(pss)
    assert pss["peak_bytes"] < rss["peak_bytes"] / 3

    # The live status line shows how many processes the tree had.
    procs = [int(n) for n in re.findall(r"\| (\d+) procs", r.err)]
    assert procs, f"no status line with a process count on stderr:\n{r.err[-2000:]}"
    assert max(procs) == WORKERS + 1, procs
    # ... and the store knows it too
    assert pss["max_processes"] == WORKERS + 1, pss["max_processes"]

"""
Restarts: the practitioners' "one epoch per process in a bash loop, resume
from the checkpoint", made automatic. A real PyTorch job that leaks
(examples/resume_train.py --leak-mib) finishes under a budget it would blow
through, by being stopped at the soft limit (or killed by the kernel) and
started again from its checkpoint, with the same final weights as a run that
never stopped. Crash loops end at --max-restarts; a Ctrl-C while leakproof
waits to restart leaves nothing behind.
"""
import os
import re
import signal
import sqlite3
import time
import uuid

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = "examples/resume_train.py"
CHECKSUM = re.compile(r"^final weights sha256 ([0-9a-f]{64})$", re.M)


def example(lp, *args, checkpoint):
    return [lp.py, str(lp.repo / EXAMPLE), "--checkpoint", str(lp.dir / checkpoint), *args]


def checksum(out):
    m = CHECKSUM.search(out)
    assert m, f"no checksum line in the job's output:\n{out[-2000:]}"
    return m.group(1)


def uninterrupted(lp, *args):
    r = lp.run(example(lp, *args, checkpoint="ref.pt"), "-q", timeout=300)
    assert r.rc == 0, r
    return checksum(r.out)


def job_cgroup(lp):
    r = lp.run(["true"], timeout=60)
    assert r.rc == 0, r
    return lp.report()["run"]["cgroup_mode"]


def recorded_steps(lp):
    with sqlite3.connect(lp.store) as db:
        return [s for (s,) in db.execute("SELECT step FROM steps WHERE run_id = "
                                         "(SELECT max(id) FROM runs) ORDER BY t")]


def test_at_limit_finishes_a_leaking_job_with_the_same_result(lp):
    # 2 MiB a step on a ~235 MiB baseline: 300 steps would need ~940 MiB
    args = ("--leak-mib", "2", "--epochs", "5", "--steps-per-epoch", "60")
    want = uninterrupted(lp, *args)

    r = lp.run(example(lp, *args, checkpoint="ck.pt"), "--max-mem", "400M", "--restart", "at-limit",
               "--max-restarts", "20", "--grace", "30s", timeout=600)
    assert r.rc == 0, r
    assert checksum(r.out) == want
    assert "resumed from" in r.out and "restart 1" in r.out   # LEAKPROOF_RESTART reached the job
    rep = lp.report()
    segs = rep["segments"]
    assert len(segs) >= 3, segs
    for g in segs[:-1]:
        assert (g["cause"], g["restart"]) == ("stop-requested", "at-limit"), g
        assert "reached the soft limit of 360 MiB" in g["evidence"] and "exited 0" in g["evidence"], g
        assert g["memory_bytes"] < 400 * lp.MIB, g
    assert segs[-1]["cause"] == "exit" and segs[-1]["restart"] is None
    assert rep["restarts"] == len(segs) - 1
    # memory starts afresh in every process: that is the point
    for g in segs[1:]:
        assert g["memory_start_bytes"] < segs[0]["memory_bytes"] - 60 * lp.MIB, segs
    # step numbers continue across restarts: every step once, in order
    assert recorded_steps(lp) == list(range(1, 301))
    assert rep["peak_bytes"] < 400 * lp.MIB
    # judged on one process, where the leak is plain
    assert rep["judged_segment"] is not None
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert "restarted (at-limit)" in r.err and "stop-requested" in r.err


def test_every_epoch_with_a_step_regex(lp):
    args = ("--leak-mib", "1", "--epochs", "4", "--steps-per-epoch", "40")
    want = uninterrupted(lp, *args)
    r = lp.run(example(lp, *args, checkpoint="ck.pt"), "--restart", "every=1",
               "--step-regex", r"^Epoch (\d+)/", timeout=600)
    assert r.rc == 0, r
    assert checksum(r.out) == want
    rep = lp.report()
    segs = rep["segments"]
    # one epoch per process: the job announces epoch k+1, is asked to stop,
    # resumes, announces it again (not a new step) and trains it
    assert len(segs) == 4, segs
    assert [g["cause"] for g in segs] == ["stop-requested"] * 3 + ["exit"], segs
    assert all(g["restart"] == "every" for g in segs[:-1])
    assert recorded_steps(lp) == [1, 2, 3, 4]
    for g in segs[1:]:
        assert g["memory_start_bytes"] < segs[0]["memory_bytes"] - 20 * lp.MIB, segs


def test_on_oom_resumes_after_kernel_kills(lp):
    if job_cgroup(lp) == "none":
        pytest.skip("no memory cgroup for the job here: the kernel cannot enforce --max-mem")
    args = ("--leak-mib", "3", "--epochs", "3", "--steps-per-epoch", "50", "--checkpoint-every", "7")
    want = uninterrupted(lp, *args)
    r = lp.run(example(lp, *args, checkpoint="ck.pt"), "--max-mem", "400M", "--restart", "on-oom",
               "--max-restarts", "20", timeout=600)
    assert r.rc == 0, r
    # SIGKILLed mid-step any number of times, resumed from the last
    # checkpoint: still the same weights
    assert checksum(r.out) == want
    segs = lp.report()["segments"]
    assert len(segs) >= 2, segs
    for g in segs[:-1]:
        assert (g["cause"], g["restart"]) == ("oom-kill", "on-oom"), g
    assert segs[-1]["cause"] == "exit"


@pytest.mark.valgrind
def test_crash_loop_stops_at_max_restarts(lp):
    t0 = time.monotonic()
    r = lp.run([lp.py, lp.workload("ends.py"), "say", "1", "MemoryError"], "--restart", "on-oom",
               "--max-restarts", "2", timeout=120)
    took = time.monotonic() - t0
    assert r.rc == 1, r
    segs = lp.report()["segments"]
    assert [g["cause"] for g in segs] == ["host-alloc-fail"] * 3, segs
    assert "not restarting the job after host-alloc-fail" in r.err
    assert "--max-restarts 2" in r.err
    # it made progress (a step), so no backoff: a job that dies before its
    # first step waits 1 s, then 2 s (next test)
    assert took < 30, took


def test_sigint_while_waiting_to_restart_leaves_nothing(lp):
    marker = f"lp-backoff-{uuid.uuid4().hex}"
    # dies before its first step: leakproof backs off before restarting
    job = ["sh", "-c", f"echo MemoryError >&2; exit 1 # {marker}"]
    proc = lp.start(job, "--restart", "on-oom", "--max-restarts", "10")
    lp.read_until(proc.stderr, b"waiting 1.0 s before restarting it")
    lp.read_until(proc.stderr, b"waiting 2.0 s before restarting it")   # doubles
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    proc.wait(timeout=10)
    assert time.monotonic() - t0 < 2
    assert proc.returncode == 128 + signal.SIGINT, rest
    assert b"stopped by SIGINT while waiting to restart" in rest
    assert lp.procs_with(marker) == []
    left = [d for d, _, _ in os.walk("/sys/fs/cgroup") if f"leakproof-{proc.pid}-" in d]
    assert left == [], f"job cgroups left behind: {left}"
    segs = lp.report()["segments"]
    assert len(segs) == 2 and all(g["cause"] == "host-alloc-fail" for g in segs), segs


def test_at_limit_gives_up_when_the_limit_comes_before_the_first_step(lp):
    job = [lp.py, "-c", "import time; x = bytearray(60 << 20); time.sleep(30)"]
    r = lp.run(job, "--max-mem", "200M", "--soft-limit", "30M", "--restart", "at-limit", "--grace", "5s",
               timeout=60)
    assert r.rc == 128 + 15, r   # it did not handle SIGTERM
    assert "reached the soft limit before its first step" in r.err, r
    segs = lp.report()["segments"]
    assert len(segs) == 1 and segs[0]["cause"] == "stop-requested", segs

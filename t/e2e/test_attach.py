"""
`leakproof attach PID`: a job started without leakproof (t/workloads/
attach_job.py: a main process, a pool of worker processes, "step N" lines in
a log file) watched by pid, its steps read from its log; the run stored and
shown like any other; detaching leaves the job running; a budget stops it;
a rotated log is followed; pids that cannot be watched are refused.
"""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

STEP_RE = r"^step (\d+)"


def start_job(lp, mode, steps, workers=3, step_s=0.05):
    """The job, started by the test (not by leakproof); waits until it has
    written "ready" to its log. (Popen, log path)."""
    log = Path(lp.dir) / f"job-{mode}.log"
    proc = subprocess.Popen([lp.py, str(lp.workload("attach_job.py")), mode, str(log), str(steps),
                             str(workers), str(step_s)], cwd=lp.dir, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=lp.env(), start_new_session=True)
    end = time.monotonic() + 20
    while not (log.exists() and "ready" in log.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the job did not start"
        time.sleep(0.02)
    return proc, log


def end_job(proc):
    """Whatever is left of the job: its session, killed."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate(timeout=10)


def attach(lp, pid, *options):
    """`leakproof attach` started, not waited for; returns once it has said
    it is attached (stderr read so far is kept on the Popen as .said)."""
    argv = [lp.binary, "attach", "--store", lp.store, *options, str(pid)]
    proc = subprocess.Popen(argv, cwd=lp.dir, env=lp.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lp._started.append(proc)
    proc.said = lp.read_until(proc.stderr, b"attached to pid", timeout=20)
    return proc


def finish(proc, timeout=30):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, proc.said.decode(errors="replace") + err.decode(errors="replace")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_attach_judges_a_leaking_pool_from_its_log(lp):
    job, log = start_job(lp, "leak", 60)
    try:
        a = attach(lp, job.pid, "--log", log, "--step-regex", STEP_RE)
        Path(f"{log}.go").touch()
        rc, err = finish(a)
        job_out, _ = job.communicate(timeout=20)
    finally:
        end_job(job)
    assert rc == 0, err
    truth = lp.expected_growth(job_out.decode())
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep) + err
    assert rep["steps"] == 60, err
    growth = rep["growth_bytes_per_step"]
    assert abs(growth - truth) <= 0.2 * truth, f"growth {growth:.0f} B/step, truth {truth}; {err}"
    assert rep["max_processes"] >= 4, "the workers were not sampled"
    run = rep["run"]
    assert run["status"] == "ended" and run["command"][1].endswith("attach_job.py")
    assert any(e["kind"] == "attach" and f"pid {job.pid} " in e["detail"] for e in rep["events"]), rep["events"]
    seg = rep["segments"][-1]
    assert seg["cause"] == "ended" and "status unknown" in seg["evidence"], seg
    # shown like any other run, in every format
    text = lp.report(fmt="text")
    assert f"attached  to pid {job.pid} (python" in text and "before leakproof came" in text, text
    assert "ended, exit status unknown" in text, text
    for fmt in ("md", "csv", "html", "junit"):
        assert lp.report(fmt=fmt).strip()
    ls = lp.ls()
    assert " ended " in ls and "leak" in ls, ls
    assert lp.ls("json")[0]["status"] == "ended"


def test_attach_bounded_cache_is_no_leak(lp):
    job, log = start_job(lp, "bounded", 60)
    try:
        a = attach(lp, job.pid, "--log", log, "--step-regex", STEP_RE)
        Path(f"{log}.go").touch()
        rc, err = finish(a)
        job.communicate(timeout=20)
    finally:
        end_job(job)
    assert rc == 0, err
    rep = lp.report()
    assert rep["verdict"] == "no-leak", lp.describe(rep) + err
    assert rep["steps"] == 60
    assert 'failures="0"' in lp.report(fmt="junit")   # "status unknown" is no failure


def test_sigint_detaches_and_leaves_the_job_running(lp):
    job, log = start_job(lp, "leak", 0, step_s=0.1)
    try:
        a = attach(lp, job.pid, "--log", log, "--step-regex", STEP_RE, "--max-mem", "4G")
        Path(f"{log}.go").touch()
        time.sleep(1.5)
        a.send_signal(signal.SIGINT)
        rc, err = finish(a, timeout=15)
        assert rc == 0, err
        assert "detached" in err, err
        time.sleep(0.5)
        assert alive(job.pid), "the job was ended by detaching"
        n = log.read_text().count("step ")
        time.sleep(0.5)
        assert log.read_text().count("step ") > n, "the job stopped making steps"
    finally:
        end_job(job)
    rep = lp.report()
    assert rep["run"]["status"] == "detached", rep["run"]
    assert rep["steps"] >= 5, lp.describe(rep)
    assert rep["segments"][-1]["cause"] == "detached"
    assert "detached" in lp.ls()


def test_budget_stops_a_leaking_job_before_the_limit(lp):
    job, log = start_job(lp, "leak", 0, workers=4, step_s=0.02)
    try:
        a = attach(lp, job.pid, "--log", log, "--step-regex", STEP_RE, "--max-mem", "150M",
                   "--soft-limit", "100M", "--grace", "5s")
        Path(f"{log}.go").touch()
        rc, err = finish(a, timeout=30)
        job.wait(timeout=20)   # its workers, orphaned, may linger: end_job ends them
    finally:
        end_job(job)
    assert rc == 0, err
    assert job.returncode == -signal.SIGTERM, (job.returncode, err)
    rep = lp.report()
    assert rep["peak_bytes"] < 150 * lp.MIB, lp.describe(rep)
    seg = rep["segments"][-1]
    assert seg["cause"] == "stop-requested" and "soft limit" in seg["evidence"], seg
    assert any(e["kind"] == "stop-requested" for e in rep["events"])


def test_a_rotated_and_truncated_log_is_followed(lp):
    job, log = start_job(lp, "rotate", 60)
    try:
        a = attach(lp, job.pid, "--log", log, "--step-regex", STEP_RE)
        Path(f"{log}.go").touch()
        rc, err = finish(a)
        job.communicate(timeout=20)
    finally:
        end_job(job)
    assert rc == 0, err
    rep = lp.report()
    assert rep["steps"] == 60, lp.describe(rep) + err
    assert rep["verdict"] == "leak"
    kinds = [e["detail"] for e in rep["events"] if e["kind"] == "log"]
    assert any("rotated" in d for d in kinds) and any("truncated" in d for d in kinds), kinds


def test_a_pid_used_again_is_not_followed(lp):
    """The job ends and its pid is given to another program at once (as
    root, through ns_last_pid): attach records the end and stops, rather
    than watching the newcomer."""
    if os.geteuid() != 0 or not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        pytest.skip("choosing the next pid needs root")
    job = subprocess.Popen([lp.py, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, cwd=lp.dir)
    a = attach(lp, job.pid)
    pid = job.pid
    job.stdin.close()
    job.wait()
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    other = subprocess.Popen(["sleep", "20"])
    try:
        rc, err = finish(a, timeout=10)
        assert rc == 0, err
        if other.pid != pid:
            pytest.skip(f"pid {pid} was not given again (got {other.pid})")
        assert alive(other.pid), "the newcomer was signalled"
        rep = lp.report()
        assert rep["run"]["status"] == "ended", rep["run"]
        assert rep["run"]["command"][0] == lp.py
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("what", ["none", "pid1", "self", "ancestor", "zombie", "word"])
def test_pids_that_cannot_be_watched_are_refused(lp, what):
    zombie = None
    if what == "none":
        with open("/proc/sys/kernel/pid_max") as f:   # pids are below it
            pid, said = f.read().strip(), "no process with pid"
    elif what == "pid1":
        pid, said = "1", "pid 1"
    elif what == "self":
        pid, said = str(os.getpid()), "ancestor of leakproof"
    elif what == "ancestor":
        pid, said = str(os.getppid()), "ancestor of leakproof"
    elif what == "zombie":
        zombie = subprocess.Popen(["true"])
        end = time.monotonic() + 10
        while alive(zombie.pid):
            assert time.monotonic() < end
            time.sleep(0.02)
        pid, said = str(zombie.pid), "zombie"
    else:
        pid, said = "12abc", "is not a process id"
    r = lp.cmd(["attach", "--store", lp.store, pid], timeout=30)
    if zombie:
        zombie.wait()
    assert r.rc == 124, r
    assert said in r.err, r.err
    assert not Path(lp.store).exists() or "attach" not in lp.ls()


def test_options_attach_cannot_honour_are_refused(lp):
    job, log = start_job(lp, "leak", 1)
    try:
        for opts, said in ((["--restart", "on-oom"], "did not start the job"),
                           (["--max-restarts", "3"], "did not start the job"),
                           (["--trace"], "did not start the job"),
                           (["--step-regex", STEP_RE], "needs --log"),
                           (["--log", str(log)], "needs --step-regex")):
            r = lp.cmd(["attach", "--store", lp.store, *opts, job.pid], timeout=30)
            assert r.rc == 124 and said in r.err, (opts, r)
    finally:
        end_job(job)


def test_another_users_process_is_refused(lp):
    """As nobody, the job (root's) cannot be read: refused, clearly."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run leakproof as another user")
    job, log = start_job(lp, "leak", 1)
    try:
        argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", lp.binary, "attach",
                "--store", "/nonexistent/lp.db", str(job.pid)]
        p = subprocess.run(argv, capture_output=True, timeout=30, cwd="/")
    finally:
        end_job(job)
    assert p.returncode == 125, p
    err = p.stderr.decode()
    assert "needs the rights to read its memory" in err and "Permission denied" in err, err


def test_without_steps_growth_is_judged_per_second(lp):
    job, log = start_job(lp, "leak", 160, step_s=0.04)
    try:
        a = attach(lp, job.pid)
        Path(f"{log}.go").touch()
        rc, err = finish(a)
        job.communicate(timeout=20)
    finally:
        end_job(job)
    assert rc == 0, err
    rep = lp.report()
    assert rep["x_unit"] == "s" and rep["steps"] == 0, lp.describe(rep)
    assert rep["verdict"] == "leak", lp.describe(rep) + err


def own_memory_cgroup(name):
    """A memory cgroup below ours for the job (v1 memory, else v2 with the
    memory controller), or a skip when this machine does not let us make
    one. Its directory."""
    with open("/proc/self/cgroup") as f:
        lines = f.read().splitlines()
    v1 = [l.split(":", 2)[2] for l in lines if l.split(":", 2)[1] == "memory"]
    v2 = [l.split(":", 2)[2] for l in lines if l.startswith("0::")]
    if v1:
        base, limit = "/sys/fs/cgroup/memory" + v1[0], "memory.limit_in_bytes"
    elif v2:
        base, limit = "/sys/fs/cgroup" + v2[0], "memory.max"
    else:
        pytest.skip("no memory cgroup here")
    d = Path(base.rstrip("/")) / name
    try:
        d.mkdir()
    except OSError as e:
        pytest.skip(f"cannot make a cgroup below ours: {e}")
    if not (d / limit).exists():
        d.rmdir()
        pytest.skip("no memory controller in a cgroup we make")
    return d, d / limit


@pytest.mark.parametrize("evidence", ["cgroup", "kernel-log"])
def test_an_oom_kill_in_the_jobs_own_cgroup_is_its_recorded_end(lp, evidence):
    """The job alone in a memory cgroup of its own (as a scheduler would
    put it) with a limit: attach measures that cgroup, and when the kernel's
    OOM killer ends a worker and the job with it, the end is recorded as
    oom-kill from the cgroup's counter, not "status unknown"; with
    --no-cgroup, from the kernel's log, which names the worker."""
    if evidence == "kernel-log":
        try:
            os.close(os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK))
        except OSError as e:
            pytest.skip(f"the kernel's log is not readable here: {e}")
    d, limit = own_memory_cgroup(f"lp-attach-test-{os.getpid()}")
    try:
        limit.write_text(str(160 * lp.MIB))
        log = Path(lp.dir) / "job.log"
        job = subprocess.Popen([lp.py, str(lp.workload("attach_job.py")), "leak", str(log), "0", "4", "0.01"],
                               cwd=lp.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=lp.env(),
                               start_new_session=True,
                               preexec_fn=lambda: (d / "cgroup.procs").write_text(str(os.getpid())))
        end = time.monotonic() + 20
        while not (log.exists() and "ready" in log.read_text()):
            assert job.poll() is None and time.monotonic() < end, job.communicate()
            time.sleep(0.02)
        try:
            opts = ["--no-cgroup"] if evidence == "kernel-log" else []
            a = attach(lp, job.pid, "--log", log, "--step-regex", STEP_RE, *opts)
            assert (f"its cgroup '{d}'" in a.said.decode()) == (evidence == "cgroup"), a.said
            Path(f"{log}.go").touch()
            rc, err = finish(a, timeout=30)
            job.wait(timeout=20)
        finally:
            end_job(job)
        assert rc == 0, err
        rep = lp.report()
        seg = rep["segments"][-1]
        if evidence == "cgroup":
            assert rep["run"]["cgroup_mode"] in ("v1", "v2"), rep["run"]
            assert seg["cause"] == "oom-kill" and "oom_kill rose" in seg["evidence"], (seg, err)
        else:
            assert seg["cause"] == "oom-kill" and "the kernel's log:" in seg["evidence"], (seg, err)
            assert "Killed process" in seg["evidence"] and f"Killed process {job.pid} " not in seg["evidence"]
        assert rep["peak_bytes"] < 200 * lp.MIB
        assert "ended by the OOM killer" in lp.report(fmt="junit")
    finally:
        procs = d / "cgroup.procs"
        for _ in range(50):
            pids = procs.read_text().split() if procs.exists() else []
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        d.rmdir()


def test_a_cgroup_that_is_not_the_jobs_own_is_not_measured(lp):
    """The job's cgroup with a cgroup below it, and the shared cgroup the
    tests run in: neither is taken for the job's own (its usage would count
    what is not the job's); the job is measured by its tree."""
    d, _ = own_memory_cgroup(f"lp-attach-test-{os.getpid()}")
    sub = d / "other"
    job = None
    try:
        sub.mkdir()
        log = Path(lp.dir) / "job.log"
        job = subprocess.Popen([lp.py, str(lp.workload("attach_job.py")), "leak", str(log), "1", "1"],
                               cwd=lp.dir, env=lp.env(), start_new_session=True, stdout=subprocess.DEVNULL,
                               preexec_fn=lambda: (d / "cgroup.procs").write_text(str(os.getpid())))
        while not (log.exists() and "ready" in log.read_text()):
            assert job.poll() is None
            time.sleep(0.02)
        a = attach(lp, job.pid)
        a.send_signal(signal.SIGINT)
        rc, err = finish(a, timeout=15)
        assert rc == 0 and "has cgroups below it" in err, err
        assert lp.report()["run"]["cgroup_mode"] == "none"
    finally:
        if job:
            end_job(job)
        for _ in range(50):
            if not (d / "cgroup.procs").read_text().split():
                break
            time.sleep(0.05)
        sub.rmdir()
        d.rmdir()


def test_attach_sends_no_signal_to_a_growing_job(lp):
    """leakproof wakes the dormant census hook of a job it started with
    SIGURG once memory grows (for 8 s or more); a job it attached to has no
    such hook, and may handle SIGURG itself: nothing is sent to it."""
    job, log = start_job(lp, "leak", 180, step_s=0.06)
    try:
        a = attach(lp, job.pid, "--log", log, "--step-regex", STEP_RE)
        Path(f"{log}.go").touch()
        rc, err = finish(a, timeout=60)
        job.communicate(timeout=20)
    finally:
        end_job(job)
    assert rc == 0, err
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep) + err
    assert not Path(f"{log}.urg").exists(), Path(f"{log}.urg").read_text()

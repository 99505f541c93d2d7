"""The job never outlives its supervisor unsupervised (issue 16, items 1 and 6).

Real processes: a job whose main process and two workers ignore SIGTERM.
`kill -9` of the supervisor must leave no process of the job and no cgroup
of it (the guard ends them); a forwarded stop signal is followed by SIGKILL
after --grace, and a second one kills at once. With the guard killed too,
the next leakproof that opens the store ends what the run recorded (its
cgroup, its process group, the processes that left the group), but never
a process a store names that no leakproof started. Every wait is bounded;
no sleep is an assertion.
"""
import os
import shlex
import signal
import sqlite3
import subprocess
import textwrap
import time

import pytest
from conftest import WRAPPER

JOB = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for i in range(2):
        if os.fork() == 0:
            while True:
                time.sleep(0.1)
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
""")


SETSID_JOB = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        os.setsid()          # out of the job's process group: kill(-pgid) misses it
        if os.fork() == 0:   # and a child in its own new group
            while True:
                time.sleep(0.1)
        while True:
            time.sleep(0.1)
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
""")


def write_job(lp, marker, text=JOB):
    path = lp.dir / f"{marker}.py"
    path.write_text(text)
    return [lp.py, str(path)]


def job_procs(lp, marker):
    """The job's processes: those with marker in their command line that
    are not leakproof (the supervisor, its guard)."""
    out = []
    for pid in lp.procs_with(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if not argv0.endswith(b"leakproof"):
            out.append(pid)
    return out


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def job_cgroup_dirs(pid):
    """The directories of the cgroups leakproof made for process pid."""
    dirs = []
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "leakproof-" not in path.rsplit("/", 1)[-1]:
                continue
            if ctrls == "":
                dirs.append("/sys/fs/cgroup" + path)
            elif "memory" in ctrls.split(","):
                dirs.append("/sys/fs/cgroup/memory" + path)
    return dirs


def named_leakproof(lp, marker):
    """What `killall -9 leakproof` would kill of this test's run: the
    processes whose name is exactly leakproof."""
    out = []
    for pid in lp.procs_with(marker):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "leakproof":
                    out.append(pid)
        except OSError:
            pass
    return out


@pytest.mark.parametrize("killed", ["supervisor", "every process named leakproof"])
def test_kill_9_of_the_supervisor_ends_the_whole_job(lp, killed):
    """kill -9 of the supervisor, or `killall -9 leakproof`: the guard has a
    name of its own (leakproof-guard), so it is not among those killed by
    name, and ends the job."""
    marker = "orphan_job_kill9"
    proc = lp.start(write_job(lp, marker), "--no-status-line")
    lp.read_until(proc.stdout, b"ready")
    assert wait_for(lambda: len(job_procs(lp, marker)) == 3, 30), job_procs(lp, marker)
    main = min(job_procs(lp, marker))
    cgroups = job_cgroup_dirs(main)
    if killed == "supervisor":
        os.kill(proc.pid, signal.SIGKILL)
    else:
        victims = named_leakproof(lp, marker)
        assert proc.pid in victims, (proc.pid, victims)
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)
    try:
        assert wait_for(lambda: not lp.procs_with(marker), 30), \
            f"processes of the job outlived its supervisor: {lp.procs_with(marker)}"
    finally:
        for pid in job_procs(lp, marker):   # a failed test leaves no orphans either
            os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not any(os.path.exists(d) for d in cgroups), 30), \
        f"the job's cgroup outlived its supervisor: {cgroups}"
    listing = lp.ls()
    assert "interrupted" in listing and "running" not in listing, listing
    r = lp.run([lp.py, "-c", "pass"], "--no-status-line")   # a writer marks it in the store
    assert r.rc == 0, r
    with sqlite3.connect(lp.store) as db:
        statuses = dict(db.execute("SELECT id, status FROM runs"))
    assert statuses[1] == "interrupted", statuses


STEPPING = """
import leakproof, time
x = []
for i in range(100000):
    x.append(bytearray(1 << 20))
    leakproof.step()
    if i == 20:
        print("twenty", flush=True)
    time.sleep(0.02)
"""


def test_kill_9_without_a_cgroup_ends_what_left_the_process_group(lp):
    """Without a cgroup the guard ends the job's process group, and the
    processes of the job outside it (a worker that called setsid, and
    its child) that the supervisor told it of. They outlived the kill."""
    marker = "orphan_job_setsid"
    proc = lp.start(write_job(lp, marker, SETSID_JOB), "--no-status-line", "--no-cgroup")
    lp.read_until(proc.stdout, b"ready")
    assert wait_for(lambda: len(job_procs(lp, marker)) == 3, 30), job_procs(lp, marker)

    def sampled_all():
        # a timer sample that counted the three tells the guard of the two
        # outside the group right after it (and is in the store a second later)
        try:
            with sqlite3.connect(lp.store) as db:
                return (db.execute("SELECT max(nprocs) FROM samples").fetchone()[0] or 0) >= 3
        except sqlite3.OperationalError:
            return False
    assert wait_for(sampled_all, 60), "no sample counted the job's three processes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    try:
        assert wait_for(lambda: not job_procs(lp, marker), 30), \
            f"processes of the job outlived its supervisor: {job_procs(lp, marker)}"
    finally:
        for pid in job_procs(lp, marker):
            os.kill(pid, signal.SIGKILL)


def test_a_job_whose_supervisor_and_guard_were_killed_is_ended_by_the_next_run(lp):
    """Both killed (the guard first, so it cannot act): the job runs on in
    its cgroup. The next leakproof that opens the store marks the run
    interrupted, ends what is in the cgroups its dead supervisor made below
    its own, removes them, and says so."""
    marker = "orphan_job_both"
    proc = lp.start(write_job(lp, marker), "--no-status-line")
    lp.read_until(proc.stdout, b"ready")
    assert wait_for(lambda: len(job_procs(lp, marker)) == 3, 30), job_procs(lp, marker)
    cgroups = job_cgroup_dirs(min(job_procs(lp, marker)))
    if not cgroups:
        proc.kill()
        pytest.skip("no cgroup of its own for the job on this machine")
    guards = [p for p in lp.procs_with(marker) if p not in job_procs(lp, marker) and p != proc.pid]
    assert len(guards) == 1, guards
    try:
        os.kill(guards[0], signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        r = lp.run([lp.py, "-c", "pass"], "--no-status-line")   # the next writer
        assert r.rc == 0, r
        assert "left running by interrupted run 1" in r.err, r.err
        assert wait_for(lambda: not job_procs(lp, marker), 30), \
            f"processes of the job outlived the next run: {job_procs(lp, marker)}"
        assert not any(os.path.exists(d) for d in cgroups), cgroups
    finally:
        for pid in job_procs(lp, marker):
            os.kill(pid, signal.SIGKILL)
        for d in cgroups:   # a failed test leaves no cgroup either
            if os.path.exists(d):
                wait_for(lambda: not job_procs(lp, marker), 10)
                os.rmdir(d)
    with sqlite3.connect(lp.store) as db:
        assert dict(db.execute("SELECT id, status FROM runs"))[1] == "interrupted"


def kill_guard_then_supervisor(lp, proc, marker):
    """Both killed, the guard first so that it cannot act."""
    guards = [p for p in lp.procs_with(marker) if p not in job_procs(lp, marker) and p != proc.pid]
    assert len(guards) == 1, guards
    os.kill(guards[0], signal.SIGKILL)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_a_job_without_a_cgroup_whose_supervisor_and_guard_were_killed_is_ended_by_the_next_run(lp):
    """No cgroup to find it by: the run recorded its job's main process
    (pid and start time), which leads the job's process group, and the
    processes outside that group its guard was told of (a worker that
    called setsid, and its child). The next writer ends each that is still
    the same process and has the run's LEAKPROOF_RUN in its environment."""
    marker = "orphan_job_both_nocg"
    proc = lp.start(write_job(lp, marker, SETSID_JOB), "--no-status-line", "--no-cgroup")
    lp.read_until(proc.stdout, b"ready")
    assert wait_for(lambda: len(job_procs(lp, marker)) == 3, 30), job_procs(lp, marker)

    def recorded_both():
        # a timer sample that counted the three tells the guard, and the
        # store, of the two outside the group
        try:
            with sqlite3.connect(lp.store) as db:
                also = db.execute("SELECT also FROM segments WHERE run_id = 1").fetchone()[0] or ""
                return len(also.split()) >= 2
        except sqlite3.OperationalError:
            return False
    try:
        assert wait_for(recorded_both, 60), "the store never recorded the two outside the job's group"
        kill_guard_then_supervisor(lp, proc, marker)
        assert len(job_procs(lp, marker)) == 3   # what this test is about: they ran on
        r = lp.run([lp.py, "-c", "pass"], "--no-status-line")   # the next writer
        assert r.rc == 0, r
        # how many it counts depends on the order: a group ended first may
        # take a recorded member with it; all must be gone all the same
        assert "ended the job left running by interrupted run 1 (" in r.err, r.err
        assert wait_for(lambda: not job_procs(lp, marker), 30), \
            f"processes of the job outlived the next run: {job_procs(lp, marker)}"
    finally:
        for pid in job_procs(lp, marker):
            os.kill(pid, signal.SIGKILL)
    with sqlite3.connect(lp.store) as db:
        assert dict(db.execute("SELECT id, status FROM runs"))[1] == "interrupted"


def test_the_next_run_from_another_cgroup_ends_what_is_in_the_recorded_one(lp):
    """The next writer runs in another cgroup than the dead supervisor did
    (another shell, another batch job), so nothing of that supervisor is
    below its own: the run's recorded cgroup is where it looks. The job's
    setsid'd worker and its child are outside the job's process group, so
    only the cgroup ends them."""
    marker = "orphan_job_elsewhere"
    proc = lp.start(write_job(lp, marker, SETSID_JOB), "--no-status-line")
    lp.read_until(proc.stdout, b"ready")
    assert wait_for(lambda: len(job_procs(lp, marker)) == 3, 30), job_procs(lp, marker)
    cgroups = job_cgroup_dirs(min(job_procs(lp, marker)))
    if not cgroups:
        proc.kill()
        pytest.skip("no cgroup of its own for the job on this machine")
    elsewhere = [os.path.join(os.path.dirname(d), f"lp-test-elsewhere-{os.getpid()}") for d in cgroups]
    try:
        kill_guard_then_supervisor(lp, proc, marker)
        for d in elsewhere:
            os.mkdir(d)
        # the next writer, moved first into a cgroup of its own beside the dead one's
        move = 'for d in "$@"; do echo $$ > "$d/cgroup.procs" || exit 9; done; exec ' + " ".join(
            shlex.quote(a) for a in [*WRAPPER, lp.binary, "run", "--store", lp.store, "--no-status-line",
                                     "--", lp.py, "-c", "pass"])
        r = subprocess.run(["sh", "-c", move, "sh", *elsewhere], env=lp.env(), cwd=lp.dir,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 0, (r.returncode, err)
        assert "left running by interrupted run 1" in err, err
        assert wait_for(lambda: not job_procs(lp, marker), 30), \
            f"processes of the job outlived the next run: {job_procs(lp, marker)}"
        assert not any(os.path.exists(d) for d in cgroups), cgroups
    finally:
        for pid in job_procs(lp, marker):
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not job_procs(lp, marker), 10)
        for d in cgroups + elsewhere:   # a failed test leaves no cgroup either
            if os.path.exists(d):
                wait_for(lambda: not open(os.path.join(d, "cgroup.procs")).read(), 10)
                os.rmdir(d)


def test_a_store_does_not_name_a_process_to_kill(lp):
    """A run row (crafted, or from a store shared with others) that says its
    dead supervisor's job was a process of this host that no leakproof
    started: the next writer marks the run interrupted and leaves the
    process alone, though its pid and start time match."""
    assert lp.run([lp.py, "-c", "pass"], "--no-status-line").rc == 0
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    gone = os.fork()   # a pid nobody has once reaped
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    try:
        with open(f"/proc/{bystander.pid}/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        with sqlite3.connect(lp.store) as db:
            db.execute("UPDATE runs SET status = 'running', ended_at = NULL, supervisor_pid = ?,"
                       " supervisor_start = 1 WHERE id = 1", (gone,))
            db.execute("UPDATE segments SET ended_at = NULL, pid = ?, pid_start = ?, also = ?"
                       " WHERE run_id = 1", (bystander.pid, start, f"{bystander.pid}:{start} junk 1:"))
        r = lp.run([lp.py, "-c", "pass"], "--no-status-line")
        assert r.rc == 0, r
        assert "left running" not in r.err, r.err
        with sqlite3.connect(lp.store) as db:
            assert dict(db.execute("SELECT id, status FROM runs"))[1] == "interrupted"
        assert bystander.poll() is None, "a process named by the store was killed"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_run_whose_supervisor_was_killed_shows_what_it_stored(lp):
    # what ls and report tell of an interrupted run is what its rows hold:
    # its steps, its peak, how long it ran, before and after a writer marks it
    proc = lp.start([lp.py, "-c", STEPPING], "--no-status-line")
    lp.read_until(proc.stdout, b"twenty")
    time.sleep(1.5)                       # a flush of the store is due every second
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with sqlite3.connect(lp.store) as db:
        steps, last_t = db.execute("SELECT count(*), max(t) FROM steps").fetchone()
    assert steps >= 20, steps

    def check(run):
        assert run["status"] == "interrupted", run
        assert run["steps"] == steps, (run, steps)
        assert run["peak_bytes"] >= 20 << 20, run
        assert run["duration_seconds"] >= last_t - 0.5, (run, last_t)
    check(lp.ls("json")[0])                   # a reader: as it reads it
    report = lp.cmd(["report", "1", "--store", lp.store])
    assert "interrupted after" in report.out and f"{steps} steps" in report.out, report
    assert lp.run([lp.py, "-c", "pass"], "--no-status-line").rc == 0   # a writer marks it
    check([r for r in lp.ls("json") if r["id"] == 1][0])


def test_forwarded_sigterm_is_followed_by_sigkill_after_grace(lp):
    marker = "orphan_job_grace"
    proc = lp.start(write_job(lp, marker), "--no-status-line", "--grace", "1s")
    lp.read_until(proc.stdout, b"ready")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30
    assert proc.returncode == 128 + signal.SIGKILL, err
    assert b"SIGKILL" in err, err
    assert wait_for(lambda: not lp.procs_with(marker), 30), lp.procs_with(marker)


def test_second_stop_signal_kills_at_once(lp):
    marker = "orphan_job_twice"
    proc = lp.start(write_job(lp, marker), "--no-status-line", "--grace", "10m")
    lp.read_until(proc.stdout, b"ready")
    proc.send_signal(signal.SIGINT)
    lp.read_until(proc.stderr, b"forwarded")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL, err
    assert wait_for(lambda: not lp.procs_with(marker), 30), lp.procs_with(marker)

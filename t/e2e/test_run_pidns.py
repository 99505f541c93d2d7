"""A pid in the store means a process only in the PID namespace that
recorded it (issue: reliability probe, items 1 and 2).

Real processes in a PID namespace of their own (`unshare --pid --fork
--mount-proc`, as root), so that pid numbers can be chosen: a writer
outside a container's namespace must not take a healthy run inside it for
one whose supervisor died, nor kill its job; and a dead supervisor's pid
held by another process when the next writer marks the run interrupted
must not leave the job's processes and cgroup behind for good.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import WRAPPER


def namespaces_work():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                       "echo 499 > /proc/sys/kernel/ns_last_pid && sh -c 'echo $$'"],
                       capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip() == "500"


pytestmark = pytest.mark.skipif(not namespaces_work(),
                                reason="needs root and unshare --pid --mount-proc with ns_last_pid")


def free_pids(count):
    """The first of count pids that no process has, below the last pid
    handed out (the allocator comes back to them only after wrapping)."""
    with open("/proc/loadavg") as f:
        last = int(f.read().split()[-1])
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    used = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    top = last - 100 if last - 100 > 1000 + count else pid_max - 200
    for first in range(top - count, 1000, -1):
        if not any(p in used for p in range(first, first + count)):
            return first
    pytest.skip("no run of free pids")


STEPS = """
import leakproof, sys, time
for i in range(200):
    leakproof.step()
    if i == 20:
        print("twenty", flush=True)
    time.sleep(0.05)
print("done", i + 1, flush=True)
"""


def test_a_writer_in_another_pid_namespace_does_not_judge_a_run(lp):
    """A run inside a PID namespace whose supervisor's pid is free outside
    it; a writer outside (same host name, same store) runs meanwhile. Before,
    it took the run for one whose supervisor had died, marked it
    interrupted and SIGKILLed its job through the cgroup."""
    job = lp.dir / "steps.py"
    job.write_text(STEPS)
    first = free_pids(32)
    inner = WRAPPER + [lp.binary, "run", "--store", lp.store, "--no-status-line", "--", lp.py, str(job)]
    script = f'echo {first - 1} > /proc/sys/kernel/ns_last_pid && "$@"'
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh", *inner],
                            cwd=lp.dir, env=lp.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lp.read_until(proc.stdout, b"twenty", timeout=60)
        with sqlite3.connect(lp.store) as db:
            sup = db.execute("SELECT supervisor_pid FROM runs WHERE id = 1").fetchone()[0]
        assert first <= sup < first + 32, (first, sup)
        assert not os.path.exists(f"/proc/{sup}"), "the supervisor's pid in the namespace is in use outside"
        r = lp.run([lp.py, "-c", "pass"], "--no-status-line")   # the writer outside
        assert r.rc == 0, r
        assert "left running" not in r.err, r.err
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            lp.kill_tree(proc)
            proc.communicate()
    assert proc.returncode == 0, err.decode(errors="replace")
    assert b"done 200" in out, (out, err)
    with sqlite3.connect(lp.store) as db:
        status, steps = db.execute("SELECT status, steps FROM runs WHERE id = 1").fetchone()
    assert status != "interrupted" and steps == 200, (status, steps)


# Runs as pid 1 of a PID namespace of its own: a job (a main process, a
# worker that left its process group with setsid, and its child) whose
# supervisor and guard are killed; the supervisor's pid is given to a
# process that is no leakproof; then the next writer. What was left after it,
# as JSON on the last line.
DRIVER = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    binary, store, py, job, marker = sys.argv[1:6]
    wrapper = json.loads(sys.argv[6])

    def state(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None

    def procs():
        out = {}
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == os.getpid() or state(int(p)) in (None, "Z"):
                continue
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    argv = f.read().split(b"\\0")
            except OSError:
                continue
            if any(marker.encode() in a for a in argv):
                out[int(p)] = argv[0].decode(errors="replace")
        return out

    def job_procs():
        return sorted(p for p, a in procs().items() if not a.endswith("leakproof"))

    def wait_for(pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:   # we are init here: reap orphans
                    pass
            except ChildProcessError:
                pass
            time.sleep(0.05)
        return pred()

    def cgroups(pid):
        dirs = []
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\\n").split(":", 2)
                if "leakproof-" not in path.rsplit("/", 1)[-1]:
                    continue
                if ctrls == "":
                    root = "/sys/fs/cgroup" if os.path.exists("/sys/fs/cgroup/cgroup.procs") else "/sys/fs/cgroup/unified"
                    dirs.append(root + path)
                elif "memory" in ctrls.split(","):
                    dirs.append("/sys/fs/cgroup/memory" + path)
        return dirs

    sup = subprocess.Popen(wrapper + [binary, "run", "--store", store, "--no-status-line", "--", py, job],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert sup.stdout.readline().strip() == b"ready"
    assert wait_for(lambda: len(job_procs()) == 3, 30), procs()
    dirs = cgroups(min(job_procs()))
    guard = [p for p in procs() if p not in job_procs() and p != sup.pid]
    assert len(guard) == 1, (guard, procs())
    os.kill(guard[0], signal.SIGKILL)
    os.kill(sup.pid, signal.SIGKILL)
    sup.wait()
    left_before = job_procs()
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(sup.pid - 1))
    holder = subprocess.Popen(["sleep", "300"])
    r = subprocess.run(wrapper + [binary, "run", "--store", store, "--no-status-line", "--", py, "-c", "pass"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True)
    wait_for(lambda: not job_procs(), 20)
    result = {"supervisor": sup.pid, "holder": holder.pid, "cgroups": dirs, "left_before": left_before,
              "rc": r.returncode, "err": r.stderr, "left_after": job_procs(),
              "cgroups_after": [d for d in dirs if os.path.exists(d)]}
    holder.kill()
    holder.wait()
    for p in job_procs():   # a failed test leaves nothing behind
        os.kill(p, signal.SIGKILL)
    wait_for(lambda: not job_procs(), 10)
    for d in dirs:
        def removed():
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                return False
            return True
        wait_for(removed, 10)
    print(json.dumps(result), flush=True)
""")

SETSID_JOB = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        os.setsid()          # out of the job's process group: only the cgroup finds it
        if os.fork() == 0:
            while True:
                time.sleep(0.1)
        while True:
            time.sleep(0.1)
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
""")


def test_a_dead_supervisors_pid_in_use_does_not_leave_its_job_for_good(lp):
    """The dead supervisor's pid is another process's (no leakproof) when the
    next writer marks the run interrupted. Before, it ended the job's main
    process only, and the two workers and the cgroup were left, with no
    writer ever trying again. They are told apart by start time: the
    workers are older than the pid's new process, so the cgroup is the dead
    supervisor's."""
    marker = f"pidns_orphan_{os.getpid()}"
    job = lp.dir / f"{marker}.py"
    job.write_text(SETSID_JOB)
    driver = lp.dir / "driver.py"
    driver.write_text(DRIVER)
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(driver),
                        lp.binary, lp.store, lp.py, str(job), marker, json.dumps(WRAPPER)],
                       cwd=lp.dir, env=lp.env(), stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if not res["cgroups"]:
        pytest.skip("no cgroup of its own for the job on this machine")
    assert res["holder"] == res["supervisor"], res            # what this test is about
    assert len(res["left_before"]) == 3, res                   # they ran on
    assert res["rc"] == 0, res
    assert "left running by interrupted run 1" in res["err"], res["err"]
    assert res["left_after"] == [], res
    assert res["cgroups_after"] == [], res
    with sqlite3.connect(lp.store) as db:
        assert dict(db.execute("SELECT id, status FROM runs"))[1] == "interrupted"

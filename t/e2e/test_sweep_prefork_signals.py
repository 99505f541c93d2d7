"""
Signals to a prefork trial (src/sweep/prefork.c, the stub;
docs/internals/prefork.md "Signals"): the trial's pid, as leakproof and the
user see it, is the stub's; a signal sent to the stub alone reaches the
trial forked from the template, once, and the stub ends as the trial
ended (death by signal included). A signal the supervisor sends to the
job's process group reaches the trial once too (the stub does not send it
again). Nothing is timed: each step waits for a file the job writes.
"""
import os
import signal
import sqlite3
import subprocess
import time

import pytest

JOB = r"""
import os, signal, sys, time
out = sys.argv[1]
def note(word):
    with open(out + '.' + word, 'a') as fh:
        fh.write(word + '\n')
def on_term(s, f):
    note('term')
    time.sleep(1)          # time for a second SIGTERM to come, were one sent
    sys.exit(3)
signal.signal(signal.SIGUSR1, lambda s, f: note('usr1'))
if sys.argv[2] == 'catch-term':
    signal.signal(signal.SIGTERM, on_term)
with open(out + '.pid', 'w') as fh:
    fh.write(str(os.getpid()))
end = time.time() + 600
while time.time() < end:
    time.sleep(0.05)
"""


def wait_for(cond, what, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    pytest.fail("still waiting for " + what)


def lines(path):
    return path.read_text().splitlines() if path.exists() else []


def stub_of(job):
    """The pid of the stub running job (its cmdline: PYTHON -E -S .../stub.py PYTHON JOB ...)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 5 and argv[3].endswith(b"/stub.py") and argv[5] == str(job).encode():
            return int(pid)
    return None


def start_sweep(lp, mode):
    r = lp.run(["true"], timeout=60)
    assert r.rc == 0, r
    if lp.report()["run"]["cgroup_mode"] == "none":
        pytest.skip("no cgroup for a job here: prefork falls back to cold starts")
    job = lp.dir / "job.py"
    job.write_text(JOB)
    mark = lp.dir / "mark"
    f = lp.dir / "sig.yaml"
    f.write_text(f"""
command: [{lp.py}, {job}, {mark}, {mode}]
parameters:
  n: {{values: [1]}}
prefork: [json]
""")
    argv = [lp.binary, "sweep", str(f), "--store", lp.store]
    proc = subprocess.Popen(argv, cwd=lp.dir, env=lp.env(None), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    pid = int(wait_for(lambda: (lp.dir / "mark.pid").exists() and (lp.dir / "mark.pid").read_text(),
                       "the trial to start"))
    stub = wait_for(lambda: stub_of(job), "the stub")
    assert pid != stub                     # forked from the template, not cold
    return proc, mark, pid, stub


def finish(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode(errors="replace")
    return err.decode(errors="replace")


def run_of_trial(lp):
    con = sqlite3.connect(f"file:{lp.store}?mode=ro", uri=True)
    try:
        return con.execute("SELECT status, run_id FROM trials").fetchone()
    finally:
        con.close()


def test_signals_to_the_stub_reach_the_trial_and_its_end_is_the_stubs(lp):
    proc, mark, pid, stub = start_sweep(lp, "default-term")
    try:
        os.kill(stub, signal.SIGUSR1)
        wait_for(lambda: lines(mark.with_suffix(".usr1")), "SIGUSR1 to reach the trial")
        os.kill(stub, signal.SIGUSR1)
        wait_for(lambda: len(lines(mark.with_suffix(".usr1"))) == 2, "the second SIGUSR1")
        os.kill(stub, signal.SIGTERM)      # the trial dies of it; so does the stub
        err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lines(mark.with_suffix(".usr1")) == ["usr1", "usr1"]      # each once
    status, run_id = run_of_trial(lp)
    assert status == "failed", err
    run = lp.report(run_id)["run"] if run_id else None
    assert run and run["exit_signal"] == signal.SIGTERM and run["exit_code"] is None, run


def test_a_signal_to_the_jobs_group_reaches_the_trial_once(lp):
    proc, mark, pid, stub = start_sweep(lp, "catch-term")
    try:
        supervisor = int(open(f"/proc/{stub}/stat").read().rsplit(")", 1)[1].split()[1])
        os.kill(supervisor, signal.SIGTERM)   # it stops the job: SIGTERM to the job's group
        err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lines(mark.with_suffix(".term")) == ["term"], err
    status, run_id = run_of_trial(lp)
    run = lp.report(run_id)["run"]
    assert run["exit_code"] == 3, run


def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_sigstop_and_sigcont_to_the_stub_reach_the_trial(lp):
    """SIGSTOP cannot be caught, so the stub cannot forward it: before, it
    stopped the stub alone and the trial stepped on."""
    proc, mark, pid, stub = start_sweep(lp, "default-term")
    try:
        os.kill(stub, signal.SIGSTOP)
        wait_for(lambda: state(pid) == "T", "the trial to stop with its stub", timeout=30)
        os.kill(stub, signal.SIGCONT)
        wait_for(lambda: state(pid) != "T", "the trial to go on with its stub", timeout=30)
        os.kill(stub, signal.SIGTERM)
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()

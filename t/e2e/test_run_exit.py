"""
How a run ends: leakproof exits with the job's status (128+N for signal N),
with its own documented statuses for its own failures (124 usage, 125
leakproof, 126 cannot execute, 127 not found), forwards SIGTERM and SIGINT
to the job, and leaves no process of the job behind.
"""
import os
import signal
import time
import uuid

import pytest

pytestmark = pytest.mark.valgrind


def test_job_exit_status_passes_through(lp):
    r = lp.run([lp.py, lp.workload("lifecycle.py"), "exit", "3"])
    assert r.rc == 3, r
    assert "exiting with 3" in r.out
    run = lp.report()["run"]
    assert (run["exit_code"], run["exit_signal"]) == (3, None)


def test_job_killed_by_sigkill_gives_137(lp):
    r = lp.run([lp.py, lp.workload("lifecycle.py"), "kill"])
    assert r.rc == 137, r
    run = lp.report()["run"]
    assert run["exit_signal"] == signal.SIGKILL
    assert run["exit_code"] is None


def test_job_segfault_gives_139(lp):
    r = lp.run([lp.py, lp.workload("lifecycle.py"), "segv"])
    assert r.rc == 139, r
    assert lp.report()["run"]["exit_signal"] == signal.SIGSEGV


def test_unknown_option_is_a_usage_error(lp):
    r = lp.cmd(["run", "--store", lp.store, "--no-such-option", "--", "true"])
    assert r.rc == 124, r
    assert "no-such-option" in r.err


@pytest.mark.parametrize("args", [[], ["--"]], ids=["no-args", "only-dashes"])
def test_no_command_is_a_usage_error(lp, args):
    r = lp.cmd(["run", "--store", lp.store, *args])
    assert r.rc == 124, r
    assert r.err.strip(), "no message"


def test_bad_option_value_is_a_usage_error(lp):
    r = lp.cmd(["run", "--store", lp.store, "--measure", "bogus", "--", "true"])
    assert r.rc == 124, r
    assert "bogus" in r.err


@pytest.mark.parametrize("spec, said", [
    ("99999999999999999999:1:1", "its SWEEP is out of range (at most 9223372036854775807)"),
    ("1:99999999999999999999:0", "its INDEX is out of range"),
    ("1:2:18446744073709551616", "its ATTEMPT is out of range"),
    ("0:1:1", "its SWEEP is at least 1"),
    ("-1:2:3", "is not SWEEP:INDEX:ATTEMPT"),
    ("1:2", "is not SWEEP:INDEX:ATTEMPT"),
])
def test_trial_out_of_range_is_a_usage_error(lp, spec, said):
    # not stored as the largest sweep id: the job is not started
    r = lp.cmd(["run", "--store", lp.store, "--trial", spec, "--", "sh", "-c", "echo job-ran"])
    assert r.rc == 124, r
    assert f"--trial '{spec}'" in r.err and said in r.err, r.err
    assert "job-ran" not in r.out and not os.path.exists(lp.store)


@pytest.mark.parametrize("opt", ["--max-mem", "-i"])
def test_option_without_its_value_before_the_command(lp, opt):
    # the "--" that ends the options is no option's value (getopt took it
    # for one): said as the missing value it is, not as "invalid size '--'"
    r = lp.cmd(["run", "--store", lp.store, opt, "--", "true"])
    assert r.rc == 124, r
    assert f"option '{opt}' needs a value before '--'" in r.err, r.err
    assert not os.path.exists(lp.store)


def test_command_not_found_gives_127(lp):
    r = lp.run(["no-such-command-lp4242", "arg"])
    assert r.rc == 127, r
    assert "no-such-command-lp4242" in r.err


def test_file_that_cannot_be_executed_gives_126(lp):
    script = lp.dir / "not-executable.sh"
    script.write_text("#!/bin/sh\necho should not run\n")
    script.chmod(0o644)
    r = lp.run([str(script)])
    assert r.rc == 126, r
    assert "not-executable.sh" in r.err
    assert "should not run" not in r.out


def test_directory_as_command_gives_126(lp):
    r = lp.run([str(lp.dir)])
    assert r.rc == 126, r


@pytest.mark.parametrize("kind", ["directory", "under-a-file"])
def test_store_that_cannot_be_opened_gives_125(lp, kind):
    if kind == "directory":
        store = lp.dir / "store-is-a-dir"
        store.mkdir()
    else:
        plain = lp.dir / "plain-file"
        plain.write_text("not a directory\n")
        store = plain / "lp.db"
    ran = lp.dir / "job-ran"
    r = lp.cmd(["run", "--store", str(store), "--", "touch", str(ran)])
    assert r.rc == 125, r
    assert str(store) in r.err
    assert not ran.exists(), "the job ran although its run could not be recorded"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_leakproof_is_forwarded_to_the_job(lp, sig):
    proc = lp.start([lp.py, lp.workload("lifecycle.py"), "trap", "30"])
    seen = lp.read_until(proc.stdout, b"ready\n")
    time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    out = seen + out
    assert f"got {sig.name} x".encode() in out, (out, err)
    # forwarded once: a job that counts its signals ("press Ctrl-C again to
    # abort") must not see two
    assert f"got {sig.name} x1\n".encode() in out, (out, err)
    assert b"no signal came" not in out
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]


@pytest.mark.parametrize("options,worker_args,status", [
    ([], [], 0),
    ([], ["--setsid"], 0),
    ([], ["--crash"], 137),
    (["--no-cgroup"], ["--setsid"], 0),
    (["--no-cgroup"], ["--crash"], 137),
], ids=["exits", "setsid", "crash", "no-cgroup-setsid", "no-cgroup-crash"])
def test_no_orphans_remain(lp, options, worker_args, status):
    marker = f"lp-orphan-{uuid.uuid4().hex}"
    try:
        r = lp.run([lp.py, lp.workload("lifecycle.py"), "orphan", marker, *worker_args],
                   *options, timeout=60)
        assert r.rc == status, r
        assert "up" in r.out
        left = lp.procs_with(marker)
        assert left == [], f"processes left behind after leakproof exited: {left}"
        # the worker ignores SIGTERM: its end is told, on stderr and in the run
        assert "left 1 process running" in r.err and "1 process still running" in r.err, r
        events = [e for e in lp.report()["events"] if e["kind"] == "leftover"]
        assert [e["detail"].split(":")[0] for e in events] == [
            "1 process left running by the main process", "1 process still running after SIGTERM"], events
        assert all(e["detail"].endswith(s) for e, s in zip(events, [": SIGTERM", ": SIGKILL"])), events
    finally:
        for pid in lp.procs_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_job_keeps_its_own_open_file_limit(lp):
    # leakproof raises its own soft limit on open files (it keeps one open
    # per process of the tree), but the job starts with the limit it was given
    r = lp.cmd(["run", "--store", lp.store, "-q", "--", "sh", "-c", "ulimit -Sn 64 && ulimit -Sn"],
               timeout=60)
    assert r.rc == 0 and r.out.strip() == "64", r
    shell = f"ulimit -Sn 64 && exec {lp.binary} run --store {lp.store} -q -- sh -c 'ulimit -Sn'"
    r = lp.cmd(["run", "--store", lp.store, "-q", "--", "sh", "-c", shell], timeout=60)
    assert r.rc == 0, r
    assert r.out.strip() == "64", r

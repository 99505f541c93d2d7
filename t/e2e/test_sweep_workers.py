"""
Sweep workers without a cluster: trials written pending by `sweep
--executor slurm` (against a stand-in `sbatch` on PATH that records its
arguments and submits nothing), then claimed by workers started by hand
(`sweep --worker ID`) on the SQLite store. Every trial runs exactly once
with several workers claiming at once; a worker killed with SIGKILL loses
its lease, and its trial is recorded interrupted and run again by another
worker; bad values are refused with clear words. The same against real
SLURM and PostgreSQL: test_sweep_slurm.py.
"""
import os
import signal
import sqlite3
import subprocess
import time

import pytest

SBATCH = """#!/bin/sh
# a stand-in sbatch: records its arguments and the store it was given
printf '%s\\n' "$@" > "$0.args"
echo "$LEAKPROOF_STORE" > "$0.store"
[ -n "$SBATCH_FAIL" ] && { echo "sbatch: error: $SBATCH_FAIL" >&2; exit 1; }
echo 4242
"""


def setup_bin(lp):
    bindir = lp.dir / "bin"
    bindir.mkdir(exist_ok=True)
    sbatch = bindir / "sbatch"
    sbatch.write_text(SBATCH)
    sbatch.chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}", "SLURM_JOB_ID": None, "SLURM_ARRAY_JOB_ID": None,
            "SLURM_ARRAY_TASK_ID": None}


def write(lp, name, text):
    path = lp.dir / name
    path.write_text(text)
    return str(path)


def rows(lp, sweep_id):
    with sqlite3.connect(lp.store) as db:
        return db.execute("SELECT idx, attempt, status, worker, note, run_id FROM trials WHERE sweep_id = ?"
                          " ORDER BY idx, attempt", (sweep_id,)).fetchall()


def submit(lp, text, *args, env=None):
    file = write(lp, "sweep.yaml", text)
    r = lp.cmd(["sweep", file, "--store", lp.store, "--no-wait", *args], env=env, timeout=120)
    return file, r


def start_worker(lp, sweep_id, *args, env=None):
    proc = subprocess.Popen([lp.binary, "sweep", "--worker", str(sweep_id), "--store", lp.store, *args],
                            cwd=lp.dir, env=lp.env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lp._started.append(proc)
    return proc


QUICK = """command: [/bin/sh, -c, "echo val=$1", sh, "{x}"]
parameters:
  x: {values: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}
result_regex: '^val=(\\S+)'
executor: slurm
slurm: {workers: 3, partition: debug, time: "10", mem: 300M, gpus_per_task: 0, sbatch_args: ["--account=ml"]}
"""


def test_pending_trials_submitted_then_claimed_once_by_workers_started_by_hand(lp):
    env = setup_bin(lp)
    file, r = submit(lp, QUICK, env=env)
    assert r.rc == 0, r
    assert "job array 4242" in r.err and "--resume=1" in r.err, r
    args = (lp.dir / "bin" / "sbatch.args").read_text().split("\n")
    logdir = str(lp.dir / "sweeps" / "lp.db" / "1")
    for a in ("--parsable", "--array=0-2", "--job-name=leakproof-sweep-1", f"--output={logdir}/worker-%A_%a.out",
              "--partition=debug", "--time=10", "--mem=300M", "--account=ml", f"{logdir}/worker.sh"):
        assert a in args, (a, args)
    # the store reaches the workers in the environment, by its absolute path
    assert (lp.dir / "bin" / "sbatch.store").read_text().strip() == lp.store
    script = (lp.dir / "sweeps" / "lp.db" / "1" / "worker.sh").read_text()
    assert script.rstrip().endswith(f"'{lp.binary}' sweep --worker 1"), script
    assert [s for (_, _, s, _, _, _) in rows(lp, 1)] == ["pending"] * 12

    workers = [start_worker(lp, 1, env=env) for _ in range(3)]
    for w in workers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err.decode()
    got = rows(lp, 1)
    assert [(i, a, s) for (i, a, s, _, _, _) in got] == [(i, 0, "ok") for i in range(12)], got
    assert all(w and ":" in w for (_, _, _, w, _, _) in got), got
    with sqlite3.connect(lp.store) as db:
        runs = db.execute("SELECT trial_idx, count(*) FROM runs WHERE sweep_id = 1 GROUP BY trial_idx").fetchall()
        assert sorted(runs) == [(i, 1) for i in range(12)], runs        # each trial ran once
        assert db.execute("SELECT status FROM sweeps WHERE id = 1").fetchone() == ("done",)
    # --resume from another shell: complete, nothing run again
    r = lp.cmd(["sweep", file, "--store", lp.store, "--resume"], env=env, timeout=120)
    assert r.rc == 0, r
    assert "12 of 12 trials ended" in r.err, r
    with sqlite3.connect(lp.store) as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (12,)


SLOW = """command: [/bin/sh, -c, "echo started; sleep $1", sh, "{s}"]
parameters:
  s: {values: [8, 0.2]}
executor: slurm
"""


def test_a_worker_killed_loses_its_lease_and_its_trial_runs_again(lp):
    env = setup_bin(lp)
    _, r = submit(lp, SLOW, env=env)
    assert r.rc == 0, r
    first = start_worker(lp, 1, "--lease", "3s", env=env)
    deadline = time.monotonic() + 60
    while not rows(lp, 1)[0][2] == "running":
        assert time.monotonic() < deadline, rows(lp, 1)
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    # another worker: takes the other trial, then the first one once its
    # lease has run out (it waits while another worker holds a trial)
    second = start_worker(lp, 1, "--lease", "3s", env=env)
    out, err = second.communicate(timeout=180)
    assert second.returncode == 0, err.decode()
    got = rows(lp, 1)
    assert [(i, a, s) for (i, a, s, _, _, _) in got] == [(0, 0, "interrupted"), (0, 1, "ok"), (1, 0, "ok")], got
    assert "lease expired" in got[0][4] and got[0][3] != got[1][3], got
    assert "lost its worker" in got[1][4], got


@pytest.mark.parametrize("args, text, words", [
    (["--executor", "k8s"], QUICK, "--executor must be local or slurm, not 'k8s'"),
    ([], QUICK.replace('time: "10"', 'time: "4h"'), "slurm.time must be a SLURM time limit"),
    ([], QUICK.replace("mem: 300M", "mem: lots"), "slurm.mem: invalid size 'lots'"),
    ([], QUICK.replace('["--account=ml"]', '["--array=1-3"]'), "--array is set by the sweep itself"),
    ([], QUICK.replace("workers: 3", "workers: 0"), "slurm.workers must be a whole number from 1"),
])
def test_bad_values_are_refused(lp, args, text, words):
    env = setup_bin(lp)
    _, r = submit(lp, text, *args, env=env)
    assert r.rc == 124 and words in r.err, r
    assert not (lp.dir / "bin" / "sbatch.args").exists()


def test_sbatch_failure_and_unknown_sweep_are_said(lp):
    env = setup_bin(lp)
    env["SBATCH_FAIL"] = "invalid partition specified: debug"
    _, r = submit(lp, QUICK, env=env)
    assert r.rc != 0 and "cannot submit the sweep's workers: sbatch failed: sbatch: error: invalid partition" in r.err, r
    r = lp.cmd(["sweep", "--worker", "99", "--store", lp.store], env=env)
    assert r.rc == 124 and "no sweep 99 in the store" in r.err, r
    r = lp.cmd(["sweep", "--worker", "1", "file.yaml", "--store", lp.store], env=env)
    assert r.rc == 124 and "takes no sweep file" in r.err, r


def test_a_worker_told_to_stop_gives_its_trial_back_at_once(lp):
    env = setup_bin(lp)
    _, r = submit(lp, SLOW.replace("[8, 0.2]", "[30, 0.2]"), env=env)
    assert r.rc == 0, r
    first = start_worker(lp, 1, env=env)
    log = lp.dir / "sweeps" / "lp.db" / "1" / "trial-0.0.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and "started" in log.read_text()):   # the job runs, its run is recorded
        assert time.monotonic() < deadline, rows(lp, 1)
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 128 + signal.SIGTERM, err.decode()
    got = rows(lp, 1)
    # attempt 0 interrupted, saying why, its run linked; attempt 1 pending
    assert [(i, a, s) for (i, a, s, _, _, _) in got][:2] == [(0, 0, "interrupted"), (0, 1, "pending")], got
    assert "its worker was stopped (SIGTERM)" in got[0][4] and got[0][5], (got, err.decode())
    assert "run again: attempt 0 was interrupted" in got[1][4], got


RELATIVE = """command: [{py}, job.py, "{{x}}"]
parameters:
  x: {{values: [1, 2]}}
result_regex: '^val=(\\\\S+)'
executor: slurm
"""


def test_a_worker_started_elsewhere_runs_the_trials_in_the_sweeps_directory(lp):
    """The sweep's command names its script by a relative path; a worker
    started by hand in another directory (with a relative store path).
    Before, it ran the trials there: every trial failed (no job.py), then
    "the sweep is done"."""
    env = setup_bin(lp)
    (lp.dir / "job.py").write_text("import sys, os\nprint('val=%s' % sys.argv[1])\nprint('cwd=' + os.getcwd())\n")
    _, r = submit(lp, RELATIVE.format(py=lp.py), env=env)
    assert r.rc == 0, r
    elsewhere = lp.dir / "elsewhere"
    elsewhere.mkdir()
    w = subprocess.Popen([lp.binary, "sweep", "--worker", "1", "--store", os.path.relpath(lp.store, elsewhere)],
                         cwd=elsewhere, env=lp.env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    lp._started.append(w)
    out, err = w.communicate(timeout=300)
    assert w.returncode == 0, err.decode()
    got = rows(lp, 1)
    assert [(i, a, s) for (i, a, s, _, _, _) in got] == [(0, 0, "ok"), (1, 0, "ok")], (got, err.decode())
    assert f"run in its directory '{lp.dir}'" in err.decode(), err.decode()
    log = (lp.dir / "sweeps" / "lp.db" / "1" / "trial-0.0.log").read_text()
    assert f"cwd={lp.dir}\n" in log, log


def test_prefork_with_executor_slurm_is_said_not_dropped(lp):
    env = setup_bin(lp)
    _, r = submit(lp, QUICK + "prefork: [json]\n", env=env)
    assert r.rc == 0, r
    assert "prefork: not with executor slurm: its workers start every trial cold" in r.err, r

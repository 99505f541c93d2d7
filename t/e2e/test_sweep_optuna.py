"""
`leakproof sweep` with method optuna through the long-lived Optuna process
(src/sweep/optuna.c, docs/internals/optuna.md): a real TPE sweep at -j 2
keeps two trials running at once (asserted from the store's start and end
times), the Optuna process killed mid-sweep is started again and the sweep
completes with every trial told, and the sampler, its keyword arguments and
a pruner come from the sweep file. Needs Optuna (python3-optuna).
"""
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest


def write(lp, name, text):
    path = lp.dir / name
    path.write_text(text)
    return str(path)


def trial_rows(lp):
    con = sqlite3.connect(f"file:{lp.store}?mode=ro", uri=True)
    try:
        return con.execute("SELECT idx, status, metric, optuna_number, started_at, ended_at "
                           "FROM trials ORDER BY idx, attempt").fetchall()
    finally:
        con.close()


def optuna_trials(storage, study):
    out = subprocess.run(["optuna", "trials", "--storage", storage, "--study-name", study, "-f", "json"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"},
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def sweep_file(lp, name, run_cap, sleep, parallel=1, extra=""):
    # a job of about `sleep` seconds whose loss is (x - 0.3)^2
    return write(lp, name, f"""
command: [{lp.py}, -c, "import time; time.sleep({sleep}); print('loss=%r' % ((float('{{x}}') - 0.3) ** 2))"]
method: optuna
metric: {{name: loss, goal: minimize}}
result_regex: '^loss=(\\S+)'
parameters:
  x: {{min: 0.0, max: 1.0}}
run_cap: {run_cap}
parallel: {parallel}
seed: 5
{extra}""")


def test_tpe_at_j2_keeps_two_trials_running(lp):
    f = sweep_file(lp, "tpe.yaml", 16, 1.0, parallel=2,
                   extra="optuna: {sampler: TPESampler, sampler_kwargs: {n_startup_trials: 4, "
                         "constant_liar: true}, pruner: MedianPruner}\n")
    r = lp.cmd(["sweep", f, "--store", lp.store], timeout=600)
    assert r.rc == 0, r
    rows = trial_rows(lp)
    assert len(rows) == 16 and all(row[1] == "ok" for row in rows), rows
    # the timeline: from the first start to the last end, two trials run
    # at once for most of it (each trial is about 1 s of sleep; asking
    # and telling take milliseconds)
    spans = sorted((row[4], row[5]) for row in rows)
    first, last = spans[0][0], max(e for _, e in spans)
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running, prev, two = 0, first, 0.0
    for t, d in events:
        if running >= 2:
            two += t - prev
        running += d
        prev = t
    assert two / (last - first) > 0.6, (two, last - first, spans)
    # every trial in Optuna's own storage with its value
    sw = json.loads(lp.cmd(["report", "--format", "json", "--store", lp.store]).stdout)["sweep"]
    told = {t["number"]: t for t in optuna_trials(sw["optuna_storage"], sw["optuna_study"])}
    assert len(told) == 16
    for row in rows:
        o = told[row[3]]
        assert o["state"] == "COMPLETE" and abs(o["value"] - row[2]) < 1e-12, (o, row)


def coprocess(sweep_pid):
    """The pid of the Optuna process the sweep started, or None."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read().split(b"\0")
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid == sweep_pid and b"leakproof-optuna" in cmd:
            return int(d)
    return None


def test_optuna_process_killed_mid_sweep_is_restarted(lp):
    f = sweep_file(lp, "kill.yaml", 8, 0.4)
    proc = subprocess.Popen([lp.binary, "sweep", f, "--store", lp.store], cwd=lp.dir, env=lp.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # once two trials have ended, kill it (it is idle between asks)
        deadline = time.monotonic() + 240
        pid = None
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.exists(lp.store):
                try:
                    done = [row for row in trial_rows(lp) if row[1] == "ok"]
                except sqlite3.OperationalError:
                    done = []
                pid = coprocess(proc.pid)
                if len(done) >= 2 and pid:
                    break
            time.sleep(0.1)
        assert pid, "no Optuna process seen"
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = err.decode()
    assert proc.returncode == 0, err
    assert "the Optuna process ended" in err and "starting it again" in err, err
    rows = trial_rows(lp)
    assert len(rows) == 8 and all(row[1] == "ok" for row in rows), rows
    sw = json.loads(lp.cmd(["report", "--format", "json", "--store", lp.store]).stdout)["sweep"]
    told = optuna_trials(sw["optuna_storage"], sw["optuna_study"])
    complete = [t for t in told if t["state"] == "COMPLETE"]
    assert len(complete) == 8, told
    assert len({row[3] for row in rows}) == 8


def test_a_sampler_optuna_does_not_have_is_refused(lp):
    f = sweep_file(lp, "bad.yaml", 2, 0, extra="optuna: {sampler: NoSuchSampler}\n")
    r = lp.cmd(["sweep", f, "--store", lp.store], timeout=120)
    assert r.rc != 0
    assert "optuna has no sampler named 'NoSuchSampler'" in r.err, r


def test_optuna_kwargs_must_be_a_mapping(lp):
    f = sweep_file(lp, "bad.yaml", 2, 0, extra="optuna: {sampler_kwargs: [1, 2]}\n")
    r = lp.cmd(["sweep", f, "--store", lp.store], timeout=120)
    assert r.rc != 0
    assert "optuna.sampler_kwargs must be a mapping of keyword arguments" in r.err, r

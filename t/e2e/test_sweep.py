"""
`leakproof sweep`: every trial in its own supervised process. The scenario
that motivates it, with real PyTorch and real Optuna: a search whose trials
leak into one process dies after a few trials; through the sweep every trial
completes, the configurations too large for the budget are recorded as OOM,
and Optuna's own storage has every trial in the right state. Also: an
environment-variable matrix with the per-configuration table, kill -9 and
--resume, OOM retries, bad files with line and column, and parameter values
that never pass through a shell.
"""
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

TRAIN = "sweep_train.py"


def write(lp, name, text):
    path = lp.dir / name
    path.write_text(text)
    return str(path)


def sweep(lp, file, *args, timeout=300):
    return lp.cmd(["sweep", file, "--store", lp.store, *args], timeout=timeout)


def sweep_json(lp, which=None):
    args = ["report"] + ([which] if which else []) + ["--format", "json", "--store", lp.store]
    r = lp.cmd(args)
    assert r.rc == 0, r
    return json.loads(r.stdout)


def job_cgroup(lp):
    r = lp.run(["true"], timeout=60)
    assert r.rc == 0, r
    return lp.report()["run"]["cgroup_mode"]


@pytest.mark.slow
def test_env_matrix_table_has_a_row_per_configuration(lp):
    f = write(lp, "matrix.yaml", f"""
command: [{lp.py}, {lp.workload(TRAIN)}, --steps, "100", "${{args}}"]
method: grid
metric: {{name: val_loss, goal: minimize}}
parameters:
  keep: {{values: [loss, item]}}
env:
  OMP_NUM_THREADS: {{values: ["1", "2"]}}
  MALLOC_ARENA_MAX: {{values: ["1", "4"]}}
parallel: 2
""")
    r = sweep(lp, f, timeout=600)
    assert r.rc == 0, r
    rep = sweep_json(lp)
    trials = rep["trials"]
    assert len(trials) == 8
    seen = set()
    for t in trials:
        key = (t["params"]["keep"], t["env"]["OMP_NUM_THREADS"], t["env"]["MALLOC_ARENA_MAX"])
        seen.add(key)
        assert t["status"] == "ok", t
        why = lambda: (t, lp.report(t["run"], fmt="text"))   # the trial's own report
        if t["params"]["keep"] == "loss":
            assert t["verdict"] == "leak", why()
        else:       # never called a leak: no-leak, or on a loaded machine
            assert t["verdict"] in ("no-leak", "inconclusive"), why()   # "run longer"
        assert t["steps"] == 100
        assert t["metric"] is not None and t["steps_per_second"] > 0
        assert len(t["step_change_quantiles_bytes"]) == 5
        if t["params"]["keep"] == "loss":
            assert t["growth_bytes_per_step"] > 0.8 * (1 << 20), t
    assert len(seen) == 8
    # the table, grouped by chosen dimensions
    r = lp.cmd(["report", "--store", lp.store, "--by", "keep,OMP_NUM_THREADS"])
    assert r.rc == 0, r
    rows = [line for line in r.out.splitlines() if line.startswith(("loss", "item"))]
    assert len(rows) == 4, r.out
    assert all("2 trials" in row for row in rows)
    assert all(("leak" in row.split()) == row.startswith("loss") for row in rows), r.out   # worst verdict
    # by the host each trial ran on (one here), with a dimension
    host = os.uname().nodename
    r = lp.cmd(["report", "--store", lp.store, "--by", "host,keep", "--format", "json"])
    assert r.rc == 0, r
    groups = json.loads(r.stdout)["groups"]
    assert sorted((g["values"]["host"], g["values"]["keep"], g["trials"]) for g in groups) == \
        [(host, "item", 4), (host, "loss", 4)], groups
    r = lp.cmd(["report", "--store", lp.store, "--by", "nodes"])
    assert r.rc == 124 or (r.rc == 1 and "no dimension 'nodes'" in r.err), r
    md = lp.cmd(["report", "--store", lp.store, "--format", "md"]).out
    assert sum(line.startswith("|") for line in md.splitlines()) == 10   # header, rule, 8 trials
    csv = lp.cmd(["report", "--store", lp.store, "--format", "csv"]).out.splitlines()
    assert csv[0].startswith("trial,attempt,keep,OMP_NUM_THREADS,MALLOC_ARENA_MAX,status")
    assert len(csv) == 9


@pytest.mark.slow
def test_optuna_search_that_kills_an_in_process_study(lp):
    if job_cgroup(lp) == "none":
        pytest.skip("no memory cgroup for jobs here: the kernel cannot enforce the limit")
    # today: one process, trials leak into each other, the study dies
    storage = f"sqlite:///{lp.dir}/inprocess.db"
    r = lp.run([lp.py, lp.workload("optuna_inprocess.py"), storage, "6"], "--max-mem", "400M", timeout=300)
    assert r.rc == 137, r
    assert "study finished" not in r.out
    assert lp.report()["segments"][-1]["cause"] == "oom-kill"
    done_in_process = r.out.count("done:")
    assert done_in_process < 6

    # the same search through leakproof sweep
    f = write(lp, "optuna.yaml", f"""
command: [{lp.py}, {lp.workload(TRAIN)}, --steps, "20", --lr, "{{lr}}", --extra-mib, "{{extra_mib}}"]
method: optuna
metric: {{name: val_loss, goal: minimize}}
parameters:
  extra_mib: {{values: [20, 60, 600]}}
  lr: {{min: 0.01, max: 0.1, distribution: log_uniform}}
run_cap: 6
seed: 3
memory: {{max: 400M}}
""")
    r = sweep(lp, f, timeout=600)
    assert r.rc == 0, r
    rep = sweep_json(lp)
    trials = rep["trials"]
    assert len(trials) == 6, trials
    for t in trials:
        too_big = t["params"]["extra_mib"] == 600
        # too big: out of memory, or skipped once the sweep has seen one like it
        assert t["status"] in (("oom", "skipped") if too_big else ("ok",)), t
        assert (t["metric"] is None) == too_big
        assert 0.01 <= t["params"]["lr"] <= 0.1
    assert any(t["status"] == "ok" for t in trials)
    # Optuna's own storage: every trial; those that did not fit (oom,
    # skipped) PRUNED with what leakproof knows of their memory, so that
    # TPE steers away from them (optuna.md); none with a value
    db = lp.dir / ".leakproof" / "optuna.db"
    assert rep["sweep"]["optuna_storage"].endswith("optuna.db")
    out = subprocess.run(["optuna", "trials", "--storage", rep["sweep"]["optuna_storage"],
                          "--study-name", rep["sweep"]["optuna_study"], "-f", "json"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"},
                         timeout=120)
    assert out.returncode == 0, out.stderr
    told = {t["number"]: t for t in json.loads(out.stdout)}
    assert len(told) == 6
    for t in trials:
        o = told[t["optuna_number"]]
        if t["status"] == "ok":
            assert o["state"] == "COMPLETE" and abs(o["value"] - t["metric"]) < 1e-9, o
        elif t["status"] in ("oom", "skipped"):
            assert o["state"] == "PRUNED" and o.get("value") is None, o
            assert o["user_attrs"]["leakproof_memory"]["outcome"] == t["status"], o
        else:
            assert o["state"] == "FAIL" and o.get("value") is None, o
    assert db.exists() or rep["sweep"]["optuna_storage"]


def test_kill_9_mid_trial_then_resume_runs_every_trial_once(lp):
    f = write(lp, "slow.yaml", f"""
command: [{lp.py}, -c, "import time, leakproof; [(time.sleep(0.05), leakproof.step()) for _ in range(12)]; leakproof.result(m={{i}})"]
method: grid
metric: {{name: m}}
parameters:
  i: {{values: [1, 2, 3, 4, 5]}}
""")
    proc = subprocess.Popen([lp.binary, "sweep", f, "--store", lp.store], cwd=lp.dir, env=lp.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lp.read_until(proc.stderr, b"trial 2/5")       # trial 2 done, 3 running
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stderr.close()
    time.sleep(1.5)                                 # the orphaned trial ends (PDEATHSIG)
    r = sweep(lp, f, "--resume")
    assert r.rc == 0, r
    assert "(resumed)" in r.err
    trials = sweep_json(lp)["trials"]
    ok = sorted(t["params"]["i"] for t in trials if t["status"] == "ok")
    assert ok == [1, 2, 3, 4, 5], trials           # every trial exactly once
    interrupted = [t for t in trials if t["status"] == "interrupted"]
    assert len(interrupted) == 1 and interrupted[0]["params"]["i"] == 3, trials
    again = [t for t in trials if t["trial"] == 3 and t["attempt"] == 1]
    assert again and "interrupted" in again[0]["note"]
    # nothing to do the second time
    r = sweep(lp, f, "--resume")
    assert r.rc == 0 and len(sweep_json(lp)["trials"]) == 6


@pytest.mark.valgrind
def test_oom_retry_with_half(lp):
    f = write(lp, "oom.yaml", f"""
command: [{lp.py}, -c, "import leakproof; x = [bytearray(1 << 20) for _ in range({{batch_size}})]; leakproof.step(); leakproof.result(loss=1.0 / {{batch_size}})"]
method: grid
metric: {{name: loss}}
parameters:
  batch_size: {{values: [16, 400]}}
memory: {{max: 150M}}
on_oom: {{retry_with: {{batch_size: half}}}}
""")
    r = sweep(lp, f, "--parallel", "1")
    assert r.rc == 0, r
    trials = sweep_json(lp)["trials"]
    by = [(t["trial"], t["attempt"], t["params"]["batch_size"], t["status"]) for t in trials]
    assert by[0] == (1, 0, 16, "ok")
    assert by[1] == (2, 0, 400, "oom") and trials[1]["cause"] in ("oom-kill", "budget-kill")
    assert by[2] == (2, 1, 200, "oom")
    assert by[3] == (2, 2, 100, "ok"), by
    assert "batch_size 200 -> 100" in trials[3]["note"]


@pytest.mark.valgrind
def test_values_never_pass_through_a_shell(lp):
    f = write(lp, "quote.yaml", f"""
command: [{lp.py}, -c, "import sys, json, leakproof; print(json.dumps(sys.argv[1:])); leakproof.result(n=len(sys.argv) - 1)", "${{args}}", "name={{name}}"]
method: grid
metric: {{name: n}}
parameters:
  name: {{values: ["a b", "it's", "x; touch pwned", "$(touch pwned2)", "\\"q\\""]}}
""")
    r = sweep(lp, f)
    assert r.rc == 0, r
    trials = sweep_json(lp)["trials"]
    assert [t["metric"] for t in trials] == [2] * 5
    for t in trials:
        v = t["params"]["name"]
        assert t["argv"][-2:] == [f"--name={v}", f"name={v}"], t["argv"]
        log = (lp.dir / "sweeps" / "lp.db" / "1" / f"trial-{t['trial'] - 1}.0.log").read_text()   # beside the store
        assert json.dumps([f"--name={v}", f"name={v}"]) in log, log
    assert not (lp.dir / "pwned").exists() and not (lp.dir / "pwned2").exists()


@pytest.mark.parametrize("text,where,what", [
    ("command: [true]\nmethod: bayes\n", ":2:9:", "method must be grid, random or optuna"),
    ("command: [true]\nparamters: {}\n", ":2:1:", "unknown key 'paramters'"),
    ("command: [true]\nparameters:\n  lr: {values: []}\n", ":3:", "'values' must be a non-empty list"),
    ("command: [true\n", ":", "did not find expected"),
    ("command: 'python3 train.py'\n", ":1:10:", "not one string"),
])
def test_malformed_files_name_line_and_column(lp, text, where, what):
    f = write(lp, "bad.yaml", text)
    r = sweep(lp, f)
    assert r.rc == 124, r
    assert f"bad.yaml{where}" in r.err and what in r.err, r.err
    assert not os.path.exists(lp.store)


@pytest.mark.parametrize("opts,where,what", [
    ("[--store, other.db]", ":2:15:", "'--store' is not allowed here"),
    ("[--stor, other.db]", ":2:15:", "'--stor' is not allowed here"),
    ("[--interval, 50ms, --, echo, pwned]", ":2:33:", "'--' is not allowed here"),
    ("[--trial, '1:0:0']", ":2:15:", "'--trial' is not allowed here"),
    ("[-q]", ":2:15:", "'-q' is not allowed here"),
    ("[--no-status-line]", ":2:15:", "not allowed here"),
    ("[--bogus]", ":2:15:", "'--bogus' is not a `leakproof run` option"),
    ("[--interval, 50ms, python3]", ":2:33:", "'python3' is not an option"),
    ("[--max-mem, lots]", ":2:15:", "refuses"),
    ("[--max-mem]", ":2:15:", "option '--max-mem' needs a value"),
    ("[--stop-signal, STOP]", ":2:15:", "refuses"),
])
def test_bad_run_options_are_refused_with_their_place(lp, opts, where, what):
    # Checked when the file is read, before any trial: a bad option used to
    # make every trial fail while the sweep exited 0; --store sent the runs
    # elsewhere, and "--" replaced the command that --dry-run showed.
    f = write(lp, "opts.yaml", f"command: [true]\nrun_options: {opts}\n")
    for args in ([], ["--dry-run"]):
        r = sweep(lp, f, *args)
        assert r.rc == 124, r
        assert f"opts.yaml{where} run_options: " in r.err and what in r.err, r.err
    assert not os.path.exists(lp.store)


def test_a_metric_name_the_clients_would_change_is_refused_at_load(lp):
    """metric {name: "val loss"}: leakproof.result() sends it as val_loss,
    so no trial has the metric and every one failed while the sweep went
    on. Refused when the file is read, with the rule; a name the clients
    keep runs, and with result_regex the name is only a label."""
    cmd = f'command: [{lp.py}, -c, "import leakproof; leakproof.result(**dict([(\'val loss\', 1.5)]))"]\n'
    f = write(lp, "bad.yaml", cmd + 'metric: {name: "val loss"}\n')
    for args in ([], ["--dry-run"]):
        r = sweep(lp, f, *args)
        assert r.rc == 124, r
        assert "bad.yaml:2:16: metric.name 'val loss' is not a name a client can report" in r.err, r.err
        assert "a letter or _, then letters, digits and _ . : / -" in r.err, r.err
    assert not os.path.exists(lp.store)
    good = write(lp, "good.yaml", cmd + "metric: {name: val_loss}\n")
    r = sweep(lp, good)
    assert r.rc == 0 and "1 ok" in r.err, r
    labelled = write(lp, "label.yaml", f"command: [echo, 'loss=2']\nresult_regex: '^loss=(\\S+)'\n"
                                       'metric: {name: "val loss"}\n')
    r = sweep(lp, labelled)
    assert r.rc == 0 and "1 ok" in r.err, r


def test_two_stores_in_one_directory_keep_their_own_trial_logs(lp):
    """Sweep 1 of a.db and sweep 1 of b.db, in one directory: each trial's
    log is its own store's (sweeps/a.db/1/, sweeps/b.db/1/). Before, both
    wrote sweeps/1/trial-0.0.log, the second over the first."""
    for name, word in (("a.db", "alpha"), ("b.db", "beta")):
        f = write(lp, f"say-{word}.yaml", f"""
command: [{lp.py}, -c, "import sys; print('said', sys.argv[1])", "{{word}}"]
parameters:
  word: {{values: [{word}]}}
""")
        r = lp.cmd(["sweep", f, "--store", str(lp.dir / name)], timeout=300)
        assert r.rc == 0, r
    a = (lp.dir / "sweeps" / "a.db" / "1" / "trial-0.0.log").read_text()
    b = (lp.dir / "sweeps" / "b.db" / "1" / "trial-0.0.log").read_text()
    assert "said alpha" in a and "said beta" not in a, a
    assert "said beta" in b and "said alpha" not in b, b


def test_good_run_options_are_taken(lp):
    f = write(lp, "ok.yaml", "command: [true]\nrun_options: [--interval, 50ms, --no-cgroup]\n")
    r = sweep(lp, f, "--dry-run")
    assert r.rc == 0, r


def test_dry_run_lists_trials(lp):
    f = write(lp, "dry.yaml", f"""
command: [{lp.py}, train.py, "--lr={{lr}}"]
method: random
parameters:
  lr: {{min: 0.001, max: 0.1, distribution: log_uniform}}
  layers: {{min: 1, max: 4}}
run_cap: 3
seed: 1
""")
    r = sweep(lp, f, "--dry-run")
    assert r.rc == 0, r
    assert "3 trials (random)" in r.out
    again = sweep(lp, f, "--dry-run")
    assert again.out == r.out          # seeded: the same trials
    assert not os.path.exists(lp.store)


def test_report_of_a_sweep_by_id_and_errors(lp):
    f = write(lp, "tiny.yaml", f"""
command: [{lp.py}, -c, "import leakproof; leakproof.step(); leakproof.result(v={{v}})"]
metric: {{name: v, goal: maximize}}
parameters:
  v: {{values: [1, 2]}}
""")
    assert sweep(lp, f, "-q").rc == 0
    rep = sweep_json(lp, "sweep:1")
    assert rep["sweep"]["goal"] == "maximize" and [t["metric"] for t in rep["trials"]] == [1, 2]
    assert sweep_json(lp, "s1") == rep
    r = lp.cmd(["report", "sweep:9", "--store", lp.store])
    assert r.rc == 1 and "no sweep 9" in r.err
    r = lp.cmd(["report", "1", "--by", "v", "--store", lp.store])
    assert r.rc == 124 and "--by is for sweeps" in r.err
    # each trial is a run of its own
    with sqlite3.connect(lp.store) as db:
        assert db.execute("select count(*) from runs where sweep_id = 1").fetchone()[0] == 2


def test_each_trial_gets_a_gpu_with_room(lp):
    lib = lp.binary_dir / "t" / "libnvidia-ml.so.1"
    nvml = lp.dir / "nvml.txt"
    # device 1 has the most room; device 2 is nearly full
    nvml.write_text("device 0 total 85899345920 used 20000000000\n"
                    "device 1 total 85899345920 used 5000000000\n"
                    "device 2 total 85899345920 used 85000000000\n")
    env = {"LEAKPROOF_NVML_LIB": str(lib), "FAKE_NVML_FILE": str(nvml), "CUDA_VISIBLE_DEVICES": None}
    f = write(lp, "gpu.yaml", """
command: [/bin/sh, -c, "echo gpu=$CUDA_VISIBLE_DEVICES; sleep 1"]
parameters:
  i: {values: [1, 2]}
parallel: 2
memory: {expect: 10M}
""")
    r = lp.cmd(["sweep", f, "--store", lp.store], env=env, timeout=120)
    assert r.rc == 0, r
    trials = sweep_json(lp)["trials"]
    gpus = [t["note"] for t in trials]
    # side by side: the first on the roomiest device, the second not on the
    # same one while the first's needs are unknown, and never on the full one
    assert sorted(gpus) == ["GPU 0", "GPU 1"], gpus
    logs = [(lp.dir / "sweeps" / "lp.db" / "1" / f"trial-{i}.0.log").read_text() for i in range(2)]
    assert sorted(line for log in logs for line in log.splitlines() if line.startswith("gpu=")) == \
        ["gpu=0", "gpu=1"]
    # a user's own choice is left alone
    r = lp.cmd(["sweep", f, "--store", lp.store, "-q"], env={**env, "CUDA_VISIBLE_DEVICES": "7"}, timeout=120)
    assert r.rc == 0, r
    assert all(t["note"] is None for t in sweep_json(lp)["trials"])


def test_report_by_groups_in_every_format(lp):
    f = write(lp, "by.yaml", f"""
command: [{lp.py}, -c, "import leakproof; leakproof.step(); leakproof.result(v={{a}} * 10 + {{b}})"]
metric: {{name: v}}
parameters:
  a: {{values: [1, 2]}}
  b: {{values: [3, 4, 5]}}
""")
    assert sweep(lp, f, "-q").rc == 0
    r = lp.cmd(["report", "--store", lp.store, "--by", "a", "--format", "json"])
    assert r.rc == 0, r
    rep = json.loads(r.stdout)
    assert rep["by"] == ["a"] and len(rep["trials"]) == 6
    groups = {g["values"]["a"]: g for g in rep["groups"]}
    assert set(groups) == {"1", "2"}
    assert groups["1"]["trials"] == 3 and groups["1"]["statuses"] == "3 ok"
    assert groups["1"]["metric"] == 13 and groups["2"]["metric"] == 23   # the best (minimum)
    csv = lp.cmd(["report", "--store", lp.store, "--by", "b", "--format", "csv"]).out.splitlines()
    assert csv[0].startswith("trials,b,status") and len(csv) == 4
    assert [line.split(",")[1] for line in csv[1:]] == ["3", "4", "5"]
    bad = lp.cmd(["report", "--store", lp.store, "--by", "nope"])
    assert bad.rc == 1 and "no dimension 'nope'" in bad.err


def test_the_table_stars_a_verdict_an_older_judgment_wrote(lp):
    # as `ls` does: a trial's verdict is the one stored when its run ended;
    # one written by another version of the judgment is starred, with what
    # to do, and the JSON says which version wrote each
    f = write(lp, "two.yaml", f"""
command: [{lp.py}, -c, "import leakproof; [leakproof.step() for _ in range(3)]", "${{args}}"]
method: grid
parameters:
  n: {{values: [1, 2]}}
""")
    r = sweep(lp, f, timeout=120)
    assert r.rc == 0, r
    trials = sweep_json(lp)["trials"]
    assert [t["judge_version"] for t in trials] == [trials[0]["judge_version"]] * 2, trials
    assert trials[0]["judge_version"] >= 1, trials
    text = lp.cmd(["report", "--store", lp.store]).out
    assert "*" not in text, text
    with sqlite3.connect(lp.store) as db:
        db.execute("UPDATE runs SET judge_version = NULL WHERE id = ?", (trials[1]["run"],))
    trials = sweep_json(lp)["trials"]
    assert trials[1]["judge_version"] is None and trials[0]["judge_version"] >= 1, trials
    text = lp.cmd(["report", "--store", lp.store]).out
    starred = [line for line in text.splitlines() if "* " in line and line.split()[:1] == ["2"]]
    assert starred, text
    assert f"`leakproof report {trials[1]['run']}` judges it again" in text, text

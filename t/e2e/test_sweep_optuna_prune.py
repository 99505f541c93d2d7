"""
Pruning in `leakproof sweep` with method optuna (src/sweep/trial.c
check_pruning, the Optuna process's `report` in src/sweep/optuna.c,
docs/internals/optuna.md "Pruning"): a trial's values of the sweep metric,
sent as `metric NAME=VALUE` on the client channel at each step, reach
Optuna as intermediate values; when the pruner says so the trial is ended
and recorded `pruned` (TrialState.PRUNED in Optuna's storage), in the
table and the summary. Needs Optuna (python3-optuna).

The sweep: each trial is `good` (loss 0.1 at every step, quick) or `bad`
(loss 0.9 at every step, 0.5 s a step: 15 s if nothing stops it), chosen by
a seeded RandomSampler whose first two draws are good. A MedianPruner
with two start-up trials then prunes a bad trial as soon as it reports past
its warm-up (0.9 above the median of finished trials, 0.1 or 0.5), and can
never prune a good one (0.1 is above no median of values 0.1 and 0.9).
Nothing is timed: a bad trial pruned late is still pruned.
"""
import json
import os
import sqlite3
import subprocess

import pytest

JOB = r"""
import os, sys, time
q = sys.argv[1]
v = 0.1 if q == 'good' else 0.9
fd = int(os.environ['LEAKPROOF_FD'])
for step in range(30):
    os.write(fd, ('step %d\nmetric loss=%r\n' % (step, v)).encode())
    time.sleep(0.02 if q == 'good' else 0.5)
os.write(fd, ('result loss=%r\n' % v).encode())
"""

SEED = 6      # RandomSampler(seed=6) draws good, good, bad, good, bad, ... (checked below)


def have_optuna():
    return subprocess.run(["/usr/bin/python3", "-c", "import optuna"], capture_output=True).returncode == 0


def test_median_pruner_prunes_bad_trials_only(lp):
    if not have_optuna():
        pytest.skip("needs Optuna (python3-optuna)")
    job = lp.dir / "job.py"
    job.write_text(JOB)
    f = lp.dir / "prune.yaml"
    f.write_text(f"""
command: [{lp.py}, {job}, "{{q}}"]
method: optuna
metric: {{name: loss, goal: minimize}}
parameters:
  q: {{values: [good, bad]}}
run_cap: 12
parallel: 2
memory: {{expect: 1M}}
optuna:
  sampler: RandomSampler
  sampler_kwargs: {{seed: {SEED}}}
  pruner: MedianPruner
  pruner_kwargs: {{n_startup_trials: 2, n_warmup_steps: 2}}
""")
    r = lp.cmd(["sweep", str(f), "--store", lp.store], timeout=900)
    assert r.rc == 0, r
    con = sqlite3.connect(f"file:{lp.store}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT idx, status, params, note, optuna_number FROM trials "
                           "ORDER BY idx, attempt").fetchall()
    finally:
        con.close()
    assert len(rows) == 12, rows
    quality = {row[0]: json.loads(row[2])["q"] for row in rows}
    # the sampler's first two draws are good: the pruner has its start-up trials
    assert quality[0] == "good" and quality[1] == "good", rows
    good = [row for row in rows if quality[row[0]] == "good"]
    bad = [row for row in rows if quality[row[0]] == "bad"]
    assert bad, rows
    assert all(row[1] == "ok" for row in good), good          # no good trial pruned
    assert all(row[1] in ("ok", "pruned") for row in bad), bad
    pruned = [row for row in bad if row[1] == "pruned"]
    assert pruned, bad                                         # some bad ones pruned
    assert all("pruned at step" in row[3] and "MedianPruner" in row[3] for row in pruned), pruned
    assert "pruned at step" in r.err

    # Optuna's own storage: PRUNED for the pruned, COMPLETE for the rest
    sw = json.loads(lp.cmd(["report", "--format", "json", "--store", lp.store]).stdout)["sweep"]
    out = subprocess.run(["optuna", "trials", "--storage", sw["optuna_storage"], "--study-name",
                          sw["optuna_study"], "-f", "json"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=120)
    assert out.returncode == 0, out.stderr
    state = {t["number"]: t["state"] for t in json.loads(out.stdout)}
    for row in rows:
        assert state[row[4]] == ("PRUNED" if row[1] == "pruned" else "COMPLETE"), (row, state)

    # the summary counts them
    text = lp.cmd(["report", "--store", lp.store]).out
    assert "%d pruned" % len(pruned) in text, text

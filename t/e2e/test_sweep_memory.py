"""
What a sweep learns of memory (src/sweep/memmodel.c, admit.c): with real
PyTorch trials, a grid where a quarter of the configurations are too large
for the per-trial budget: after the first OOMs the rest of those are
`skipped` with their predicted peak, never started, each in the table, and
the best trial is the one the sweep finds without the model (--no-skip).
Also: on_oom retry_with fit (the largest value predicted to fit, not a
halving), max_consecutive_failures (a machine, or a GPU, that keeps failing
gets no more trials), and the report's memory model.
"""
import json

import pytest

TRAIN = "sweep_train.py"
WIDTHS = [8, 16, 32]
EXTRAS = [5, 10, 20, 40, 60, 80, 300, 450]      # MiB held on top of torch (~150-250 MiB)
TOO_LARGE = 300                                  # from here on, over the 400M budget


def write(lp, name, text):
    path = lp.dir / name
    path.write_text(text)
    return str(path)


def sweep(lp, file, store, *args, timeout=600, env=None):
    return lp.cmd(["sweep", file, "--store", store, *args], timeout=timeout, env=env)


def report_json(lp, store):
    r = lp.cmd(["report", "--format", "json", "--store", store])
    assert r.rc == 0, r
    return json.loads(r.stdout)


def best(trials):
    ok = [t for t in trials if t["status"] == "ok" and t["metric"] is not None]
    b = min(ok, key=lambda t: (t["metric"], t["trial"]))
    return b["params"], b["metric"]


@pytest.mark.slow
def test_too_large_configurations_are_skipped_after_the_first_ooms(lp):
    f = write(lp, "grid.yaml", f"""
command: [{lp.py}, {lp.workload(TRAIN)}, --steps, "3", --width, "{{width}}", --extra-mib, "{{extra_mib}}"]
method: grid
metric: {{name: val_loss, goal: minimize}}
parameters:
  width: {{values: {WIDTHS}}}
  extra_mib: {{values: {EXTRAS}}}
memory: {{max: 400M}}
parallel: 2
""")
    with_model = str(lp.dir / "model.db")
    r = sweep(lp, f, with_model)
    assert r.rc == 0, r
    rep = report_json(lp, with_model)
    trials = rep["trials"]
    assert len(trials) == len(WIDTHS) * len(EXTRAS), [(t["params"], t["status"]) for t in trials]
    shown = [(t["trial"], t["params"]["width"], t["params"]["extra_mib"], t["status"], t["note"]) for t in trials]
    large = [t for t in trials if t["params"]["extra_mib"] >= TOO_LARGE]
    small = [t for t in trials if t["params"]["extra_mib"] < TOO_LARGE]
    # every configuration that fits ran and finished; none was skipped
    assert all(t["status"] == "ok" for t in small), shown
    # the too-large ones: the first few ran out of memory, the rest were skipped
    ooms = [t for t in large if t["status"] == "oom"]
    skipped = [t for t in large if t["status"] == "skipped"]
    assert len(ooms) + len(skipped) == len(large), shown
    assert 1 <= len(ooms) <= 4, shown
    assert len(skipped) >= len(large) - 4, shown
    assert max(t["trial"] for t in ooms) < max(t["trial"] for t in skipped)
    for t in skipped:
        # never started, with what the model predicted and why
        assert t["run"] is None and t["peak_bytes"] is None, t
        assert t["note"] and ("ran out of the budget" in t["note"] or "over the budget" in t["note"]), t
        assert t["predicted"] and t["predicted"]["peak_bytes"] > 300 * 2**20, t
    # the report's memory model: extra_mib drives memory, not width
    model = rep["memory_model"]["host"]
    effects = {e["parameter"]: e for e in model["effects"]}
    assert model["effects"][0]["parameter"] == "extra_mib", model
    assert effects["extra_mib"]["fitted_to"] > 1.5 * effects["extra_mib"]["fitted_from"], model
    assert model["predicted_trials"] >= 10, model
    # every skip is in the table, with its predicted peak, and in the list of skips
    r = lp.cmd(["report", "--store", with_model])
    assert r.rc == 0, r
    rows = [line.split() for line in r.out.splitlines() if line[:1].isdigit()]
    assert sum(1 for row in rows if "skipped" in row) == len(skipped), r.out
    assert "predicted" in r.out and "memory model:" in r.out
    for t in skipped:
        assert "  trial %d: " % t["trial"] in r.out, r.out
    assert f"{len(skipped)} skipped" in r.out

    # the same sweep without the model's skips: every too-large one runs out
    # of memory, and the best trial is the same
    without = str(lp.dir / "plain.db")
    r = sweep(lp, f, without, "--no-skip")
    assert r.rc == 0, r
    plain = report_json(lp, without)["trials"]
    assert all(t["status"] == ("oom" if t["params"]["extra_mib"] >= TOO_LARGE else "ok") for t in plain), \
        [(t["params"], t["status"]) for t in plain]
    assert best(plain) == best(trials)
    # --no-skip says so on the trials the model would have skipped
    assert any("--no-skip" in (t["note"] or "") for t in plain)


def test_oom_retry_with_fit_takes_the_largest_value_predicted_to_fit(lp):
    # Each trial holds its memory a second after its step: a peak is what
    # the sampler saw, and a job that exits the moment it has allocated may
    # be gone before a busy supervisor reads its step (the model is what is
    # tested here, on peaks measured whole; docs/internals/memory-model.md).
    f = write(lp, "fit.yaml", f"""
command: [{lp.py}, -c, "import time, leakproof; x = [bytearray(1 << 20) for _ in range({{batch_size}})]; leakproof.step(); time.sleep(1); leakproof.result(loss=1.0 / {{batch_size}})"]
method: grid
metric: {{name: loss}}
parameters:
  batch_size: {{values: [10, 20, 40, 60, 80, 100, 400]}}
memory: {{max: 160M}}
on_oom: {{retry_with: {{batch_size: fit}}}}
""")
    # --no-skip: the model would not start 400 at all
    r = sweep(lp, f, lp.store, "--parallel", "1", "--no-skip", timeout=300)
    assert r.rc == 0, r
    trials = report_json(lp, lp.store)["trials"]
    by = [(t["trial"], t["attempt"], t["params"]["batch_size"], t["status"]) for t in trials]
    assert [b for b in by if b[1] == 0 and b[2] < 400] == [(i + 1, 0, v, "ok") for i, v in
                                                           enumerate([10, 20, 40, 60, 80, 100])], by
    big = [t for t in trials if t["trial"] == 7]
    assert big[0]["status"] == "oom" and big[0]["params"]["batch_size"] == 400, by
    # the retry: not 200 (a halving), but the largest listed value predicted to fit
    assert len(big) == 2, by
    retry = big[1]
    assert retry["attempt"] == 1 and retry["status"] == "ok", by
    assert retry["params"]["batch_size"] == 100, by
    assert "batch_size 400 -> 100 (predicted peak" in retry["note"], retry["note"]
    # every attempt is recorded, the retry with its prediction
    assert retry["predicted"]["peak_bytes"] < 160e6


GROW = """\
import sys, time
import leakproof
mib = int(sys.argv[1])
kept = []
for _ in range(20):          # MIB MiB, every page touched, over 20 steps
    kept.append(bytearray(b"\\x01" * ((mib << 20) // 20)))
    time.sleep(0.02)
    leakproof.step()
time.sleep(0.3)              # held, so that the peak is seen whole
leakproof.result(loss=1.0 / mib)
"""


def test_on_oom_resize_gives_each_trial_the_memory_it_needs(lp):
    # the peak is set by one parameter; trials start with memory.max (150M)
    # and get what the model predicts, up to max_mem (600M): the one that
    # runs out before the model knows (5 finished trials) runs again with
    # more, the next ones start at their size, one over max_mem never runs
    job = write(lp, "grow.py", GROW)
    f = write(lp, "resize.yaml", f"""
command: [{lp.py}, {job}, "{{mib}}"]
method: grid
metric: {{name: loss}}
parameters:
  mib: {{values: [40, 60, 80, 120, 200, 300, 450, 900]}}
memory: {{max: 150M, max_mem: 600M}}
""")
    r = sweep(lp, f, lp.store, timeout=300)
    assert r.rc == 0, r
    trials = report_json(lp, lp.store)["trials"]
    by = [(t["params"]["mib"], t["attempt"], t["status"], t["allocation_bytes"], t["note"]) for t in trials]
    final = {}
    for t in trials:
        final[t["params"]["mib"]] = t
    # every configuration that fits in max_mem ends ok; at most one OOM kill
    assert all(final[m]["status"] == "ok" for m in (40, 60, 80, 120, 200, 300, 450)), by
    assert sum(t["status"] == "oom" for t in trials) <= 1, by
    # the one over max_mem never runs twice, and never ends ok
    big = [t for t in trials if t["params"]["mib"] == 900]
    assert len(big) <= 2 and big[-1]["status"] in ("skipped", "oom"), by
    assert sum(t["status"] == "oom" for t in big) <= 1, by
    # the larger ones ran with more than memory.max, each allocation said
    mib = 1 << 20
    for m in (300, 450):
        t = final[m]
        assert 150 * mib < t["allocation_bytes"] <= 600 * mib, by
        assert t["allocation_bytes"] >= t["peak_bytes"], by
        assert "allocation " in t["note"] and "predicted peak" in t["note"], by
    retried = [t for t in trials if t["attempt"] > 0]
    assert all(t["note"].startswith("run again after an OOM: allocation ") for t in retried), by
    text = lp.cmd(["report", "--store", lp.store]).out
    header = next(line for line in text.splitlines() if line.startswith("trial "))
    assert " alloc " in header, text


def test_a_trial_that_does_not_fit_is_told_to_optuna_so(lp):
    # method optuna: an OOM'd trial (no retry) is PRUNED in Optuna's study
    # with what leakproof knows of its memory, not FAIL (which TPE ignores)
    optuna = pytest.importorskip("optuna")
    job = write(lp, "grow.py", GROW)
    f = write(lp, "tpe.yaml", f"""
command: [{lp.py}, {job}, "{{mib}}"]
method: optuna
run_cap: 6
metric: {{name: loss}}
parameters:
  mib: {{min: 20, max: 400}}
memory: {{max: 250M}}
optuna: {{sampler: RandomSampler}}
max_consecutive_failures: 0
seed: 3
""")
    r = sweep(lp, f, lp.store, "--no-skip", timeout=300)
    assert r.rc == 0, r
    rep = report_json(lp, lp.store)
    oom = [t for t in rep["trials"] if t["status"] == "oom"]
    if not oom:
        pytest.skip(f"no trial of this seed ran out of memory: {[t['params'] for t in rep['trials']]}")
    study = optuna.load_study(study_name=rep["sweep"]["optuna_study"], storage=rep["sweep"]["optuna_storage"])
    told = {t.number: t for t in study.trials}
    for t in oom:
        ot = told[t["optuna_number"]]
        assert ot.state == optuna.trial.TrialState.PRUNED, ot
        assert ot.user_attrs["leakproof_memory"]["outcome"] == "oom", ot.user_attrs
        assert ot.user_attrs["leakproof_memory"]["budget_bytes"] == 250 << 20, ot.user_attrs


def test_max_consecutive_failures_stops_handing_out_trials(lp):
    f = write(lp, "fail.yaml", f"""
command: [{lp.py}, -c, "import sys; sys.exit({{i}} < 100)"]
method: grid
parameters:
  i: {{values: [1, 2, 3, 4, 5, 6, 7, 8]}}
max_consecutive_failures: 3
""")
    r = sweep(lp, f, lp.store, timeout=300)
    assert r.rc == 1, r
    assert "3 trials in a row ran out of memory or failed on this machine: it gets no more trials" in r.err, r
    assert "--resume" in r.err
    rep = report_json(lp, lp.store)
    trials = rep["trials"]
    assert [t["status"] for t in trials] == ["failed"] * 3, trials
    assert "gets no more trials" in trials[-1]["note"]
    assert rep["sweep"]["status"] == "interrupted"

    # 0: never stop
    f = write(lp, "fail0.yaml", open(f).read().replace("max_consecutive_failures: 3",
                                                       "max_consecutive_failures: 0"))
    store = str(lp.dir / "zero.db")
    r = sweep(lp, f, store, "-q", timeout=300)
    assert r.rc == 0, r
    assert [t["status"] for t in report_json(lp, store)["trials"]] == ["failed"] * 8


def test_a_gpu_that_keeps_failing_gets_no_more_trials(lp):
    lib = lp.binary_dir / "t" / "libnvidia-ml.so.1"
    nvml = lp.dir / "nvml.txt"
    nvml.write_text("device 0 total 85899345920 used 1000000000\n"
                    "device 1 total 85899345920 used 2000000000\n")
    env = {"LEAKPROOF_NVML_LIB": str(lib), "FAKE_NVML_FILE": str(nvml), "CUDA_VISIBLE_DEVICES": None}
    # a broken device 0: its trials fail after a second; device 1's succeed
    f = write(lp, "gpu.yaml", """
command: [/bin/sh, -c, 'if [ "$CUDA_VISIBLE_DEVICES" = 0 ]; then sleep 1; exit 1; fi; sleep 0.3']
parameters:
  i: {values: [%s]}
parallel: 2
memory: {expect: 10M}
max_consecutive_failures: 3
""" % ", ".join(str(i) for i in range(1, 31)))
    r = sweep(lp, f, lp.store, env=env, timeout=300)
    assert r.rc == 0, r
    assert "3 trials in a row ran out of memory or failed on GPU 0: it gets no more trials" in r.err, r
    trials = report_json(lp, lp.store)["trials"]
    on0 = [t for t in trials if (t["note"] or "").startswith("GPU 0")]
    on1 = [t for t in trials if (t["note"] or "").startswith("GPU 1")]
    assert len(on0) == 3 and all(t["status"] == "failed" for t in on0), trials
    assert len(on1) == 27 and all(t["status"] == "ok" for t in on1), trials
    # after the third failure, every trial went to device 1
    last0 = max(t["trial"] for t in on0)
    assert "gets no more trials" in next(t for t in on0 if t["trial"] == last0)["note"]

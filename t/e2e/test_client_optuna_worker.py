"""The Optuna process of a sweep, as Python (python/leakproof/_optuna_worker.py),
with the real Optuna and a study in an SQLite file, without `leakproof sweep`
(docs/internals/optuna.md; the C side: t/unit/test_optuna.c; the sweep's use
of it: test_sweep_optuna*.py).

Its requests are answered by the Worker in this process (open, ask, tell,
report, what Optuna then holds), its line protocol by serve() on hostile
lines, and the script as the sweep starts it, on a pipe.
"""

import io
import json
import math
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENT = os.path.join(REPO, "python")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
WORKER = os.path.join(CLIENT, "leakproof", "_optuna_worker.py")

optuna = pytest.importorskip("optuna", reason="no Optuna (Debian: python3-optuna)")
sys.path.insert(0, CLIENT)
from leakproof import _optuna_worker  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)

SPACE = {
    "lr": {"name": "FloatDistribution", "attributes": {"low": 1e-05, "high": 0.1, "log": True, "step": None}},
    "layers": {"name": "IntDistribution", "attributes": {"low": 1, "high": 4, "log": False, "step": 1}},
    "opt": {"name": "CategoricalDistribution", "attributes": {"choices": ["sgd", "adam"]}},
}


def open_req(storage, study="s", direction="minimize", **kw):
    req = {"op": "open", "storage": storage, "study": study, "direction": direction, "sampler": "TPESampler",
           "sampler_kwargs": None, "pruner": None, "pruner_kwargs": None, "seed": 7, "space": SPACE}
    req.update(kw)
    return req


@pytest.fixture
def storage(tmp_path):
    return "sqlite:///%s/optuna.db" % tmp_path


def in_space(params):
    return (1e-05 <= params["lr"] <= 0.1 and params["layers"] in (1, 2, 3, 4) and params["opt"] in ("sgd", "adam"))


def test_a_study_opened_asked_and_told_is_what_optuna_holds(storage):
    w = _optuna_worker.Worker()
    assert w.handle(open_req(storage)) == {"ok": True}
    asked = [w.handle({"op": "ask"}) for _ in range(4)]
    assert [a["number"] for a in asked] == [0, 1, 2, 3]
    assert all(in_space(a["params"]) for a in asked), asked
    assert len({a["params"]["lr"] for a in asked}) == 4
    for req in ({"op": "tell", "number": 0, "state": "complete", "value": 0.25},
                {"op": "tell", "number": 1, "state": "complete", "value": float("-inf")},
                {"op": "tell", "number": 2, "state": "fail"},
                {"op": "tell", "number": 2, "state": "complete", "value": 1.0},    # told twice: not an error
                {"op": "report", "number": 3, "values": [[0, 0.9], [1, 0.8], [0, 5.0]]},
                {"op": "tell", "number": 3, "state": "pruned"}):
        reply = w.handle(req)
        assert reply in ({"ok": True}, {"prune": False, "step": 0, "value": 5.0}), (req, reply)
    study = optuna.load_study(study_name="s", storage=storage)
    got = [(t.number, t.state.name, t.value, t.params) for t in study.trials]
    assert got == [(0, "COMPLETE", 0.25, asked[0]["params"]), (1, "COMPLETE", float("-inf"), asked[1]["params"]),
                   (2, "FAIL", None, asked[2]["params"]), (3, "PRUNED", 0.8, asked[3]["params"])]
    # a step reported twice keeps its first value (one transaction for the three)
    assert study.trials[3].intermediate_values == {0: 0.9, 1: 0.8}


def test_a_study_that_goes_the_other_way_or_an_unknown_sampler_is_refused(storage):
    w = _optuna_worker.Worker()
    w.handle(open_req(storage))
    with pytest.raises(ValueError, match=r"^study 's' in '%s' is to minimize, but the sweep goal is to maximize "
                                         r"\(give the sweep another study name or storage\)$" % storage):
        _optuna_worker.Worker().handle(open_req(storage, direction="maximize"))
    with pytest.raises(ValueError, match="^optuna has no sampler named 'NoSuchSampler'$"):
        _optuna_worker.Worker().handle(open_req(storage, sampler="NoSuchSampler"))
    with pytest.raises(ValueError, match="^optuna has no pruner named 'exit'$"):
        _optuna_worker.Worker().handle(open_req(storage, pruner="exit"))


def test_the_sampler_gets_the_seed_unless_its_kwargs_give_one():
    s = _optuna_worker.make(optuna.samplers, "sampler", "RandomSampler", None, 5)
    t = _optuna_worker.make(optuna.samplers, "sampler", "RandomSampler", {"seed": 5}, 99)
    u = _optuna_worker.make(optuna.samplers, "sampler", "RandomSampler", {}, 6)
    d = optuna.distributions.FloatDistribution(0, 1)
    draw = [x.sample_independent(None, None, "x", d) for x in (s, t, u)]
    assert draw[0] == draw[1] != draw[2]
    # a class without a seed argument is built without one
    p = _optuna_worker.make(optuna.pruners, "pruner", "MedianPruner", {"n_startup_trials": 1}, 3)
    assert isinstance(p, optuna.pruners.MedianPruner)


def test_a_restarted_process_reports_and_tells_a_trial_another_one_asked(storage):
    first = _optuna_worker.Worker()
    first.handle(open_req(storage, pruner="MedianPruner", pruner_kwargs={"n_startup_trials": 1, "n_warmup_steps": 0}))
    a = first.handle({"op": "ask"})["number"]
    first.handle({"op": "report", "number": a, "values": [[0, 1.0], [1, 0.5]]})
    first.handle({"op": "tell", "number": a, "state": "complete", "value": 0.5})
    b = first.handle({"op": "ask"})["number"]
    # the process died; a new one reopens the study and goes on with b
    second = _optuna_worker.Worker()
    second.handle(open_req(storage, pruner="MedianPruner", pruner_kwargs={"n_startup_trials": 1, "n_warmup_steps": 0}))
    assert second.handle({"op": "report", "number": b, "values": [[0, 9.0], [1, 8.0]]}) == \
        {"prune": True, "step": 1, "value": 8.0}
    assert second.handle({"op": "tell", "number": b, "state": "pruned"}) == {"ok": True}
    t = optuna.load_study(study_name="s", storage=storage).trials[b]
    assert (t.state.name, t.intermediate_values) == ("PRUNED", {0: 9.0, 1: 8.0})


def serve(lines):
    out = io.StringIO()
    _optuna_worker.serve(lines, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_every_line_gets_one_reply_and_a_bad_one_an_error(storage):
    got = serve(["{\"op\": \"ask\"}\n", "not json\n", "{\"op\": \"frob\"}\n", "[1, 2]\n",
                 json.dumps(open_req(storage)) + "\n", "{\"op\": \"ask\"}\n",
                 "{\"op\": \"tell\", \"number\": 0, \"state\": \"complete\", \"value\": Infinity}\n",
                 "{\"op\": \"tell\"}\n"])
    assert len(got) == 8
    assert got[0]["error"].startswith("AttributeError: ")              # asked before the open
    assert got[1]["error"].startswith("JSONDecodeError: Expecting value")
    assert got[2] == {"error": "ValueError: unknown request 'frob'"}
    assert got[3]["error"].startswith("AttributeError: ")              # not an object
    assert got[4] == {"ok": True}
    assert got[5]["number"] == 0 and in_space(got[5]["params"])
    assert got[6] == {"ok": True}
    assert got[7] == {"error": "KeyError: 'number'"}
    assert math.isinf(optuna.load_study(study_name="s", storage=storage).trials[0].value)


def test_the_script_answers_on_its_stdin_and_stdout_and_ends_with_its_input(storage, tmp_path):
    lines = [open_req(storage, sampler="RandomSampler"), {"op": "ask"},
             {"op": "tell", "number": 0, "state": "complete", "value": 1.5}]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    r = subprocess.run([PYTHON, WORKER, "leakproof-optuna"], input=text, capture_output=True, text=True,
                       cwd=tmp_path, timeout=300, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert r.returncode == 0, r
    replies = [json.loads(x) for x in r.stdout.splitlines()]
    assert replies[0] == {"ok": True} and replies[2] == {"ok": True}, replies
    assert replies[1]["number"] == 0 and in_space(replies[1]["params"])
    assert r.stderr == ""
    t = optuna.load_study(study_name="s", storage=storage).trials[0]
    assert (t.state.name, t.value, t.params) == ("COMPLETE", 1.5, replies[1]["params"])


X_SPACE = {"x": {"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": False, "step": None}}}


def search(storage, study, tell_too_large, n=60):
    """A TPE search of x in [0, 1] that maximizes x, where x > 0.6 does not
    fit in memory: the proposals above 0.6 after TPE's 10 random ones."""
    w = _optuna_worker.Worker()
    w.handle(open_req(storage, study=study, direction="maximize", space=X_SPACE))
    over = 0
    for i in range(n):
        a = w.handle({"op": "ask"})
        x = a["params"]["x"]
        if x > 0.6:
            over += i >= 10
            w.handle(tell_too_large(a["number"], x))
        else:
            w.handle({"op": "tell", "number": a["number"], "state": "complete", "value": x})
    return over, w.study


def test_trials_that_do_not_fit_steer_tpe_away(storage):
    # told as failed (what the sweep did before), a trial that ran out of
    # memory teaches TPE nothing: it keeps proposing the best region, which
    # is just past what fits; told as not fitting, the region is avoided
    fail = lambda number, x: {"op": "tell", "number": number, "state": "fail"}
    memory = lambda number, x: {"op": "tell", "number": number, "state": "memory", "outcome": "oom",
                                "predicted_peak_bytes": x * 2e9, "budget_bytes": 1.2e9}
    over_fail, _ = search(storage, "fail", fail)
    over_memory, study = search(storage, "memory", memory)
    assert over_memory < 0.6 * over_fail, (over_memory, over_fail)   # 21 against 47 (seed 7)
    told = [t for t in study.trials if t.user_attrs.get("leakproof_memory")]
    assert told and all(t.state == optuna.trial.TrialState.PRUNED for t in told)
    assert told[0].user_attrs["leakproof_memory"]["outcome"] == "oom"
    assert all(_optuna_worker.memory_constraints(t)[0] > 0 for t in told)
    feasible = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert all(_optuna_worker.memory_constraints(t) == (-1.0,) for t in feasible)
    assert study.best_trial.params["x"] <= 0.6      # never a trial that did not fit

"""The pytest plugin (python/leakproof/pytest_plugin.py): a generated test
file with real PyTorch and NumPy code, run by pytest in a subprocess with
`-p leakproof.pytest_plugin` from this tree; the binary judging the series
is the one under test ($LEAKPROOF_BIN / $LEAKPROOF_BUILD, as conftest.py
finds it).

Leaking: a PyTorch validation step that keeps its loss graph
(`history.append(loss)`: the graph holds each call's activations) and NumPy
code that appends arrays to a global list — each fails with the judgment in
the output (the verdict, growth per step with its interval, the per-step
change table). Clean: the same PyTorch step keeping `loss.item()`, and NumPy
code that fills a bounded cache (warm-up, then flat) — each passes.

Memory is the resident set, which does not depend on how busy the machine
is; each leaking call keeps at least 512 KiB, so 150 calls grow by 75 MiB,
far beyond leakproof's threshold (1 MiB and 1% of the baseline).

Then `leakproof judge` itself on made-up series: a leak (exit 1, growth and
the change table), a cache that fills and stays (exit 0, JSON), too few
points (exit 2) and a malformed line (exit 124, the line named).
"""

import json
import os
import re
import subprocess
import textwrap

import pytest

from conftest import REPO, binary_path

# One xdist worker for the whole module: its module fixture runs a whole pytest session of torch and numpy tests (~35 s),
# once, not once in each worker that draws one of its tests.
pytestmark = pytest.mark.xdist_group("test_pytest_plugin")

TESTS = textwrap.dedent('''\
    import numpy as np
    import pytest

    STEPS = 200
    TORCH_STEPS = 150


    def torch_step(keep_graph):
        torch = pytest.importorskip("torch")
        torch.manual_seed(0)
        torch.set_num_threads(1)
        model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = torch.nn.CrossEntropyLoss()
        history = []

        def step():
            x, y = torch.randn(512, 128), torch.randint(0, 10, (512,))
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            # Validation without torch.no_grad(): its graph keeps x and
            # the hidden activations (512 KiB a call) while it lives.
            vx, vy = torch.randn(512, 128), torch.randint(0, 10, (512,))
            val_loss = loss_fn(model(vx), vy)
            history.append(val_loss if keep_graph else val_loss.item())

        return step


    def test_torch_keeps_loss_graph(leakproof_check):
        leakproof_check(torch_step(keep_graph=True), steps=TORCH_STEPS)


    def test_torch_keeps_item(leakproof_check):
        leakproof_check(torch_step(keep_graph=False), steps=TORCH_STEPS)


    arrays = []


    def test_numpy_global_list(leakproof_check):
        def step():
            batch = np.random.default_rng(len(arrays)).random((256, 256))   # 512 KiB
            arrays.append(batch * 2.0)
        leakproof_check(step, steps=STEPS)


    cache = {}


    def test_numpy_bounded_cache(leakproof_check):
        n = [0]

        def step():
            n[0] += 1
            key = n[0] % 32
            if key not in cache:
                cache[key] = np.random.default_rng(key).random((256, 256))
            return cache[key].sum()
        leakproof_check(step, steps=STEPS)


    def test_objects_the_test_froze_stay_frozen(leakproof_check):
        import gc
        gc.collect()
        gc.freeze()
        frozen = gc.get_freeze_count()
        try:
            leakproof_check(lambda: None, steps=30, inconclusive="pass")
            assert gc.get_freeze_count() >= frozen, (gc.get_freeze_count(), frozen)
        finally:
            gc.unfreeze()
    ''')


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    work = tmp_path_factory.mktemp("plugin")
    (work / "test_generated.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEAKPROOF_")}
    env["PYTHONPATH"] = str(REPO / "python")
    env["LEAKPROOF_BIN"] = str(binary_path())
    r = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-v", "-p", "no:cacheprovider",
                        "-p", "leakproof.pytest_plugin", "test_generated.py"],
                       cwd=str(work), env=env, capture_output=True, text=True, timeout=600)
    return r.stdout + r.stderr


def result_of(out, test):
    m = re.search(r"test_generated\.py::%s (PASSED|FAILED|SKIPPED|ERROR)" % test, out)
    assert m, out[-4000:]
    return m.group(1)


def failure_section(out, test):
    m = re.search(r"_+ %s _+\n(.*?)(?=\n_{3,} |\n=+ )" % test, out, re.S)
    assert m, out[-4000:]
    return m.group(1)


@pytest.mark.parametrize("test", ["test_torch_keeps_loss_graph", "test_numpy_global_list"])
def test_leaking_code_fails_with_the_summary(outcome, test):
    if "torch" in test:
        pytest.importorskip("torch")
    assert result_of(outcome, test) == "FAILED", outcome[-4000:]
    section = failure_section(outcome, test)
    assert "verdict   leak" in section, section
    assert re.search(r"growth    \+[\d.]+ [KM]iB/step \(95% interval \+", section), section
    assert re.search(r"per-step change +Min +Q1 +Median +Q3 +Max", section), section


@pytest.mark.parametrize("test", ["test_torch_keeps_item", "test_numpy_bounded_cache"])
def test_clean_code_passes(outcome, test):
    if "torch" in test:
        pytest.importorskip("torch")
    assert result_of(outcome, test) == "PASSED", outcome[-4000:]


def test_the_plugin_leaves_what_the_test_froze_frozen(outcome):
    # before, its gc.unfreeze() thawed them as well as its own
    assert result_of(outcome, "test_objects_the_test_froze_stay_frozen") == "PASSED", outcome[-4000:]


# ---- `leakproof judge`, the command the plugin runs ----------------------

MIB = 1 << 20


def judge(lp, lines, *args):
    path = os.path.join(str(lp.dir), "series.txt")
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    with open(path, "rb") as f:
        return lp.cmd(["judge", *args], stdin=f)


def test_judge_says_leak_with_growth_and_the_change_table(lp):
    lines = ["%d %d" % (i, 200 * MIB + i * MIB + (i % 7) * 40000) for i in range(1, 121)]
    r = judge(lp, lines)
    assert r.rc == 1, r
    assert "verdict   leak" in r.out
    assert re.search(r"growth    \+1\.0\d MiB/step \(95% interval \+", r.out), r.out
    assert re.search(r"per-step change +Min +Q1 +Median +Q3 +Max", r.out), r.out


def test_judge_passes_a_cache_that_fills_then_stays(lp):
    lines = [str(100 * MIB + min(i, 30) * MIB + (i % 5) * 30000) for i in range(1, 151)]
    r = judge(lp, lines, "--format", "json")
    assert r.rc == 0, r
    j = json.loads(r.out)
    assert j["verdict"] == "no-leak" and j["warmup_points"] > 0, j
    assert set(j["per_step_change"]) == {"min", "q1", "median", "q3", "max"}


def test_judge_is_inconclusive_on_few_points_and_rejects_bad_lines(lp):
    r = judge(lp, [str(MIB * i) for i in range(1, 6)])
    assert r.rc == 2 and "verdict   inconclusive" in r.out, r
    r = judge(lp, ["# comment", "1 100", "", "2 lots"])
    assert r.rc == 124 and "line 4" in r.err, r

"""
`leakproof run` on real training workloads: the verdict and the growth it
reports, against what each workload knows it retains (t/workloads).
"""
import json

import pytest

pytestmark = pytest.mark.slow


def test_torch_keep_loss_is_a_leak_of_the_retained_graph(lp):
    r = lp.run([lp.py, lp.workload("torch_keep_loss.py")], "--interval", "20ms", timeout=180)
    assert r.rc == 0, r
    expected = lp.expected_growth(r.stderr)
    assert expected > lp.MIB
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["x_unit"] == "step"
    assert rep["steps"] == 200, lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(expected, rel=0.20), lp.describe(rep)
    low, high = rep["growth_interval_bytes_per_step"]
    assert low <= rep["growth_bytes_per_step"] <= high
    assert rep["projected_steps_to_limit"] is not None and rep["projected_steps_to_limit"] > 0
    # 200 steps of ~2.2 MB kept: the peak holds them
    assert rep["peak_bytes"] > 200 * expected * 0.8, lp.describe(rep)


def test_torch_item_is_not_a_leak(lp):
    r = lp.run([lp.py, lp.workload("torch_keep_loss.py"), "--item"], "--interval", "20ms",
               timeout=180)
    assert r.rc == 0, r
    assert lp.expected_growth(r.stderr) == 0
    rep = lp.report()
    assert rep["verdict"] == "no-leak", lp.describe(rep)
    assert rep["steps"] == 200
    assert abs(rep["growth_bytes_per_step"]) < 64 * 1024, lp.describe(rep)


def test_noisy_plateau_is_not_a_leak(lp):
    # Steps 0..8 double a buffer to 256 MiB; then flat under up to 48 MiB of
    # noise. A least-squares line through it grows by ~1 MiB per step.
    r = lp.run([lp.py, lp.workload("noisy_plateau.py")], "--interval", "10ms", timeout=120)
    assert r.rc == 0, r
    assert "LSQ_SLOPE_BYTES_PER_STEP=" in r.err
    rep = lp.report()
    assert rep["verdict"] == "no-leak", lp.describe(rep)
    assert rep["steps"] == 110
    assert rep["warmup_steps"] > 0, lp.describe(rep)
    assert rep["projected_steps_to_limit"] is None, lp.describe(rep)
    assert rep["peak_bytes"] > 256 * lp.MIB


@pytest.mark.parametrize("measure", ["pss", "rss"])
def test_slow_leak_on_large_baseline_is_found(lp, measure):
    # 48 KiB per step on a 384 MiB baseline, under up to 8 MiB of noise. The
    # leak is private memory: PSS and RSS must both see it.
    r = lp.run([lp.py, lp.workload("slow_leak.py")], "--interval", "5ms",
               "--measure", measure, timeout=120)
    assert r.rc == 0, r
    expected = lp.expected_growth(r.stderr)
    assert expected == 48 * 1024
    rep = lp.report()
    assert rep["measure"] == measure
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["steps"] == 400
    assert rep["growth_bytes_per_step"] == pytest.approx(expected, rel=0.30), lp.describe(rep)
    assert rep["peak_bytes"] > 384 * lp.MIB


def test_h5py_staging_files_kept_open_leak(lp):
    r = lp.run([lp.py, lp.workload("h5py_staging.py")], "--interval", "10ms", timeout=120)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["steps"] == 250
    # each open in-memory file holds at least its 256 KiB batch
    assert rep["growth_bytes_per_step"] > 256 * 1024, lp.describe(rep)


def test_h5py_staging_files_closed_do_not_leak(lp):
    r = lp.run([lp.py, lp.workload("h5py_staging.py"), "--close"], "--interval", "10ms",
               timeout=120)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["verdict"] == "no-leak", lp.describe(rep)
    assert rep["steps"] == 250


def test_gc_cycles_are_not_a_leak(lp):
    # Reference cycles of 1 MiB a step, freed by gc.collect() every 60 steps:
    # a sawtooth of ~60 MiB whose floors and peaks stay put. A line through
    # it tilts with the phase the run ends at ("grows 14.8 KiB per step ...
    # run longer" on such a job); judged by its cycles it is no leak.
    r = lp.run([lp.py, lp.workload("gc_cycles.py")], "--interval", "20ms", timeout=120)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["verdict"] == "no-leak", lp.describe(rep)
    assert rep["steps"] == 600
    assert "cycles of ~60 steps" in rep["analysis_reason"], lp.describe(rep)
    assert rep["peak_bytes"] > 50 * lp.MIB


def test_gc_cycles_on_a_rising_floor_leak(lp):
    # the same sawtooth, each step also keeping 64 KiB for good
    r = lp.run([lp.py, lp.workload("gc_cycles.py"), "--keep-kib", "64"], "--interval", "20ms",
               timeout=120)
    assert r.rc == 0, r
    expected = lp.expected_growth(r.stderr)
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(expected, rel=0.30), lp.describe(rep)


def test_leak_from_the_first_step_has_no_warmup(lp):
    # 256 KiB kept a step from step 0: the list's reallocations move the
    # level by a few MiB, which once made half the run a "warm-up"
    r = lp.run([lp.py, lp.workload("kept_buffers.py")], "--interval", "20ms", timeout=120)
    assert r.rc == 0, r
    expected = lp.expected_growth(r.stderr)
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["steps"] == 1500
    assert rep["warmup_steps"] <= 150, lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(expected, rel=0.10), lp.describe(rep)


def test_accelerating_leak_is_said_to_accelerate(lp):
    # 256 KiB a step, then 2 MiB a step over the second half: no warm-up,
    # the two rates in the verdict and on the summary's warm-up line
    r = lp.run([lp.py, lp.workload("kept_buffers.py"), "--accelerate", "--steps", "600"],
               "--interval", "20ms", timeout=120)
    assert r.rc == 0, r
    expected = lp.expected_growth(r.stderr)
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["warmup_steps"] <= 60, lp.describe(rep)
    assert "faster and faster" in rep["analysis_reason"], lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(8 * expected, rel=0.10), lp.describe(rep)
    assert "growth bends upward at step " in r.err, r


def test_late_leak_is_judged_from_where_it_starts(lp):
    # nothing kept over the first 60 % of the run, then 256 KiB a step: a
    # line through the whole run would read the bend as serial correlation
    r = lp.run([lp.py, lp.workload("kept_buffers.py"), "--start-at", "0.6", "--steps", "500"],
               "--interval", "20ms", timeout=120)
    assert r.rc == 0, r
    expected = lp.expected_growth(r.stderr)
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert "flat before" in rep["analysis_reason"], lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(expected, rel=0.10), lp.describe(rep)
    bend = int(r.err.split("growth bends upward at step ")[1].split(":")[0])
    assert 280 <= bend <= 340, r.err


def test_a_leak_whose_rate_wanders_has_no_warmup(lp):
    # the bundled demo's series from a run where the allocator made its
    # rate 1.46, 1.82, then 1.56 MiB a step: judged a leak after a warm-up
    # of 338 of its 800 steps, when it grows from the first
    with open(lp.repo / "t" / "fixtures" / "series" / "demo-wandering-rate.txt", "rb") as f:
        r = lp.cmd(["judge", "--format", "json"], stdin=f)
    assert r.rc == 1, r
    got = json.loads(r.out)
    assert got["verdict"] == "leak", got
    assert got["warmup_points"] <= 80, got
    assert 1.4 * lp.MIB < got["growth_bytes_per_step"] < 1.7 * lp.MIB, got

"""
`leakproof run` on real training workloads: the verdict and the growth it
reports, against what each workload knows it retains (t/workloads).
"""
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

"""
The memory gate of `leakproof run` (--expect no-leak, --max-peak,
--max-growth): checked after the job succeeded, exit 123 when broken, the
summary saying which expectation broke and by how much; the job's own
failure status wins over the gate. The bundled demo's own (its leaky loop
breaks --expect no-leak, its fixed one holds it) is in test_run_demo.py.
"""
import pytest

from conftest import workload

GATE = 123


def test_a_leak_breaks_expect_no_leak(lp):
    # 300 steps keeping 64 KiB each: a leak; the gate says so after the
    # verdict, by how much, and exits 123 though the job exited 0
    r = lp.run([lp.py, workload("steps.py"), "channel", "300", "--step-ms", "2"], "--expect", "no-leak")
    assert r.rc == GATE, r
    assert "verdict   leak" in r.err, r.err
    assert "expect    no-leak: broken" in r.err and "per step" in r.err, r.err
    assert "broke 1 memory expectation (exit 123)" in r.err, r.err


def test_max_peak_broken_says_by_how_much(lp):
    # 200 steps keeping 64 KiB each, on top of the interpreter: far above 1 MiB
    r = lp.run([lp.py, workload("steps.py"), "channel", "200", "--step-ms", "2"], "--max-peak", "1M")
    assert r.rc == GATE, r
    assert "expect    max-peak 1.00 MiB: broken" in r.err and "over (" in r.err, r.err


def test_held_expectations_exit_zero_and_quiet_still_says_them(lp):
    r = lp.run([lp.py, workload("steps.py"), "channel", "60", "--step-ms", "2"],
               "--max-peak", "64G", "--max-growth", "1G", "--quiet")
    assert r.rc == 0, r
    assert "verdict" not in r.err   # --quiet: no summary
    assert "max-peak 64.0 GiB: held" in r.err and "max-growth 1.00 GiB/step: held" in r.err, r.err


def test_growth_of_a_run_without_steps_cannot_be_judged(lp):
    r = lp.run([lp.py, "-c", "import time; time.sleep(0.5)"], "--max-growth", "1M")
    assert r.rc == GATE, r
    assert "cannot be judged: the run marked no steps" in r.err, r.err


def test_the_jobs_own_failure_wins(lp):
    r = lp.run([lp.py, "-c", "import sys; sys.exit(3)"], "--max-peak", "1K")
    assert r.rc == 3, r


@pytest.mark.parametrize("args, needle", [
    (["--expect", "leak"], "unknown --expect 'leak'"),
    (["--max-peak", "10%"], "not a percentage"),
    (["--max-peak", "0"], "must be more than zero"),
    (["--max-growth", "lots"], "lots"),
])
def test_bad_gate_options_are_usage_errors(lp, args, needle):
    r = lp.run(["/bin/true"], *args)
    assert r.rc == 124 and needle in r.err, r

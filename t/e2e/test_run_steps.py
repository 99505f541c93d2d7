"""
Where steps come from: the client channel, --step-regex on the job's output
(carriage-return progress bars included), or nowhere (growth per second).
"""
import csv
import io

import pytest

pytestmark = pytest.mark.valgrind


def csv_steps(lp):
    rows = list(csv.DictReader(io.StringIO(lp.report(fmt="csv"))))
    return [int(row["step"]) for row in rows]


def test_steps_from_the_client_channel(lp):
    r = lp.run([lp.py, lp.workload("steps.py"), "channel", "60"])
    assert r.rc == 0, r
    assert "marked 60 steps" in r.out
    rep = lp.report()
    assert rep["steps"] == 60, lp.describe(rep)
    assert rep["x_unit"] == "step"
    assert rep["run"]["step_source"] == "channel"
    assert rep["steps_per_second"] > 0
    assert csv_steps(lp) == list(range(1, 61))   # numbered by leakproof from 1


def test_steps_from_regex_with_progress_bars(lp):
    epochs, first = 24, 5
    r = lp.run([lp.py, lp.workload("steps.py"), "regex", str(epochs), "--first", str(first),
                "--step-ms", "40"],
               "--step-regex", r"^Epoch (\d+)/\d+")
    assert r.rc == 0, r
    # the progress bars pass through as written, carriage returns and all
    assert r.stdout.count(b"\r") > epochs * 10
    assert f"trained {epochs} epochs\n".encode() in r.stdout
    rep = lp.report()
    assert rep["steps"] == epochs, lp.describe(rep)
    assert rep["run"]["step_source"] == "regex"
    assert rep["run"]["step_regex"] == r"^Epoch (\d+)/\d+"
    # numbers from the capture group, including the epochs that follow a bar
    # cleared with "\r" on the same line
    assert csv_steps(lp) == list(range(first, first + epochs))


def test_regex_without_a_group_numbers_steps_itself(lp):
    r = lp.run([lp.py, lp.workload("steps.py"), "regex", "6", "--first", "40",
                "--step-ms", "20"],
               "--step-regex", r"^Epoch \d+")
    assert r.rc == 0, r
    steps = csv_steps(lp)
    assert len(steps) == 6
    assert steps == sorted(steps) and len(set(steps)) == 6
    assert 40 not in steps


def test_no_steps_judges_growth_per_second(lp):
    # keeps 1 MiB every 50 ms: about 20 MiB/s
    r = lp.run([lp.py, lp.workload("steps.py"), "none", "4"], "--interval", "20ms")
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["steps"] == 0
    assert rep["x_unit"] == "s", lp.describe(rep)
    assert rep["run"]["step_source"] == "none"
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(20 * lp.MIB, rel=0.35), lp.describe(rep)

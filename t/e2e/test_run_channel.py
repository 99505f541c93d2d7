"""
The client channel survives its clients: malformed and over-long lines are
counted, never fatal; a job may close it early; a flood of lines is read
whole.
"""
import pytest


@pytest.mark.valgrind
def test_malformed_and_long_lines_are_counted(lp):
    r = lp.run([lp.py, lp.workload("channel_abuse.py"), "bad"])
    assert r.rc == 0, r
    assert "steps=10 bad=3 long=2" in r.out
    rep = lp.report()
    assert rep["run"]["status"] == "done"
    assert rep["channel_bad_lines"] == 3, lp.describe(rep)
    assert rep["channel_long_lines"] == 2, lp.describe(rep)
    # the tail of an over-long line ("step 77") is dropped, not parsed
    assert rep["steps"] == 10, lp.describe(rep)


@pytest.mark.valgrind
def test_job_may_close_the_channel_early(lp):
    r = lp.run([lp.py, lp.workload("channel_abuse.py"), "close"])
    assert r.rc == 0, r
    assert "working after close 9" in r.out
    rep = lp.report()
    assert rep["run"]["status"] == "done"
    assert rep["steps"] == 3
    assert rep["channel_bad_lines"] == 0


def test_flood_of_step_lines_is_read_whole(lp):
    n = 200000
    r = lp.run([lp.py, lp.workload("channel_abuse.py"), "flood", str(n)], timeout=180)
    assert r.rc == 0, r
    assert f"steps={n}" in r.out
    rep = lp.report()
    assert rep["steps"] == n, lp.describe(rep)
    assert rep["channel_bad_lines"] == 0
    assert rep["channel_long_lines"] == 0


def test_step_numbers_are_capped_and_infinite_metrics_refused(lp):
    # 2^63-1 is refused; 2^53 is taken, and a bare step after it (which would
    # be numbered past the cap) is refused, never stored negative. Infinite
    # and NaN metrics are bad lines; a NaN result (a diverged trial) is kept.
    lines = ("step 9223372036854775807\nstep 9007199254740992\nstep\n"
             "epoch 9223372036854775807\nstep 3\n"
             "metric loss=inf\nmetric loss=nan\nmetric loss=-inf\n"
             "result val_loss=nan\n")
    code = f"import os; os.write(int(os.environ['LEAKPROOF_FD']), {lines!r}.encode())"
    r = lp.run([lp.py, "-c", code])
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["run"]["status"] == "done"
    assert rep["steps"] == 2, lp.describe(rep)
    assert rep["channel_bad_lines"] == 6, lp.describe(rep)

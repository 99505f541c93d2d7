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

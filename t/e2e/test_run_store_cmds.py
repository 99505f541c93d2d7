"""
After `leakproof run`: `ls` lists the runs of the store, `report` without a
run shows the latest, and an unknown run is an error that says so.
"""
import re
import sqlite3

import pytest

pytestmark = pytest.mark.valgrind


def two_runs(lp):
    """Two runs, the second failing with 4; their ids, as the jobs saw them."""
    first = lp.run(["sh", "-c", 'echo "$LEAKPROOF_RUN"', "first-job"], "-q")
    second = lp.run(["sh", "-c", 'echo "$LEAKPROOF_RUN"; exit 4', "second-job"], "-q")
    assert (first.rc, second.rc) == (0, 4), (first, second)
    return int(first.out), int(second.out)


def test_ls_lists_every_run(lp):
    first, second = two_runs(lp)
    runs = lp.ls(fmt="json")
    assert isinstance(runs, list), runs
    assert sorted(run["id"] for run in runs) == sorted([first, second])
    text = lp.ls()
    for run_id in (first, second):
        assert str(run_id) in text
    assert "second-job" in text and "first-job" in text


def test_ls_stars_a_verdict_an_older_judgment_wrote(lp):
    """ls shows the verdict stored when a run ended; one written by another
    version of the judgment (here: before versions were recorded) is
    starred, with what to do about it, and its JSON says which wrote it."""
    first, second = two_runs(lp)
    runs = {run["id"]: run for run in lp.ls(fmt="json")}
    version = runs[second]["judge_version"]
    assert isinstance(version, int) and version >= 1, runs[second]
    assert runs[first]["judge_version"] == version
    assert "*" not in lp.ls()
    with sqlite3.connect(lp.store) as db:
        db.execute("UPDATE runs SET judge_version = NULL WHERE id = ?", (first,))
    runs = {run["id"]: run for run in lp.ls(fmt="json")}
    assert runs[first]["judge_version"] is None and runs[second]["judge_version"] == version, runs
    text = lp.ls()
    row = next(line for line in text.splitlines() if line.split()[:1] == [str(first)])
    assert re.search(r" (leak|no-leak|inconclusive)\* ", row), text
    assert f"`leakproof report {first}` judges it again" in text, text


def test_report_without_a_run_shows_the_latest(lp):
    first, second = two_runs(lp)
    latest = lp.report()
    assert latest["run"]["id"] == second
    assert latest["run"]["exit_code"] == 4
    assert lp.report(first)["run"]["exit_code"] == 0


def test_report_formats(lp):
    lp.run(["sh", "-c", "echo hi"], "-q")
    assert lp.report(fmt="text").strip()
    assert lp.report(fmt="md").strip()
    header = lp.report(fmt="csv").split("\n", 1)[0]
    # the memory kinds' columns follow when the run's kinds were measured
    assert header in ("step,epoch,t,rss,pss,uss,swap,cgroup,gpu",
                      "step,epoch,t,rss,pss,uss,swap,cgroup,gpu,anonymous,copy_on_write,file_cache,shared_memory"), header


def test_report_of_an_unknown_run_fails(lp):
    lp.run(["true"], "-q")
    r = lp.cmd(["report", "987654", "--store", lp.store])
    assert r.rc == 1, r
    assert "987654" in r.err
    assert r.stdout == b""


def test_ls_of_a_missing_store_fails_with_its_path(lp):
    missing = lp.dir / "nowhere" / "lp.db"
    r = lp.cmd(["ls", "--store", str(missing)])
    assert r.rc != 0, r
    assert str(missing) in r.err

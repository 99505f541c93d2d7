"""Where a run ran, on the real one-node SLURM and PostgreSQL of
scripts/cluster: `leakproof run` inside a batch job takes the job's memory
cgroup limit (sbatch --mem) as its limit and records the job, its array
task and its allocation with the run; `srun -n 3 leakproof run -- ...`
records one run per rank under one job key, and `report` of that job shows
a row per rank and names the one rank whose memory grows (the workload
leaks only where SLURM_PROCID is 1). Every run goes to the cluster's
shared PostgreSQL store.

Needs root and the packages of scripts/install-deps (postgresql,
slurm-wlm, munge), as test_cluster_services.py.
"""
import json
import shlex
import sys
from pathlib import Path

import pytest
from cluster import wait_for   # the `cluster` fixture: conftest.py

pytestmark = pytest.mark.slow
MIB = 1 << 20


@pytest.fixture
def store(cluster):
    """A fresh database of the cluster's server, as a store URI."""
    return cluster.new_database()[1]


def leakproof(lp, store, *args):
    r = lp.cmd([*args, "--store", store], timeout=60)
    assert r.rc == 0, r
    return json.loads(r.stdout) if "json" in args else r.out


def run_line(lp, store, *command):
    """The shell words of `leakproof run --quiet --store STORE -- COMMAND`."""
    return " ".join(shlex.quote(str(a)) for a in [lp.binary, "run", "--quiet", "--store", store, "--",
                                                   *command])


def test_a_batch_job_runs_under_its_cgroup_limit_and_is_recorded_with_its_job(cluster, lp, store):
    job = cluster.sbatch("--mem=300M", "-o", "batch-%j.out", wrap=run_line(lp, store, "sleep", "1"))
    end = cluster.end_of(job)
    assert end.get("JobState") == "COMPLETED", end
    runs = leakproof(lp, store, "ls", "--format", "json")
    assert len(runs) == 1, runs
    place = runs[0]["placement"]
    assert place["slurm_job_id"] == str(job), place
    assert place["slurm_array_job_id"] is None and place["job_key"] is None and place["rank"] is None, place
    assert place["allocation_bytes"] == 300 * MIB, place       # SLURM's cgroup limit, as leakproof saw it
    rep = leakproof(lp, store, "report", "--format", "json")
    assert rep["limit_bytes"] == 300 * MIB, rep
    assert rep["limit_source"] == "cgroup", rep
    assert rep["run"]["placement"]["slurm_job_id"] == str(job), rep["run"]
    text = leakproof(lp, store, "report")
    assert f"SLURM job {job}" in text and "allocation 300 MiB" in text, text
    ls = leakproof(lp, store, "ls")
    assert f" {job} " in ls.splitlines()[1] + " ", ls


def test_array_tasks_are_recorded_with_their_array_job_and_task(cluster, lp, store):
    job = cluster.sbatch("--array=0-1", "--mem=200M", "-o", "array-%A_%a.out",
                         wrap=run_line(lp, store, "sleep", "0.5"))
    for task in (0, 1):
        wait_for(f"array task {task}",
                 lambda: next((e for e in cluster.ends()
                               if e.get("ArrayJobId") == str(job) and e.get("ArrayTaskId") == str(task)), None))
    runs = leakproof(lp, store, "ls", "--format", "json")
    tasks = sorted((r["placement"]["slurm_array_job_id"], r["placement"]["slurm_array_task_id"]) for r in runs)
    assert tasks == [(str(job), "0"), (str(job), "1")], runs
    assert f"{job}_0" in leakproof(lp, store, "ls")


def test_srun_ranks_are_one_job_and_the_leaking_rank_is_named(cluster, lp, store):
    out = Path(cluster.env["LEAKPROOF_CLUSTER_OUT"]) / "ranks.out"
    line = run_line(lp, store, sys.executable, lp.workload("rank_leak.py"), "--steps", "60",
                    "--leaky-rank", "1", "--mib", "1", "--step-ms", "40")
    job = cluster.sbatch("-n", "3", "--mem=900M", "-o", str(out), wrap=f"srun -n 3 {line}")
    end = cluster.end_of(job, timeout=180)
    assert end.get("JobState") == "COMPLETED", (end, out.read_text() if out.exists() else "")

    runs = leakproof(lp, store, "ls", "--format", "json")
    assert len(runs) == 3, runs
    keys = {r["placement"]["job_key"] for r in runs}
    assert keys == {f"slurm:{job}.0"}, keys
    assert sorted(r["placement"]["rank"] for r in runs) == [0, 1, 2], runs
    assert all(r["placement"]["world_size"] == 3 and r["placement"]["node_id"] == 0 for r in runs), runs

    # the latest run is one rank: `report` shows the job
    rep = leakproof(lp, store, "report", "--format", "json")
    assert rep["job"] == f"slurm:{job}.0" and rep["launcher"] == "slurm", rep
    assert [r["rank"] for r in rep["ranks"]] == [0, 1, 2], rep
    assert rep["growing_ranks"] == [1], rep
    leaky = rep["ranks"][1]
    assert leaky["verdict"] == "leak" and 0.7 * MIB < leaky["growth_bytes"] < 1.3 * MIB, leaky
    assert all(r["verdict"] != "leak" for r in rep["ranks"] if r["rank"] != 1), rep
    text = leakproof(lp, store, "report", "--job", str(rep["ranks"][0]["run"]))
    assert text.splitlines()[0].startswith(f"leakproof: job slurm:{job}.0 \u2014 3 ranks recorded"), text
    assert "rank 1 grows: +" in text and "the other ranks do not" in text, text
    md = leakproof(lp, store, "report", "--job", f"slurm:{job}.0", "--format", "md")
    assert md.count("\n| ") == 4, md     # the head and a row per rank
    # one rank's own report says where it ran
    one = leakproof(lp, store, "report", str(leaky["run"]))
    assert f"SLURM job {job}, step 0" in one and "rank 1 of 3 (node 0)" in one, one

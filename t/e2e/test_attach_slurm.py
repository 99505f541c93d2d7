"""
`leakproof attach --slurm-job JOBID[.STEP]` on the real one-node SLURM of
scripts/cluster (proctrack/cgroup, task/cgroup): a batch job started by
sbatch (t/workloads/attach_job.py: a main process and a pool of workers,
"step N" lines in a log) is found through SLURM, watched through its
cgroup (every process in it but slurmstepd) and judged; the run is stored
with the job; one srun step is watched alone; SLURM's OOM kill is its
recorded end; SIGINT to leakproof leaves the job running; a budget stops the job's processes; job ids that cannot be
watched are refused clearly.

Needs root and the packages of scripts/install-deps (postgresql,
slurm-wlm, munge), as test_cluster_services.py.
"""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cluster import wait_for   # the `cluster` fixture: conftest.py

pytestmark = pytest.mark.slow
STEP_RE = r"^step (\d+)"


def submit(lp, cluster, mode, steps, *options, workers=3, step_s=0.05, launch="exec"):
    """attach_job.py as a batch job (launch "srun": as its step 0); waits
    until it runs and has written "ready" to its log. (job id, log path)."""
    log = Path(lp.dir) / f"job-{mode}.log"
    wrap = f"{launch} {lp.py} {lp.workload('attach_job.py')} {mode} {log} {steps} {workers} {step_s}"
    job = cluster.sbatch("--mem=400M", f"--output={lp.dir}/slurm-%j.out", *options, wrap=wrap)
    wait_for(f"job {job} to write 'ready' to its log", lambda: log.exists() and "ready" in log.read_text(),
             timeout=30, every=0.05)
    return job, log


def attach(lp, cluster, job, *options):
    """`leakproof attach --slurm-job JOB` started, not waited for; returns
    once it has said it is attached (what it said is kept as .said)."""
    argv = [lp.binary, "attach", "--store", lp.store, "--slurm-job", str(job), *map(str, options)]
    proc = subprocess.Popen(argv, cwd=lp.dir, env=lp.env({"SLURM_CONF": cluster.env["SLURM_CONF"]}),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lp._started.append(proc)
    proc.said = lp.read_until(proc.stderr, b"attached to SLURM job", timeout=20)
    return proc


def finish(proc, timeout=30):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, proc.said.decode(errors="replace") + err.decode(errors="replace")


def cancel(cluster, job):
    subprocess.run(["scancel", str(job)], env=cluster.env, capture_output=True, timeout=30)


def test_a_leaking_batch_job_is_watched_through_its_cgroup(cluster, lp):
    job, log = submit(lp, cluster, "leak", 60)
    try:
        a = attach(lp, cluster, job, "--log", log, "--step-regex", STEP_RE)
        Path(f"{log}.go").touch()
        rc, err = finish(a)
        end = cluster.end_of(job, timeout=30)   # before any scancel: SLURM's own word on its end
    finally:
        cancel(cluster, job)
    assert rc == 0, err
    assert f"/job_{job}'" in a.said.decode(), a.said   # its cgroup, whatever SLURM's layout above it
    assert end.get("JobState") == "COMPLETED", end       # watched, not touched
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep) + err
    assert rep["steps"] == 60, err
    # 3 workers keep 256 KiB each per step
    growth = rep["growth_bytes_per_step"]
    assert abs(growth - 3 * 256 * 1024) <= 0.2 * 3 * 256 * 1024, f"growth {growth:.0f} B/step; {err}"
    # the main process and its 3 workers; not slurmstepd, in the job's cgroup too
    assert rep["max_processes"] == 4, lp.describe(rep) + err
    assert (rep["limit_bytes"], rep["limit_source"]) == (400 << 20, "cgroup"), rep["limit_source"]
    run = rep["run"]
    assert run["status"] == "ended" and run["cgroup_mode"] in ("v1", "v2"), run
    assert run["placement"]["slurm_job_id"] == str(job), run["placement"]
    assert run["placement"]["allocation_bytes"] == 400 << 20, run["placement"]   # its cgroup's limit
    assert any(e["kind"] == "attach" and f"SLURM job {job} " in e["detail"] for e in rep["events"]), rep["events"]
    seg = rep["segments"][-1]
    assert seg["cause"] == "ended" and "SLURM's to know" in seg["evidence"], seg
    ls = lp.ls()
    assert " ended " in ls and "leak" in ls and f" {job} " in ls, ls
    assert f"SLURM job {job}" in lp.report(fmt="text")


def test_one_step_of_a_job_is_watched_alone(cluster, lp):
    """--slurm-job J.0: the srun step's cgroup only; the batch script and
    srun, in the batch step, are not the step's."""
    job, log = submit(lp, cluster, "leak", 40, workers=2, launch="srun")
    try:
        a = attach(lp, cluster, f"{job}.0", "--log", log, "--step-regex", STEP_RE)
        Path(f"{log}.go").touch()
        rc, err = finish(a)
    finally:
        cancel(cluster, job)
    assert rc == 0, err
    assert f"/job_{job}/step_0'" in a.said.decode(), a.said
    rep = lp.report()
    assert rep["verdict"] == "leak" and rep["steps"] == 40, lp.describe(rep) + err
    assert rep["max_processes"] == 3, lp.describe(rep) + err   # the main process and its 2 workers
    assert rep["run"]["command"][1].endswith("attach_job.py"), rep["run"]   # the step's own command line
    place = rep["run"]["placement"]
    assert (place["slurm_job_id"], place["slurm_step_id"]) == (str(job), "0"), place
    assert f" {job}.0 " in lp.ls()


def test_sigint_detaches_and_leaves_the_job_running(cluster, lp):
    job, log = submit(lp, cluster, "leak", 0, step_s=0.1)
    try:
        a = attach(lp, cluster, job, "--log", log, "--step-regex", STEP_RE, "--max-mem", "300M")
        Path(f"{log}.go").touch()
        time.sleep(1.5)
        a.send_signal(signal.SIGINT)
        rc, err = finish(a, timeout=15)
        assert rc == 0, err
        assert f"detached from SLURM job {job}" in err, err
        n = log.read_text().count("step ")
        time.sleep(1)
        assert log.read_text().count("step ") > n, "the job stopped making steps"
        assert [f"{job} R"] == cluster.squeue(job), cluster.squeue(job)
    finally:
        cancel(cluster, job)
    rep = lp.report()
    assert rep["run"]["status"] == "detached", rep["run"]
    assert rep["steps"] >= 5, lp.describe(rep)
    assert rep["segments"][-1]["cause"] == "detached"


def test_a_budget_stops_the_jobs_processes(cluster, lp):
    """--max-mem under SLURM's own limit: at the soft limit the job's
    processes get SIGTERM from leakproof (not scancel); the batch step ends
    by that signal, before SLURM's OOM killer."""
    job, log = submit(lp, cluster, "leak", 0, workers=4, step_s=0.02)
    try:
        a = attach(lp, cluster, job, "--log", log, "--step-regex", STEP_RE, "--max-mem", "200M",
                   "--soft-limit", "150M", "--grace", "5s")
        Path(f"{log}.go").touch()
        rc, err = finish(a, timeout=30)
        end = cluster.end_of(job, timeout=30)
    finally:
        cancel(cluster, job)
    assert rc == 0, err
    rep = lp.report()
    assert rep["peak_bytes"] < 200 << 20, lp.describe(rep)
    seg = rep["segments"][-1]
    assert seg["cause"] == "stop-requested" and "soft limit" in seg["evidence"], seg
    assert end.get("JobState") in ("FAILED", "CANCELLED"), end   # a signal, SLURM's word for it
    assert end.get("JobState") != "OUT_OF_MEMORY", end


def test_slurms_oom_kill_is_the_recorded_end(cluster, lp):
    """The job past its sbatch --mem: SLURM's cgroup limit and the kernel's
    OOM killer end a worker, and the job with it; the end is recorded as
    oom-kill from the cgroup's own count (on v1 the kill is counted in the
    step's or task's cgroup, below the job's), or, where SLURM removed that
    cgroup before it was read, from the kernel's record of the kill."""
    job, log = submit(lp, cluster, "leak", 0, "--mem=120M", workers=4, step_s=0.01)
    try:
        a = attach(lp, cluster, job, "--log", log, "--step-regex", STEP_RE)
        Path(f"{log}.go").touch()
        rc, err = finish(a)
        end = cluster.end_of(job, timeout=30)
    finally:
        cancel(cluster, job)
    assert rc == 0, err
    assert end.get("JobState") == "OUT_OF_MEMORY", end
    seg = lp.report()["segments"][-1]
    assert seg["cause"] == "oom-kill", (seg, err)
    ev = seg["evidence"]
    assert "oom_kill rose" in ev or ("the kernel's log" in ev and "Killed process" in ev), (seg, err)


def test_job_ids_that_cannot_be_watched_are_refused(cluster, lp):
    env = {"SLURM_CONF": cluster.env["SLURM_CONF"]}
    done = cluster.sbatch("--mem=50M", f"--output={lp.dir}/done-%j.out", wrap="true")
    cluster.end_of(done)
    running = cluster.sbatch("--mem=50M", f"--output={lp.dir}/run-%j.out", wrap="exec sleep 60")
    try:
        wait_for(f"job {running} to run", lambda: cluster.squeue(running) == [f"{running} R"], timeout=30)
        for spec, rc, said in (("12abc", 124, "is not a SLURM job id"),
                               ("999999", 124, "no SLURM job '999999'"),
                               (str(done), 124, f"SLURM job {done} is COMPLETED, not running"),
                               (f"{running}.7", 124, f"has no step '7' running on this node"),
                               (f"{running}_3", 124, "no SLURM job")):
            r = lp.cmd(["attach", "--store", lp.store, "--slurm-job", spec], env=env, timeout=30)
            assert r.rc == rc and said in r.err, (spec, r)
        r = lp.cmd(["attach", "--store", lp.store, "--slurm-job", str(running), "123"], env=env, timeout=30)
        assert r.rc == 124 and "one or the other" in r.err, r
        # SLURM cannot be asked: no scontrol on the PATH
        r = lp.cmd(["attach", "--store", lp.store, "--slurm-job", str(running)],
                    env={**env, "PATH": "/nonexistent"}, timeout=30)
        assert r.rc == 125 and "scontrol: command not found" in r.err, r
        # another user's job, as nobody: its processes' memory cannot be read
        if os.geteuid() == 0:
            argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", lp.binary, "attach",
                    "--store", "/nonexistent/lp.db", "--slurm-job", str(running)]
            p = subprocess.run(argv, capture_output=True, timeout=30, cwd="/",
                               env={**lp.env(env), "PATH": os.environ["PATH"]})
            assert p.returncode == 125, p
            said = p.stderr.decode()
            assert f"SLURM job {running} is user root's" in said and "needs the rights" in said, said
    finally:
        cancel(cluster, running)
    assert not Path(lp.store).exists() or "attach" not in lp.ls()

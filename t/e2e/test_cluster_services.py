"""scripts/cluster: the private PostgreSQL server and one-node SLURM cluster
that the cluster mode's tests run against, started and stopped by the
script itself, real daemons all.

One module-wide cluster (its own state directory under /tmp, which the
postgres and munge users can reach) serves every test: PostgreSQL answers
through the URI and the socket `env` prints and takes 8 writers at once;
a 4-task job array runs tasks side by side; a job over its --mem is killed
by SLURM's memory cgroup and ends OUT_OF_MEMORY with slurmstepd's oom-kill
line; `scancel` ends a running job CANCELLED; `stop` leaves no process of
the cluster's behind. Job end states come from the jobcomp file (there is
no accounting database, so no sacct). Every wait is bounded; the services
are stopped in the fixture's teardown whatever happens.

Needs root and the packages of scripts/install-deps (postgresql,
python3-psycopg2, slurm-wlm, munge).
"""

import os
import re
import shlex
import subprocess
import threading
import time
from pathlib import Path

import pytest
from cluster import OOM_LINE, cmdline, live, wait_for   # the `cluster` fixture: conftest.py

pytestmark = pytest.mark.slow


def test_start_refuses_while_running_and_status_names_the_daemons(cluster):
    r = cluster.script("start")
    assert r.returncode != 0 and "already running" in r.stderr, r.stderr
    r = cluster.script("status")
    assert r.returncode == 0, r.stdout + r.stderr
    for daemon in ("postgres", "munged", "slurmctld", "slurmd"):
        assert re.search(rf"^{daemon}: running, pid \d+$", r.stdout, re.M), r.stdout
    # the node: idle, or mixed/allocated while another test's jobs run on the
    # run's one cluster
    assert re.search(r"^\S+ (idle|mix|mixed|alloc|allocated)\S* \d+ \d+$", r.stdout, re.M), r.stdout


def test_postgres_answers_and_takes_8_writers_at_once(cluster):
    try:
        import psycopg2
    except ImportError:
        pytest.fail("python3-psycopg2 is missing: scripts/install-deps installs it", pytrace=False)
    uri = cluster.env["LEAKPROOF_CLUSTER_STORE"]
    assert uri.startswith("postgresql://leakproof@127.0.0.1:"), uri
    r = subprocess.run(["psql", "-X", "-tA", uri, "-c", "SELECT 1"], capture_output=True, text=True,
                       timeout=60, env=cluster.env)
    assert (r.returncode, r.stdout.strip()) == (0, "1"), r.stderr
    # the socket, through PGHOST/PGPORT/PGUSER/PGDATABASE alone
    r = subprocess.run(["psql", "-X", "-tA", "-c", "SELECT current_user || ' ' || current_database()"],
                       capture_output=True, text=True, timeout=60, env=cluster.env)
    assert (r.returncode, r.stdout.strip()) == (0, "leakproof leakproof"), r.stderr

    with psycopg2.connect(uri) as db, db.cursor() as cur:
        cur.execute("CREATE TABLE writes (writer int, n int, PRIMARY KEY (writer, n))")
    writers, rows = 8, 50
    start = threading.Barrier(writers, timeout=60)
    errors = []

    def write(w):
        try:
            db = psycopg2.connect(uri, connect_timeout=30)
            start.wait()
            with db.cursor() as cur:
                for n in range(rows):
                    cur.execute("INSERT INTO writes VALUES (%s, %s)", (w, n))
                    db.commit()
            db.close()
        except Exception as e:           # reported below, with the writer
            errors.append(f"writer {w}: {e!r}")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a writer did not finish in 120 s"
    assert not errors, errors
    with psycopg2.connect(uri) as db, db.cursor() as cur:
        cur.execute("SELECT writer, count(*) FROM writes GROUP BY writer ORDER BY writer")
        assert cur.fetchall() == [(w, rows) for w in range(writers)]


def test_array_tasks_run_side_by_side(cluster):
    out = cluster.env["LEAKPROOF_CLUSTER_OUT"]
    job = cluster.sbatch("--array=0-3", "--mem=50M", f"--output={out}/array-%A_%a.out",
                         wrap="date +%s.%N; sleep 6; date +%s.%N")
    ends = wait_for("the 4 array tasks to end", lambda: (
        lambda mine: mine if len(mine) == 4 else None)(
            [e for e in cluster.ends() if e.get("ArrayJobId") == str(job)]))
    assert sorted(int(e["ArrayTaskId"]) for e in ends) == [0, 1, 2, 3]
    assert {e["JobState"] for e in ends} == {"COMPLETED"}, ends
    spans = []
    for task in range(4):
        text = Path(out, f"array-{job}_{task}.out").read_text()
        stamps = [float(x) for x in text.split()]
        assert len(stamps) == 2, text
        spans.append(stamps)
    # the most tasks running at one instant: at least 2 on a node of 8 CPUs
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most >= 2, f"the array's tasks ran one after another: {spans}"


def test_a_job_over_its_mem_is_oom_killed_by_slurm(cluster):
    out = cluster.env["LEAKPROOF_CLUSTER_OUT"]
    grow = "b = []\nwhile True: b.append(bytearray(16 << 20))"
    job = cluster.sbatch("--mem=64M", f"--output={out}/oom-%j.out",
                         wrap=f"/usr/bin/python3 -c {shlex.quote(grow)}")
    end = cluster.end_of(job)
    text = Path(out, f"oom-{job}.out").read_text()
    assert end["JobState"] == "OUT_OF_MEMORY", (end, text)
    assert OOM_LINE.search(text), text


def test_scancel_ends_a_running_job_cancelled(cluster):
    out = cluster.env["LEAKPROOF_CLUSTER_OUT"]
    marker = "6113"      # sleep's argument: finds the job's process among the machine's
    job = cluster.sbatch("--mem=50M", f"--output={out}/cancel-%j.out", wrap=f"echo started; exec sleep {marker}")
    output = Path(out, f"cancel-{job}.out")
    wait_for("the job to start", lambda: output.exists() and "started" in output.read_text())
    sleepers = wait_for("the job's sleep", lambda: [
        int(p) for p in os.listdir("/proc") if p.isdigit() and cmdline(p) == f"sleep {marker} " and live(p)])
    cluster.slurm("scancel", str(job))
    end = cluster.end_of(job)
    assert end["JobState"] == "CANCELLED", end
    wait_for("the cancelled job's process to end", lambda: not any(live(p) for p in sleepers), timeout=60)
    assert re.search(rf"JOB {job} ON \S+ CANCELLED", output.read_text()), output.read_text()


def test_stop_leaves_no_process_behind(cluster):
    # a job still running when the cluster stops: stop cancels it too
    job = cluster.sbatch("--mem=50M", "--output=/dev/null", wrap="exec sleep 6114")
    wait_for("the job to run", lambda: cluster.slurm("squeue", "-h", "-j", str(job), "-o", "%t").strip() == "R")
    wait_for("the job's sleep", lambda: any(cmdline(p) == "sleep 6114 " for p in os.listdir("/proc") if p.isdigit()))
    ours = cluster.pids()
    ours |= {int(p) for p in os.listdir("/proc") if p.isdigit() and
             (str(cluster.state) in cmdline(p) or cmdline(p) == "sleep 6114 ")}
    names = {p: cmdline(p) for p in ours}
    assert len(ours) >= 5, names      # postmaster and its workers, munged, slurmctld, slurmd, ...
    r = cluster.script("stop")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10        # stop waits for each; this is only slack
    while any(live(p) for p in ours) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [f"{p} {names[p]}" for p in ours if live(p)]
    assert not left, f"left running after stop: {left}"
    r = cluster.script("status")
    assert r.returncode == 1 and "running" not in r.stdout.replace("not running", ""), r.stdout
    # the run's other tests share this cluster: started again, in the same
    # state directory, for them
    r = cluster.script("start")
    assert r.returncode == 0, f"scripts/cluster start after stop failed:\n{r.stderr}"
    cluster.load_env()

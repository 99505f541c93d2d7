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
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster"
# slurmstepd names itself slurmstepd-<node> in 22.05 and plain slurmstepd elsewhere
OOM_LINE = re.compile(r"slurmstepd(-[\w.-]+)?: error: Detected \d+ oom-kill event")


def wait_for(what, check, timeout=120.0, every=0.2):
    """check()'s first true value, polled until timeout seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}", pytrace=False)
        time.sleep(every)


def live(pid):
    """Whether pid is a live process (a zombie is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def children_of(pids):
    """Every live process below any of pids."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), list(pids)
    while todo:
        p = todo.pop()
        for child, par in parent.items():
            if par == p and child not in found:
                found.add(child)
                todo.append(child)
    return found


class Cluster:
    """The running services: their environment (from `scripts/cluster env`)
    and helpers to submit jobs and read how they ended."""

    def __init__(self, state):
        self.state = state
        self.env = dict(os.environ, LEAKPROOF_CLUSTER_DIR=str(state))
        self.env.pop("SLURM_CONF", None)

    def script(self, *args, timeout=180):
        return subprocess.run([str(SCRIPT), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def load_env(self):
        r = self.script("env")
        assert r.returncode == 0, r.stderr
        for line in r.stdout.splitlines():
            m = re.fullmatch(r"export (\w+)=(.*)", line)
            assert m, f"not an export line: {line!r}"
            self.env[m.group(1)] = shlex.split(m.group(2))[0]
        return r.stdout

    def slurm(self, *argv, timeout=60):
        r = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout,
                           cwd=self.env["LEAKPROOF_CLUSTER_OUT"])
        assert r.returncode == 0, f"{argv}: {r.stderr}"
        return r.stdout

    def sbatch(self, *options, wrap):
        return int(self.slurm("sbatch", "--parsable", *options, "--wrap", wrap).strip().split(";")[0])

    def ends(self):
        """The jobcomp file: one dict of KEY=VALUE per finished job."""
        path = Path(self.env["LEAKPROOF_CLUSTER_JOBCOMP"])
        text = path.read_text() if path.exists() else ""
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in text.splitlines() if line.strip()]

    def end_of(self, job, timeout=120):
        return wait_for(f"job {job} in the jobcomp file",
                        lambda: next((e for e in self.ends() if e.get("JobId") == str(job)), None), timeout)

    def pids(self):
        """The daemons' pids as their pid files give them, and their children."""
        pids = set()
        for f in ("pg/data/postmaster.pid", "munge/munged.pid", "slurm/slurmctld.pid", "slurm/slurmd.pid"):
            try:
                pids.add(int((self.state / f).read_text().split()[0]))
            except (OSError, IndexError, ValueError):
                pass
        return pids | children_of(pids)


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("scripts/cluster needs root (it hands files to the postgres and munge users)",
                    pytrace=False)
    # not pytest's tmp_path: that sits below a 0700 directory the postgres user cannot enter
    state = Path(tempfile.mkdtemp(prefix="leakproof-cluster-", dir="/tmp"))
    os.chmod(state, 0o755)
    c = Cluster(state)
    try:
        t0 = time.monotonic()
        r = c.script("start")
        c.start_seconds = time.monotonic() - t0
        assert r.returncode == 0, f"scripts/cluster start failed:\n{r.stderr}"
        c.load_env()
        yield c
    finally:
        c.script("stop")
        shutil.rmtree(state, ignore_errors=True)


def test_start_refuses_while_running_and_status_names_the_daemons(cluster):
    r = cluster.script("start")
    assert r.returncode != 0 and "already running" in r.stderr, r.stderr
    r = cluster.script("status")
    assert r.returncode == 0, r.stdout + r.stderr
    for daemon in ("postgres", "munged", "slurmctld", "slurmd"):
        assert re.search(rf"^{daemon}: running, pid \d+$", r.stdout, re.M), r.stdout
    assert re.search(r"^\S+ idle \d+ \d+$", r.stdout, re.M), r.stdout


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

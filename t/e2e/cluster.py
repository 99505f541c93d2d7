"""The private PostgreSQL server and one-node SLURM cluster of
scripts/cluster, as the cluster tests use it: a Cluster (the services'
environment and helpers to submit jobs, query the database and read how
jobs ended) and started(), behind the `cluster` fixture of conftest.py
(one cluster for the whole test run; only one can run on a host at a time).
"""
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

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

    def psql(self, sql, db="leakproof"):
        """The rows of sql in database db, each a list of its columns as text."""
        r = subprocess.run(["psql", "-X", "-q", "-t", "-A", "-F", "|", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql],
                           env=self.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [line.split("|") for line in r.stdout.splitlines() if line]

    def squeue(self, job):
        """Job job's lines in squeue ("ID STATE", a line an array task); none once it is gone."""
        r = subprocess.run(["squeue", "-h", "-r", "-j", str(job), "-o", "%i %t"], env=self.env,
                           capture_output=True, text=True, timeout=60)
        return [line for line in r.stdout.splitlines() if line.strip()] if r.returncode == 0 else []

    def new_database(self):
        """A fresh database of the cluster's server: its name and its URI as a store."""
        db = "lp_" + uuid.uuid4().hex[:12]
        self.psql(f"CREATE DATABASE {db} TEMPLATE template0", db="postgres")
        return db, self.env["LEAKPROOF_CLUSTER_STORE"].rsplit("/", 1)[0] + "/" + db

    def pids(self):
        """The daemons' pids as their pid files give them, and their children."""
        pids = set()
        for f in ("pg/data/postmaster.pid", "munge/munged.pid", "slurm/slurmctld.pid", "slurm/slurmd.pid"):
            try:
                pids.add(int((self.state / f).read_text().split()[0]))
            except (OSError, IndexError, ValueError):
                pass
        return pids | children_of(pids)


def started(state=None):
    """The services (a generator for a fixture). With state, the directory
    of services already started there (scripts/test starts one for all its
    passes): used as they are, and left running. Without, started in a
    state directory of their own, then stopped and removed afterwards,
    whatever happened."""
    if os.geteuid() != 0:
        pytest.fail("scripts/cluster needs root (it hands files to the postgres and munge users)",
                    pytrace=False)
    if state:
        c = Cluster(Path(state))
        r = c.script("status")
        assert r.returncode == 0, f"no cluster running in {state} ($LEAKPROOF_TEST_CLUSTER_DIR):\n{r.stdout}{r.stderr}"
        c.load_env()
        yield c
        return
    # not pytest's tmp_path: that sits below a 0700 directory the postgres user cannot enter
    state = Path(tempfile.mkdtemp(prefix="leakproof-cluster-", dir="/tmp"))
    os.chmod(state, 0o755)
    c = Cluster(state)
    try:
        r = c.script("start")
        assert r.returncode == 0, f"scripts/cluster start failed:\n{r.stderr}"
        c.load_env()
        yield c
    finally:
        c.script("stop")
        shutil.rmtree(state, ignore_errors=True)

"""
End-to-end tests of `leakproof run`, `report` and `ls`: the real binary on
real jobs (t/workloads), each test with its own scratch directory and store.

The binary is $LEAKPROOF_BIN, else $LEAKPROOF_BUILD/leakproof (build-asan for
the sanitizer pass), else build/leakproof of this tree. A missing binary
fails every test with a message saying so; nothing is skipped.
$LEAKPROOF_TEST_WRAPPER, when set (e.g. "valgrind --error-exitcode=99
--leak-check=full"), prefixes every leakproof command; tests marked
`valgrind` are the ones meant for that pass.

The fixture `lp` is a Leakproof bound to the test's scratch directory (also
the jobs' working directory) and its store, with everything a test needs, so
test files import nothing from here:
    lp.run(command, *options)   `leakproof run --store STORE OPTIONS -- COMMAND`
    lp.cmd(args)                `leakproof ARGS` as given
    lp.report(run_id, measure, fmt)   `report --format json`, parsed
    lp.ls(fmt)
    lp.start(command, *options) the same, not waited for: a Popen
    lp.read_until(stream, bytes)   read a started run's output up to a string
    lp.py                       the interpreter running the tests (torch, h5py, numpy)
    lp.repo                     the root of this tree
    lp.workload(name)           the path of t/workloads/NAME
    lp.expected_growth(stderr)  the EXPECTED_GROWTH_BYTES_PER_STEP a workload printed
    lp.procs_with(marker)       live processes whose command line holds marker
    lp.describe(report)         the numbers of a report, for assertion messages
"""
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster import started as cluster_started

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "t" / "workloads"
PY = sys.executable
MIB = 1 << 20

# Variables of an enclosing leakproof run (the suite may itself be run under
# leakproof) that must not leak into the runs the tests make.
_OUTER_VARS = ("LEAKPROOF_FD", "LEAKPROOF_RUN", "LEAKPROOF_RESTART", "LEAKPROOF_STORE", "LEAKPROOF_STOP_SIGNAL",
               "LEAKPROOF_FD_INODE", "LEAKPROOF_TRIAL")


def binary_path():
    if os.environ.get("LEAKPROOF_BIN"):
        return Path(os.environ["LEAKPROOF_BIN"]).resolve()   # the tests run jobs elsewhere
    return REPO / os.environ.get("LEAKPROOF_BUILD", "build") / "leakproof"


WRAPPER = shlex.split(os.environ.get("LEAKPROOF_TEST_WRAPPER", ""))


@pytest.fixture(scope="session")
def lp_bin():
    path = binary_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"leakproof binary not found at {path}: build it with `make` "
                    f"or point LEAKPROOF_BIN at it", pytrace=False)
    return path


def workload(name):
    path = WORKLOADS / name
    assert path.is_file(), f"missing workload {path}"
    return str(path)


def expected_growth(stderr):
    """EXPECTED_GROWTH_BYTES_PER_STEP=<n> from a workload's stderr (bytes or str)."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    m = re.search(r"^EXPECTED_GROWTH_BYTES_PER_STEP=(\d+)$", text, re.M)
    assert m, f"the workload did not print its expected growth; stderr:\n{text[-2000:]}"
    return int(m.group(1))


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def procs_with(marker):
    """Pids of live (not zombie) processes whose command line contains marker."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and needle in _cmdline(entry):
            if _proc_state(entry) not in ("Z", "X", ""):
                found.append(int(entry))
    return found


def descendants(pid):
    """Every process below pid, from /proc (parent links), each after its parent."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(proc):
    """SIGKILL proc and everything it started (by pid), for a test that hung."""
    pids = descendants(proc.pid)
    for pid in [proc.pid] + pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def describe(rep):
    """The numbers of a JSON report worth seeing when an assertion fails."""
    keys = ("verdict", "reason", "growth_bytes_per_step", "growth_interval_bytes_per_step",
            "warmup_steps", "steps", "peak_bytes", "x_unit", "measure",
            "channel_bad_lines", "channel_long_lines", "diagnosis")
    return json.dumps({k: rep.get(k) for k in keys}, indent=1)


class Result:
    def __init__(self, args, rc, stdout, stderr, seconds):
        self.args, self.rc, self.stdout, self.stderr = args, rc, stdout, stderr
        self.seconds = seconds

    @property
    def out(self):
        return self.stdout.decode(errors="replace")

    @property
    def err(self):
        return self.stderr.decode(errors="replace")

    def __repr__(self):
        return (f"<leakproof {' '.join(map(str, self.args))}: exit {self.rc}, "
                f"{self.seconds:.1f} s\n--- stdout (tail)\n{self.out[-1500:]}\n"
                f"--- stderr (tail)\n{self.err[-3000:]}>")


class Leakproof:
    """leakproof with a store of its own in a scratch directory (also the cwd)."""

    MIB = MIB
    py = PY
    repo = REPO
    workload = staticmethod(workload)
    expected_growth = staticmethod(expected_growth)
    procs_with = staticmethod(procs_with)
    describe = staticmethod(describe)
    descendants = staticmethod(descendants)
    kill_tree = staticmethod(kill_tree)

    def __init__(self, binary, scratch):
        self.binary = str(binary)
        self.binary_dir = Path(binary).parent
        self.dir = scratch
        self.store = str(scratch / "lp.db")
        self._started = []

    def env(self, extra=None):
        """The tests' environment without an outer run's variables, with
        extra's (a value of None removes the variable)."""
        env = {k: v for k, v in os.environ.items() if k not in _OUTER_VARS}
        for name, value in (extra or {}).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def cmd(self, args, timeout=120, env=None, stdin=subprocess.DEVNULL):
        """Run `leakproof ARGS...` as given; a Result. A run that outlives
        timeout is killed with everything it started, and the test fails."""
        argv = WRAPPER + [self.binary] + [str(a) for a in args]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=self.dir, env=self.env(env), stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            stdout, stderr = proc.communicate()
            pytest.fail(f"{' '.join(argv)} still running after {timeout} s; "
                        f"stderr tail:\n{stderr.decode(errors='replace')[-2000:]}")
        return Result(args, proc.returncode, stdout, stderr, time.monotonic() - t0)

    def run(self, command, *options, timeout=120, env=None):
        """`leakproof run --store STORE OPTIONS... -- COMMAND...`."""
        return self.cmd(["run", "--store", self.store, *options, "--", *command],
                        timeout=timeout, env=env)

    def start(self, command, *options, env=None):
        """Start `leakproof run ... -- COMMAND` without waiting: a Popen with
        stdout and stderr piped. Killed, with all it started, at the end of
        the test if still running."""
        argv = WRAPPER + [self.binary, "run", "--store", self.store, *options, "--",
                          *[str(c) for c in command]]
        proc = subprocess.Popen(argv, cwd=self.dir, env=self.env(env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        self._started.append(proc)
        return proc

    def read_until(self, stream, needle, timeout=30):
        """Read stream until needle (bytes) has appeared; what was read.
        Fails the test after timeout seconds."""
        data = b""
        end = time.monotonic() + timeout
        fd = stream.fileno()
        while needle not in data:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                pytest.fail(f"{needle!r} did not appear within {timeout} s; read {data[-500:]!r}")
            chunk = os.read(fd, 65536)
            if not chunk:
                pytest.fail(f"end of output before {needle!r}; read {data[-500:]!r}")
            data += chunk
        return data

    def cleanup(self):
        for proc in self._started:
            if proc.poll() is None:
                kill_tree(proc)
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()

    def report(self, run_id=None, measure=None, fmt="json"):
        """`report [RUN] --format FMT`, parsed when json; fails the test unless it
        exits 0."""
        args = ["report"] + ([str(run_id)] if run_id is not None else [])
        args += ["--format", fmt, "--store", self.store]
        if measure:
            args += ["--measure", measure]
        r = self.cmd(args, timeout=60)
        assert r.rc == 0, r
        if fmt != "json":
            return r.out
        try:
            return json.loads(r.stdout)
        except ValueError as e:
            pytest.fail(f"report --format json is not JSON ({e}):\n{r.out[:3000]}")

    def ls(self, fmt="text"):
        r = self.cmd(["ls", "--store", self.store, "--format", fmt], timeout=60)
        assert r.rc == 0, r
        return json.loads(r.stdout) if fmt == "json" else r.out


@pytest.fixture
def lp(lp_bin, tmp_path):
    leakproof = Leakproof(lp_bin, tmp_path)
    yield leakproof
    leakproof.cleanup()



@pytest.fixture(scope="session")
def cluster():
    """scripts/cluster's PostgreSQL and one-node SLURM (t/e2e/cluster.py),
    one for the whole test run: the one in $LEAKPROOF_TEST_CLUSTER_DIR when
    scripts/test started it there for all its passes, else one started here
    and stopped after the last test. Only one SLURM can run on a host, so
    every test that uses it runs in one xdist worker (pytest_collection_-
    modifyitems below)."""
    yield from cluster_started(os.environ.get("LEAKPROOF_TEST_CLUSTER_DIR"))


# ---- how the suite runs: parallel groups, skips that are not allowed ---------

@pytest.hookimpl(tryfirst=True)    # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests of the one cluster run in one xdist worker, one after another
    (`--dist loadgroup`), and are marked `cluster` (scripts/test runs the
    slow ones beside the valgrind pass, which does not use the cluster)."""
    for item in items:
        if "cluster" in item.fixturenames or "pg_server" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("cluster"))
            item.add_marker(pytest.mark.cluster)


# A skip hides a test that did not run. On CI (CI=true, or
# LEAKPROOF_STRICT_SKIPS=1), where the machine is of the project's own kind
# and has everything the suite needs (root, a memory cgroup for jobs, the
# services of scripts/cluster, the compilers), a skip fails the run, with its
# reason, unless the reason matches $LEAKPROOF_ALLOWED_SKIPS (a regular
# expression): a test can no longer pass by skipping.
_STRICT_SKIPS = os.environ.get("LEAKPROOF_STRICT_SKIPS", "1" if os.environ.get("CI") == "true" else "0") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not (_STRICT_SKIPS and rep.skipped and not hasattr(rep, "wasxfail")):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    allowed = os.environ.get("LEAKPROOF_ALLOWED_SKIPS")
    if allowed and re.search(allowed, reason):
        return
    rep.outcome = "failed"
    rep.longrepr = (f"skipped on a machine that can run it (strict skips: CI=true or "
                    f"LEAKPROOF_STRICT_SKIPS=1): {reason}")

"""
Store faults lose nothing silently (issue: hardening, items 8, 11 and 13).

- A store that cannot be written is still read: on a read-only mount, or as
  another user, `ls` and `report` work, and `run` refuses the job, before
  starting it, with "cannot write to store 'PATH': REASON", exit 125.
- `--store :memory:` and the SQLite URIs that would keep the run in memory
  are refused as a usage error (124), the job not started.
- A lock held for over 5 s at the start refuses the job with that reason.
- A real file system (a small tmpfs) that fills during a run: the run is
  whole or marked partial; the next run on the full disk is refused.
- Every write the store makes in a real `leakproof run` fails in turn, from
  an LD_PRELOAD library (fault_preload.c, built here with the system's C
  compiler): once (an I/O error) and from then on (a full disk). Each run
  ends with the job's rows stored whole, or a message and a run that `ls`
  and `report` do not present as whole (partial, saying what is missing, or
  not ended), or the job refused with a message. Never a crash.
"""
import concurrent.futures
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile

import pytest

STEPS_JOB = "i=0; while [ $i -lt {n} ]; do echo step $i; i=$((i+1)); sleep {pause}; done"
STEP_REGEX = r"step (\d+)"


def job(n, pause):
    return ["sh", "-c", STEPS_JOB.format(n=n, pause=pause)]


@pytest.fixture(scope="module")
def fault_lib(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the fault-injection library")
    out = tmp_path_factory.mktemp("fault") / "libfault.so"
    src = os.path.join(os.path.dirname(__file__), "fault_preload.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), src, "-ldl"], check=True)
    return str(out)


# ---- item 13: stores that would lose the run ---------------------------------

@pytest.mark.parametrize("store", [":memory:", "file:x?mode=memory", "file::memory:?cache=shared",
                                   "file:", "file:/tmp/lp-never.db?vfs=memdb"])
def test_in_memory_store_is_refused(lp, store):
    r = lp.cmd(["run", "--store", store, "--", "sh", "-c", "echo started"])
    assert r.rc == 124, r
    assert "started" not in r.out, r
    assert f"cannot use store '{store}'" in r.err and "give the path of a file" in r.err, r


def test_in_memory_store_from_the_environment_is_refused(lp):
    r = lp.cmd(["run", "--", "true"], env={"LEAKPROOF_STORE": ":memory:"})
    assert r.rc == 124 and "cannot use store ':memory:'" in r.err, r


def test_an_empty_store_path_is_refused_and_a_uri_makes_no_directory(lp):
    # --store "" is not "the default store": a script whose variable is empty
    # must not write into the current directory's
    r = lp.cmd(["run", "--store", "", "--", "sh", "-c", "echo job-started"])
    assert r.rc == 124 and "cannot use store ''" in r.err and "job-started" not in r.out, r
    assert lp.cmd(["ls", "--store", ""]).rc == 1
    assert not (lp.dir / ".leakproof").exists()
    # an SQLite URI is SQLite's to open: no directory named "file:" beside it
    store = lp.dir / "uri" / "lp.db"
    store.parent.mkdir()
    r = lp.cmd(["run", "--store", f"file:{store}", "--", "true"])
    assert r.rc == 0, r
    assert store.exists() and not (lp.dir / "file:").exists(), sorted(os.listdir(lp.dir))


def test_sweep_refuses_an_in_memory_store(lp):
    spec = lp.dir / "s.yaml"
    spec.write_text("command: [true]\nparams:\n  x: [1]\n")
    r = lp.cmd(["sweep", "--store", ":memory:", str(spec)])
    assert r.rc == 124 and "cannot use store ':memory:'" in r.err, r


# ---- item 8: a store that cannot be written ----------------------------------

def _readonly_runner(lp, store_dir):
    """A way to run leakproof where store_dir cannot be written: a read-only
    bind mount (root, in a mount namespace of its own), else as nobody. A
    function(args) -> CompletedProcess, and what it is."""
    if os.geteuid() != 0:
        os.chmod(store_dir, 0o555)
        for f in os.listdir(store_dir):
            os.chmod(os.path.join(store_dir, f), 0o444)
        return (lambda args: subprocess.run([lp.binary, *args], capture_output=True, text=True,
                                            cwd=lp.dir, env=lp.env())), "a read-only directory"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode == 0:
        def run(args):
            script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
            return subprocess.run(["unshare", "-m", "sh", "-c", script, str(store_dir), lp.binary, *args],
                                  capture_output=True, text=True, cwd=lp.dir, env=lp.env())
        return run, "a read-only mount"
    if shutil.which("runuser"):
        os.chmod(lp.dir, 0o755)
        os.chmod(store_dir, 0o755)
        return (lambda args: subprocess.run(["runuser", "-u", "nobody", "--", lp.binary, *args],
                                            capture_output=True, text=True, cwd="/",
                                            env=lp.env())), "another user's store"
    pytest.skip("no way to make the store read-only here")


def test_readonly_store_is_read_and_run_refuses(lp):
    store_dir = lp.dir / "ro"
    store = str(store_dir / "lp.db")
    r = lp.cmd(["run", "--store", store, "--step-regex", STEP_REGEX, "--", *job(5, 0)])
    assert r.rc == 0, r
    run, how = _readonly_runner(lp, store_dir)
    try:
        ls = run(["ls", "--store", store, "--format", "json"])
        assert ls.returncode == 0, (how, ls.stderr)
        assert [row["id"] for row in json.loads(ls.stdout)] == [1], ls.stdout
        rep = run(["report", "--store", store, "--format", "json"])
        assert rep.returncode == 0, (how, rep.stderr)
        assert json.loads(rep.stdout)["steps"] == 5
        w = run(["run", "--store", store, "--", "sh", "-c", "echo job-started"])
        assert w.returncode == 125, (how, w)
        assert "job-started" not in w.stdout, w.stdout
        assert f"leakproof: cannot write to store '{store}': " in w.stderr, (how, w.stderr)
        assert any(reason in w.stderr for reason in ("Read-only file system", "Permission denied")), w.stderr
    finally:
        os.chmod(store_dir, 0o755)


def test_a_reader_leaves_nothing_that_locks_out_the_stores_owner(lp):
    # a store in a shared directory (sticky, as /tmp): another user's ls must
    # not leave a -wal or -shm of its own beside it, which the owner's next
    # run could neither write nor remove
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root, to act as two other users")
    with tempfile.TemporaryDirectory(prefix="lp-shared-") as shared:   # the test's own is root's alone
        os.chmod(shared, 0o1777)
        store = os.path.join(shared, "lp.db")

        def as_user(user, args):
            return subprocess.run(["runuser", "-u", user, "--", lp.binary, *args], capture_output=True,
                                  text=True, cwd="/", env=lp.env())
        r = as_user("daemon", ["run", "--store", store, "--", "true"])
        assert r.returncode == 0, r.stderr
        assert sorted(os.listdir(shared)) == ["lp.db"], os.listdir(shared)
        ls = as_user("nobody", ["ls", "--store", store, "--format", "json"])
        assert ls.returncode == 0 and len(json.loads(ls.stdout)) == 1, ls.stderr
        assert sorted(os.listdir(shared)) == ["lp.db"], os.listdir(shared)
        r = as_user("daemon", ["run", "--store", store, "--", "true"])
        assert r.returncode == 0, r.stderr


# ---- item 11: the start, with a lock held -----------------------------------

def test_lock_held_at_start_refuses_with_the_reason(lp):
    r = lp.run(["true"])
    assert r.rc == 0, r
    holder = sqlite3.connect(lp.store, timeout=0, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        r = lp.run(["sh", "-c", "echo job-started"], timeout=60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.rc == 125, r
    assert "job-started" not in r.out, r
    assert "held its write lock for over 5 s" in r.err and "the job is not started" in r.err, r


# ---- the class: every write fails in turn ------------------------------------

def _fault_env(lib, store, at, sticky, errno_, count=None):
    env = {"LD_PRELOAD": lib, "LP_FAULT_PREFIX": store, "LP_FAULT_AT": str(at),
           "LP_FAULT_STICKY": "1" if sticky else "0", "LP_FAULT_ERRNO": str(errno_)}
    if count:
        env["LP_FAULT_COUNT"] = count
    return env


def _check_outcome(lp, store, r, nsteps, how):
    """The rule for one run with a failing write. Returns its kind."""
    assert r.rc in (0, 125), (how, r)
    if r.rc == 125:
        assert "leakproof: cannot" in r.err, (how, r)
        assert "step 0" not in r.out, (how, "the job ran though refused", r)
        return "refused"
    assert f"step {nsteps - 1}" in r.out, (how, r)
    ls = lp.cmd(["ls", "--store", store, "--format", "json"])
    assert ls.rc == 0, (how, ls)
    runs = {row["id"]: row for row in json.loads(ls.stdout)}
    assert 2 in runs, (how, "the run that began is missing", ls.out, r)
    row = runs[2]
    if row["ended_at"] is None:
        assert "leakproof: cannot write the end of run 2" in r.err, (how, "the run's end was lost silently", r)
        return "not ended"
    rep = lp.cmd(["report", "2", "--store", store, "--format", "json"])
    assert rep.rc == 0, (how, rep)
    stored = json.loads(rep.stdout)["steps"]
    if row.get("lost"):
        assert "leakproof: cannot write" in r.err, (how, r)
        assert json.loads(rep.stdout)["run"]["lost"] == row["lost"]
        text = lp.cmd(["report", "2", "--store", store])
        assert "PARTIAL: " + row["lost"] in text.out, (how, text)
        lstext = lp.cmd(["ls", "--store", store])
        assert "partial" in lstext.out, (how, lstext)
        if stored < nsteps:
            missing = f"{nsteps - stored} of {nsteps}"
            assert (f"({missing} missing)" in row["lost"] or f"{missing} steps were not stored" in row["lost"]), \
                (how, row)
        return "partial"
    assert row["steps"] == nsteps and stored == nsteps, (how, "partial data presented as whole", row, stored, r)
    return "whole"


def _every_write(lp, lib, nsteps, pause, sticky, errno_):
    base = str(lp.dir / "base.db")
    r = lp.cmd(["run", "--store", base, "-q", "--", "true"])
    assert r.rc == 0, r
    count_file = str(lp.dir / "count")
    store = str(lp.dir / "count.db")
    shutil.copy(base, store)
    cmd = ["run", "--store", store, "--step-regex", STEP_REGEX, "--", *job(nsteps, pause)]
    r = lp.cmd(cmd, env=_fault_env(lib, store, 0, False, errno_, count_file))
    assert r.rc == 0, r
    total = int(open(count_file).read())
    assert total > 10, total
    def one(n):
        """The run with write n failing, in a store of its own; its kind."""
        store = str(lp.dir / f"f{n}.db")
        shutil.copy(base, store)
        argv = cmd[:2] + [store] + cmd[3:]
        r = lp.cmd(argv, env=_fault_env(lib, store, n, sticky, errno_))
        how = f"write {n} of {total} failing{' and every one after' if sticky else ''} (errno {errno_})"
        kind = _check_outcome(lp, store, r, nsteps, how)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(store + suffix):
                os.unlink(store + suffix)
        return kind

    # The runs are independent (a store and a fault of their own): two per
    # core at a time (each mostly waits on its job's pauses), rather than a
    # hundred one after another.
    kinds = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2 * max(2, os.cpu_count() or 2)) as pool:
        for kind in pool.map(one, range(1, total + 1)):
            kinds[kind] = kinds.get(kind, 0) + 1
    print(f"{total} writes: {kinds}")
    return kinds


# slow: a run per write of the store, about a minute; and not under the
# sanitizer build, whose runtime must come first among the preloaded
# libraries, before the fault library.
@pytest.mark.slow
def test_every_write_failing_from_then_on_disk_full(lp, fault_lib):
    """A disk that fills at each write of a run in turn (1.2 s: a flush in
    the middle of it)."""
    kinds = _every_write(lp, fault_lib, 30, 0.04, True, 28)   # ENOSPC
    assert kinds.get("refused") and kinds.get("whole"), kinds


# slow: a run per write of the store, about a minute; and not under the
# sanitizer build, whose runtime must come first among the preloaded
# libraries, before the fault library.
@pytest.mark.slow
def test_every_write_failing_once_io_error(lp, fault_lib):
    kinds = _every_write(lp, fault_lib, 30, 0.04, False, 5)    # EIO
    assert kinds.get("partial"), kinds


# ---- item 11 on a real file system that fills up -----------------------------

@pytest.mark.parametrize("when", ["at-step-100", "after-rows-went-in"])
def test_disk_that_fills_mid_run_marks_the_run_partial(lp, when):
    """A 2 MiB tmpfs (root, in a mount namespace of its own) holds the
    store; the job fills it after its 100th step: at once (most often
    before the first flush), or once the store shows rows of the run (its
    write-ahead log then holds pages the store file must grow by before
    the log can be written over: nothing more fits, the end of the run
    neither, but for the room the writer keeps in reserve). The run is stored as it ended
    (exit 0, its whole duration, its 400 steps counted), never as
    interrupted, and whole or marked partial with what is missing, never
    presented as whole with steps missing; with the disk full, the next
    run is refused, saying why; no file of the reserve is left."""
    if os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("needs root and a mount namespace for a small tmpfs")
    mnt = lp.dir / "small"
    mnt.mkdir()
    store = mnt / "lp.db"
    times = lp.dir / "job-times"
    # after-rows-went-in: wait (bounded) for a flush to have stored steps,
    # read as a user would, rather than for a time on a busy machine
    wait = "" if when == "at-step-100" else (
        "n=0; until \"$LP\" report 2 --store \"$STORE\" --format json 2>/dev/null"
        " | grep -q \"\\\"steps\\\": [1-9]\"; do n=$((n+1)); [ $n -gt 600 ] && break; sleep 0.05; done; ")
    job_sh = ("date +%s.%N > \"$TIMES\"; i=0; while [ $i -lt 400 ]; do echo step $i; i=$((i+1)); "
              f"if [ $i = 100 ]; then {wait}dd if=/dev/zero of=\"$MNT/fill\" bs=4k 2>/dev/null; fi; sleep 0.005; done; "
              "date +%s.%N >> \"$TIMES\"")
    script = f"""
set -e
mount -t tmpfs -o size=2m tmpfs "$MNT"
"$LP" run -q --store "$STORE" -- true
set +e
"$LP" run -q --store "$STORE" --step-regex '{STEP_REGEX}' -- sh -c '{job_sh}' >/dev/null
echo "rc=$?" >&2
ls -a "$MNT" > "{lp.dir}/mnt-after-run.txt"
dd if=/dev/zero of="$MNT/fill2" bs=1k 2>/dev/null
"$LP" run -q --store "$STORE" -- echo job-ran
echo "full_rc=$?" >&2
"$LP" ls --store "$STORE" --format json > "{lp.dir}/ls.json"
"$LP" ls --store "$STORE" > "{lp.dir}/ls.txt"
"$LP" report 2 --store "$STORE" --format json > "{lp.dir}/report.json"
"$LP" report 2 --store "$STORE" > "{lp.dir}/report.txt"
"""
    env = dict(lp.env(), LP=lp.binary, STORE=str(store), MNT=str(mnt), TIMES=str(times))
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                       cwd=lp.dir, env=env, timeout=120)
    assert "rc=0" in r.stderr and "full_rc=125" in r.stderr, r.stderr
    assert "job-ran" not in r.stdout, r.stdout
    assert "leakproof: cannot" in r.stderr and ("No space left on device" in r.stderr
                                                or "database or disk is full" in r.stderr), r.stderr
    assert not [f for f in (lp.dir / "mnt-after-run.txt").read_text().split() if "reserve" in f]
    job_began, job_ended = map(float, times.read_text().split())
    row = {x["id"]: x for x in json.loads((lp.dir / "ls.json").read_text())}[2]
    rep = json.loads((lp.dir / "report.json").read_text())
    stored = rep["steps"]
    # stored as it ended: not "interrupted" at its last sample
    assert row["ended_at"] is not None, (row, r.stderr)
    assert (row["status"], row["exit_code"], row["exit_signal"]) == ("done", 0, None), (row, r.stderr)
    assert rep["run"]["status"] == "done" and rep["run"]["exit_code"] == 0, (rep["run"], r.stderr)
    assert row["started_at"] <= job_began and row["ended_at"] >= job_ended, (row, job_began, job_ended)
    assert row["steps"] == 400, (row, r.stderr)
    assert "cannot write the end of run" not in r.stderr, r.stderr
    if when == "after-rows-went-in":
        assert stored >= 100, (stored, r.stderr)   # what went in before the disk filled
    if stored < 400:
        missing = f"{400 - stored} of 400"
        assert row.get("lost") and missing in row["lost"] and "steps" in row["lost"], (row, stored, r.stderr)
        assert rep["run"]["lost"] == row["lost"]
        assert "PARTIAL: " + row["lost"] in (lp.dir / "report.txt").read_text()
        assert "partial" in (lp.dir / "ls.txt").read_text().splitlines()[1], (lp.dir / "ls.txt").read_text()
        assert "the run will be marked partial" in r.stderr, r.stderr
    else:
        assert not row.get("lost"), row

"""
`leakproof top` as a person uses it, while real jobs run under `leakproof
run`: one leaking (steps.py channel: 64 KiB kept per step), one flat after
its warm-up (noisy_plateau.py). The live view is opened in tmux (80x24),
read with `capture-pane` and typed at with `send-keys`: both runs appear
with command and memory; sorting, filtering, a run's detail, resizing, and
that `q` and Ctrl-C leave with status 0 and the terminal restored. With no
terminal, `--once` prints a snapshot as text, `--once --format json` as JSON.

Every wait is bounded (generously: the machine may be busy); the tmux
server (a socket of its own) and the jobs are stopped whatever happens.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import time
import uuid

import pytest

# a terminal in tmux, read at a pace: alone, not beside other tests (docs/internals/testing.md)
pytestmark = pytest.mark.serial

LEAKY = "steps.py"
FLAT = "noisy_plateau.py"
WAIT_S = 90          # for anything the jobs or top must show


def wait_for(what, probe, timeout=WAIT_S, interval=0.3):
    """Call probe() until it returns something true; that value. Fails the
    test after timeout seconds with what and the last value seen."""
    end = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(interval)


def start_jobs(lp, flat=True):
    """The leaking job, then (once the store holds it) the flat one."""
    job = lp.start([lp.py, lp.workload(LEAKY), "channel", "100000", "--step-ms", "20"], "-q")
    # Two supervisors creating the same new store at once may race on its
    # schema, and so may a reader: let the first create it.
    def first_run():
        if job.poll() is not None:
            pytest.fail(f"the leaking job ended with {job.returncode}: {job.stderr.read().decode()[-2000:]}")
        r = lp.cmd(["top", "--once", "--format", "json", "--store", lp.store], timeout=60)
        return r.rc == 0 and by_command(json.loads(r.stdout), LEAKY)
    wait_for("the first run in the store", first_run)
    if flat:
        lp.start([lp.py, lp.workload(FLAT), "--steps", "100000", "--step-ms", "50", "--noise-mib", "4"], "-q")


def once_json(lp):
    r = lp.cmd(["top", "--once", "--format", "json", "--store", lp.store], timeout=60)
    assert r.rc == 0, r
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        pytest.fail(f"top --once --format json is not JSON ({e}):\n{r.out[:3000]}")


def by_command(runs, name):
    found = [r for r in runs if name in r["command_line"]]
    return found[0] if found else None


def test_once_text_and_json_while_jobs_run(lp):
    start_jobs(lp)

    def both_judged():
        runs = once_json(lp)
        leaky, flat = by_command(runs, LEAKY), by_command(runs, FLAT)
        if leaky and flat and leaky["growth_bytes_per_step"] and leaky["growth_bytes_per_step"] > 0 and flat["memory_bytes"]:
            return runs
        return None

    runs = wait_for("both runs in `top --once --format json`, the leaking one growing", both_judged)
    leaky, flat = by_command(runs, LEAKY), by_command(runs, FLAT)
    for run in (leaky, flat):
        assert run["state"] == "running", run
        assert run["memory_bytes"] > 1 << 20, run
        assert run["measure"] == "pss", run
        assert run["hostname"], run
        assert run["command"][0] == lp.py, run
        for key in ("recent_bytes", "gpu_bytes", "verdict", "projected_seconds_to_limit", "steps_per_second",
                    "restarts", "last_end_cause", "x_unit", "limit_bytes"):
            assert key in run, (key, run)
        assert run["restarts"] == 0 and run["last_end_cause"] is None, run
    assert leaky["x_unit"] == "step", leaky
    assert leaky["steps_per_second"] > 0, leaky
    assert leaky["recent_bytes"] and leaky["recent_bytes"][-1] > 0, leaky
    # Sorted by time to the limit: the leaking run (the only one with a
    # projection) comes first.
    if leaky["projected_seconds_to_limit"] is not None and flat["projected_seconds_to_limit"] is None:
        assert runs.index(leaky) < runs.index(flat), runs
    # Every key `ls --format json` has, under the same name (one run
    # vocabulary: docs/internals/json.md), while the runs are running.
    r = lp.cmd(["ls", "--format", "json", "--store", lp.store], timeout=60)
    assert r.rc == 0, r
    listed = {run["id"]: run for run in json.loads(r.stdout)}
    for run in (leaky, flat):
        missing = set(listed[run["id"]]) - set(run)
        assert not missing, (missing, run)

    text = lp.cmd(["top", "--once", "--store", lp.store], timeout=60)
    assert text.rc == 0, text
    lines = text.out.splitlines()
    assert lines[0].split()[:3] == ["ID", "STATE", "MEM"], text.out
    assert any(LEAKY in line and "running" in line for line in lines[1:]), text.out
    assert any(FLAT in line and "running" in line for line in lines[1:]), text.out

    # No terminal and no --once: a snapshot all the same.
    piped = lp.cmd(["top", "--store", lp.store], timeout=60)
    assert piped.rc == 0, piped
    assert LEAKY in piped.out and FLAT in piped.out, piped


def test_usage_errors(lp):
    for args in (["--format", "yaml", "--once"], ["--delay", "0"], ["--bogus"], ["extra"]):
        r = lp.cmd(["top", "--store", lp.store, *args], timeout=30)
        assert r.rc == 124, r
    missing = lp.cmd(["top", "--once", "--store", str(lp.dir / "none.db")], timeout=30)
    assert missing.rc == 1 and "none.db" in missing.err, missing


class Tmux:
    """A tmux server of its own (socket name), one 80x24 session running
    `leakproof top`, then printing its exit status and the terminal modes."""

    def __init__(self, lp, *top_args):
        self.tmux = shutil.which("tmux")
        if not self.tmux:
            pytest.fail("tmux is not installed (scripts/install-deps installs it)", pytrace=False)
        self.sock = f"lp-top-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        top = " ".join(shlex.quote(str(a)) for a in [lp.binary, "top", "--store", lp.store, *top_args])
        # After top: its status, then the terminal's modes as stty sees them.
        # bash, not sh: Ctrl-C reaches the whole (foreground) process group,
        # and bash, unlike dash, goes on when top handled it and exited 0.
        script = (f"cd {shlex.quote(str(lp.dir))} && {top}; status=$?; "
                  "modes=$(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | "
                  "tr '\\n' ' '); echo \"TOP-EXITED $status $modes END\"; exec sleep 600")
        env = lp.env({"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": None, "TMUX": None})
        self.run("-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24", "bash", "-c", script,
                 env=env)

    def run(self, *args, env=None, check=True):
        r = subprocess.run([self.tmux, "-L", self.sock, *args], env=env, capture_output=True, timeout=30)
        if check:
            assert r.returncode == 0, (args, r.stderr.decode(errors="replace"))
        return r.stdout.decode(errors="replace")

    def screen(self):
        return self.run("capture-pane", "-p")

    def keys(self, *keys):
        self.run("send-keys", *keys)

    def wait(self, what, pred, timeout=WAIT_S):
        """The screen once pred(screen) is true."""
        last = [""]

        def probe():
            last[0] = self.screen()
            return last[0] if pred(last[0]) else None
        try:
            return wait_for(what, probe, timeout=timeout)
        except pytest.fail.Exception:
            pytest.fail(f"{what}: not on the screen within {timeout} s; the screen:\n{last[0]}")

    def kill(self):
        subprocess.run([self.tmux, "-L", self.sock, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def tmux_top(lp):
    sessions = []

    def open_top(*args):
        t = Tmux(lp, *args)
        sessions.append(t)
        return t
    yield open_top
    for t in sessions:
        t.kill()


ROW = re.compile(r"^\s*(\d+)\s+(?:[a-z]+\s+)?(\d+(?:\.\d)?[BKMGTP])\s")


def rows(screen):
    """(id, memory text, line) of every run line of the list."""
    out = []
    for line in screen.splitlines()[2:]:
        m = ROW.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2), line))
    return out


def row_with(screen, name):
    found = [r for r in rows(screen) if name in r[2]]
    return found[0] if found else None


def size_bytes(text):
    return float(text[:-1]) * 1024 ** "BKMGTP".index(text[-1])


def exited_cleanly(screen):
    return re.search(r"TOP-EXITED .* END", screen)


def check_exit(screen):
    assert "TOP-EXITED 0" in screen, screen
    assert "leakproof top:" not in screen, f"the list is still on the screen after top left:\n{screen}"
    modes = screen.split("TOP-EXITED 0", 1)[1].split("END")[0].split()
    assert "icanon" in modes and "echo" in modes, f"the terminal was left in raw mode:\n{screen}"


def test_live_view_in_tmux(lp, tmux_top):
    start_jobs(lp)
    top = tmux_top("-d", "0.5")

    screen = top.wait("both runs with their command and memory",
                      lambda s: row_with(s, "steps.py") and row_with(s, "noisy_plat"))
    assert "leakproof top: 2 running" in screen, screen
    assert "sort: to-limit" in screen, screen
    for line in screen.splitlines():
        assert len(line) <= 80, screen
    assert "ID" in screen.splitlines()[1] and "COMMAND" in screen.splitlines()[1], screen

    # The leaking run is judged so within a few refreshes, and growing.
    def judged_leak(s):
        row = row_with(s, "steps.py")
        return row and " leak " in row[2]
    top.wait("the leaking run judged a leak", judged_leak)

    # Sort by memory: the header says so and the rows come largest first.
    top.keys("s")
    screen = top.wait("sorted by memory", lambda s: "sort: memory" in s and len(rows(s)) == 2)
    sizes = [size_bytes(m) for _, m, _ in rows(screen)]
    assert sizes == sorted(sizes, reverse=True), screen
    top.keys("r")
    top.wait("the order reversed", lambda s: "(reversed)" in s)
    top.keys("<", "r")
    top.wait("back to the time to the limit", lambda s: "sort: to-limit" in s and "(reversed)" not in s)

    # Filter by command text.
    top.keys("/")
    top.wait("the filter prompt", lambda s: "filter:" in s.splitlines()[-1] if s.splitlines() else False)
    top.keys("noisy", "Enter")
    screen = top.wait("only the flat run", lambda s: "filter: noisy" in s and row_with(s, "noisy_plat")
                      and not row_with(s, "steps.py"))
    top.keys("/", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "Enter")
    top.wait("both runs again", lambda s: "filter:" not in s.splitlines()[0]
             and row_with(s, "steps.py") and row_with(s, "noisy_plat"))

    # Enter opens the selected run (the first after Home): its processes.
    top.keys("Home")
    first = rows(top.screen())[0]
    top.keys("Enter")
    screen = top.wait("the run's detail", lambda s: f"run {first[0]}:" in s and "PID" in s and "python3" in s)
    assert ("steps.py channel" if "steps.py" in first[2] else "noisy_plateau.py --steps") in screen, screen
    assert "per step so far:" in screen and "memory " in screen, screen
    assert "not traced" in screen, screen
    top.keys("Escape")
    top.wait("the list again", lambda s: "leakproof top:" in s)

    top.keys("q")
    check_exit(top.wait("top gone after q", exited_cleanly, timeout=30))


def test_resize_and_ctrl_c(lp, tmux_top):
    start_jobs(lp, flat=False)
    top = tmux_top()
    top.wait("the run", lambda s: row_with(s, "steps.p"))
    top.run("resize-window", "-x", "132", "-y", "30")
    # Wider: the STATE column and more of the command come back.
    screen = top.wait("the list redrawn at 132 columns", lambda s: "STATE" in s and row_with(s, "steps.py"))
    assert "steps.py channel 100000" in screen, screen
    top.run("resize-window", "-x", "60", "-y", "15")
    screen = top.wait("the list redrawn at 60 columns", lambda s: "STATE" not in s and row_with(s, "steps.p"))
    for line in screen.splitlines():
        assert len(line) <= 60, screen
    top.keys("C-c")
    check_exit(top.wait("top gone after Ctrl-C", exited_cleanly, timeout=30))


def test_detail_of_a_traced_run_shows_its_growing_site(lp, tmux_top):
    lp.start([lp.py, lp.workload("slow_leak.py"), "--steps", "100000", "--step-ms", "20",
              "--baseline-mib", "16", "--noise-mib", "2"], "-q", "--trace")
    top = tmux_top()
    top.wait("the traced run", lambda s: row_with(s, "slow_leak"))
    top.keys("Enter")
    # The Python line that keeps the bytes, judged growing per step. Until
    # the first steps are stored (a loaded machine, a sanitizer build) it is
    # judged per second, or not yet at all: wait for the judgment per step.
    def site_lines(s):
        return [line for line in s.splitlines() if "slow_leak.py:" in line and "/step" in line]
    screen = top.wait("its allocation site judged per step",
                      lambda s: "allocation sites growing the most:" in s and site_lines(s))
    screen = top.wait("its allocation site judged growing",
                      lambda s: site_lines(s) and "(flat)" not in site_lines(s)[0]
                      and "(undecided)" not in site_lines(s)[0])
    site = site_lines(screen)
    assert site and "(flat)" not in site[0], screen
    top.keys("q")
    check_exit(top.wait("top gone after q", exited_cleanly, timeout=30))


def test_a_run_whose_supervisor_died_is_not_shown_running(lp):
    """SIGKILL of the supervisor (and its job): the run is never ended by it.
    A reader of the store sees its supervisor is gone and shows the run as
    interrupted (store_mark_stale_runs); where that cannot be told, top
    tells it from its job gone and calls it interrupted too. Never running."""
    start_jobs(lp, flat=False)
    # Once the job has started and been measured (its pid is in the store).
    wait_for("the job measured", lambda: (by_command(once_json(lp), LEAKY) or {}).get("memory_bytes"))
    supervisor = lp._started[0]
    lp.kill_tree(supervisor)        # SIGKILL: the run is never ended by its supervisor

    last = [None]

    def gone():
        last[0] = by_command(once_json(lp), LEAKY)
        if not last[0]:
            return None
        if last[0]["state"] == "interrupted" or last[0]["status"] == "interrupted":
            return last[0]
        return None
    try:
        run = wait_for("the run shown interrupted", gone)
    except pytest.fail.Exception:
        pytest.fail(f"the run is still shown running; top says: {last[0]}")
    assert run["state"] != "running", run


def clone_ended_runs(store, n):
    """n copies of run 1 of the SQLite store (its row, segments and
    samples), ended within the last minute: a store with many runs ended
    lately, made in a second rather than n runs of a job."""
    import sqlite3
    db = sqlite3.connect(store)
    try:
        def cols(table, skip):
            return ", ".join(r[1] for r in db.execute(f"PRAGMA table_info({table})") if r[1] != skip)
        runs, segs, samples = cols("runs", "id"), cols("segments", "run_id"), cols("samples", "run_id")
        now = time.time()
        for i in range(n):
            rid = db.execute(f"INSERT INTO runs ({runs}) SELECT {runs} FROM runs WHERE id = 1").lastrowid
            db.execute("UPDATE runs SET started_at = ?, ended_at = ? WHERE id = ?", (now - 70, now - 60 + i * 0.01, rid))
            db.execute(f"INSERT INTO segments (run_id, {segs}) SELECT ?, {segs} FROM segments WHERE run_id = 1", (rid,))
            db.execute(f"INSERT INTO samples (run_id, {samples}) SELECT ?, {samples} FROM samples WHERE run_id = 1",
                       (rid,))
        db.commit()
    finally:
        db.close()


def top_pid(top):
    """The pid of the leakproof top running in the tmux pane (the pane's
    shell's child)."""
    shell = int(top.run("display-message", "-p", "#{pane_pid}").strip())
    with open(f"/proc/{shell}/task/{shell}/children") as f:
        children = f.read().split()
    return int(children[0]) if children else None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_many_ended_runs_are_read_once(lp, tmux_top):
    """300 runs ended lately, refreshed 5 times a second: their rows do not
    change after their end, so top reads them once and then costs next to
    nothing (it read each again at every refresh: a third of a core here).
    Every one is listed and judged all the same."""
    r = lp.run(["sh", "-c", "sleep 0.3"], "-q")
    assert r.rc == 0, r
    clone_ended_runs(lp.store, 300)
    top = tmux_top("-d", "0.2")
    top.wait("all 301 runs listed", lambda s: "0 running, 301 ended lately" in s, timeout=60)
    pid = top_pid(top)
    assert pid, top.screen()
    time.sleep(2)        # runs first seen ended are judged over the first refreshes
    c0, w0 = cpu_seconds(pid), time.monotonic()
    time.sleep(4)
    share = (cpu_seconds(pid) - c0) / (time.monotonic() - w0)
    assert share < 0.10, f"top used {100 * share:.0f}% of a core watching 301 ended runs"
    screen = top.screen()
    assert "0 running, 301 ended lately" in screen and rows(screen), screen
    top.keys("q")
    check_exit(top.wait("top gone after q", exited_cleanly, timeout=30))

    runs = once_json(lp)
    assert len(runs) == 301, len(runs)
    assert all(run["state"] == "ended" and run["memory_bytes"] for run in runs), runs[:3]


def test_a_store_deleted_and_made_again_is_followed(lp, tmux_top):
    """The store file deleted and a new one made at its path (another
    inode): top drops the old store's runs and shows the new one's."""
    r = lp.run(["env", "OLD_STORE_JOB=1", "sleep", "1"], "-q")
    assert r.rc == 0, r
    top = tmux_top()
    top.wait("the old store's run", lambda s: row_with(s, "OLD_STORE_JOB"), timeout=30)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(lp.store + suffix):
            os.unlink(lp.store + suffix)
    lp.start(["env", "NEW_STORE_JOB=1", "sleep", "60"], "-q")
    screen = top.wait("the new store's running job, the old store's run gone",
                      lambda s: row_with(s, "NEW_STORE_JOB") and not row_with(s, "OLD_STORE_JOB"), timeout=20)
    assert "1 running, 0 ended lately" in screen, screen
    top.keys("q")
    check_exit(top.wait("top gone after q", exited_cleanly, timeout=30))

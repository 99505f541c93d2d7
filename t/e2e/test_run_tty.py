"""
`leakproof run` in a terminal, as a person uses it: an interactive bash in
tmux (a socket of its own, 100x30) types the commands, the screen is read
with `capture-pane` and keys sent with `send-keys`. The job gets a terminal
of its own (a pseudo-terminal, docs/internals/terminal.md): isatty() is
true on its descriptors, input() and breakpoint() read what is typed, the
status line leaves its prompt alone, the window's size follows the
terminal's, stdout and stderr keep the order they were written in, Ctrl-Z
stops the job and leakproof and `fg` resumes both (steps keep their own
times), Ctrl-C ends the whole job. Without a terminal, and with --no-pty, the job has pipes as before;
with --no-pty its stdin stays the terminal, which it reads in the foreground.

Every wait is bounded (generously: the machine may be busy); the tmux
server and whatever the jobs started are ended whatever happens.
"""
import os
import pty
import re
import shlex
import shutil
import sqlite3
import subprocess
import time
import uuid

import pytest

# a terminal in tmux, read at a pace: alone, not beside other tests (docs/internals/testing.md)
pytestmark = pytest.mark.serial

WAIT_S = 90

JOB = r'''
import os, sys, time
print("PID", os.getpid(), flush=True)
print("ISATTY", os.isatty(0), os.isatty(1), os.isatty(2), flush=True)
if "ask" in sys.argv:
    name = input("Name: ")
    print("HELLO", name, flush=True)
if "debug" in sys.argv:
    answer = 6
    breakpoint()
    print("AFTER-DEBUGGER", flush=True)
steps = int(sys.argv[1])
for i in range(steps):
    print("Epoch %d" % i, flush=True)
    time.sleep(0.3)
print("DONE", flush=True)
'''

TREE = r'''
import os, sys, time, subprocess
kids = [subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]) for _ in range(2)]
print("KIDS", " ".join(str(k.pid) for k in kids), flush=True)
while True:
    time.sleep(0.2)
'''


ORDER = r'''
import os, signal, sys, time
resized = []
signal.signal(signal.SIGWINCH, lambda *a: resized.append(1))
print("SIZE", *os.get_terminal_size(1), flush=True)
end = time.monotonic() + 90
while not resized and time.monotonic() < end:
    time.sleep(0.05)
print("RESIZED", *os.get_terminal_size(1), flush=True)
for i in range(300):
    os.write(1 + i % 2, b"%s %d\n" % (b"out" if i % 2 == 0 else b"err", i))
print("WROTE", flush=True)
'''


def wait_for(what, probe, timeout=WAIT_S, interval=0.2):
    end = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(interval)


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, T, Z, ...); None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


class Shell:
    """An interactive bash in a tmux server of its own."""

    COLS = 100
    PROMPT = "$ "

    def __init__(self, lp):
        self.lp = lp
        self.tmux = shutil.which("tmux")
        if not self.tmux:
            pytest.fail("tmux is not installed (scripts/install-deps installs it)", pytrace=False)
        self.sock = f"lp-tty-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        env = lp.env({"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": None, "TMUX": None,
                      "PS1": self.PROMPT, "PROMPT_COMMAND": None})
        self.run("-f", "/dev/null", "new-session", "-d", "-x", str(self.COLS), "-y", "30", "-c", str(lp.dir),
                 "bash", "--norc", "--noprofile", "-i", env=env)
        self.wait("the shell's prompt", lambda s: "$" in s)

    def run(self, *args, env=None, check=True):
        r = subprocess.run([self.tmux, "-L", self.sock, *args], env=env, capture_output=True, timeout=30)
        if check:
            assert r.returncode == 0, (args, r.stderr.decode(errors="replace"))
        return r.stdout.decode(errors="replace")

    def screen(self):
        # -J joins wrapped lines; the history too, for long outputs
        return self.run("capture-pane", "-p", "-J", "-S", "-1000")

    def keys(self, *keys):
        self.run("send-keys", *keys)

    def type(self, line):
        # A line that ends in the last column leaves the terminal's wrap
        # pending: the newline after it is taken as that wrap, the line is
        # marked wrapped, and capture-pane -J joins the command's first
        # line of output to it (it happened when a temporary path's length
        # made the line exactly 300 columns). A trailing blank moves the end.
        if (len(self.PROMPT) + len(line)) % self.COLS == 0:
            line += " "
        self.run("send-keys", "-l", line)
        self.run("send-keys", "Enter")

    def leakproof(self, command, *options):
        """Type `leakproof run ... -- COMMAND; echo EXIT=$?`."""
        argv = [self.lp.binary, "run", "--store", self.lp.store, *options, "--", *command]
        self.type(" ".join(shlex.quote(str(a)) for a in argv) + "; echo EXIT=$?")

    def wait(self, what, pred, timeout=WAIT_S):
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
def shell(lp):
    sh = Shell(lp)
    pids = []
    sh.pids = pids
    yield sh
    sh.kill()
    for pid in pids:          # whatever a failed test left behind
        try:
            os.kill(pid, 9)
        except (ProcessLookupError, PermissionError):
            pass


def write(lp, name, text):
    path = lp.dir / name
    path.write_text(text)
    return str(path)


def exit_status(screen):
    m = re.search(r"^EXIT=(\d+)", screen, re.M)
    return int(m.group(1)) if m else None


def job_pid(screen):
    m = re.search(r"^PID (\d+)", screen, re.M)
    return int(m.group(1)) if m else None


def ctrl_z_then_fg(shell, pid):
    """Ctrl-Z: the shell says the job stopped, the job's main process is
    stopped and stays so for 2 s, printing nothing; `fg` then runs it to
    its end (DONE), and fg's status is 0."""
    shell.keys("C-z")
    s = shell.wait("the shell's word that the job stopped", lambda s: "Stopped" in s)
    wait_for("the job stopped", lambda: proc_state(pid) == "T")
    epochs = len(re.findall(r"^Epoch \d+", s, re.M))
    time.sleep(2)   # stopped for a while: nothing may happen meanwhile
    assert proc_state(pid) == "T"
    assert len(re.findall(r"^Epoch \d+", shell.screen(), re.M)) == epochs
    # (the command line's `echo EXIT=$?` ran at the stop: 148, 128+SIGTSTP)
    shell.type("fg; echo FG=$?")
    s = shell.wait("the job's end", lambda s: re.search(r"^FG=\d+", s, re.M))
    assert "DONE" in s and re.search(r"^FG=0$", s, re.M), s


def steps_and_events(lp):
    db = sqlite3.connect(lp.store)
    try:
        steps = db.execute("SELECT step, t FROM steps ORDER BY t").fetchall()
        events = db.execute("SELECT kind, detail, t FROM events ORDER BY t").fetchall()
    finally:
        db.close()
    return steps, events


def test_input_and_a_terminal_of_its_own(lp, shell):
    job = write(lp, "job.py", JOB)
    shell.leakproof([lp.py, job, "2", "ask"], "--status-line")
    s = shell.wait("the job's prompt", lambda s: "Name: " in s)
    pid = job_pid(s)
    if pid:
        shell.pids.append(pid)
    assert "ISATTY True True True" in s, s
    # The status line comes, and the prompt stays where it was.
    s = shell.wait("the status line", lambda s: "[leakproof]" in s)
    assert re.search(r"^Name: ", s, re.M), s
    shell.type("bob")
    s = shell.wait("the job's end", lambda s: exit_status(s) is not None)
    assert re.search(r"^Name: bob$", s, re.M), s
    assert "HELLO bob" in s and "DONE" in s, s
    assert exit_status(s) == 0, s
    # the terminal is given back as it was: canonical mode, echo
    shell.type("stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e echo | tr '\\n' ' '; echo MODES-END")
    s = shell.wait("the terminal's modes", lambda s: re.search(r"^icanon echo MODES-END", s, re.M))


def test_breakpoint_reads_the_terminal(lp, shell):
    job = write(lp, "job.py", JOB)
    shell.leakproof([lp.py, job, "1", "debug"])
    s = shell.wait("the debugger's prompt", lambda s: "(Pdb)" in s)
    pid = job_pid(s)
    if pid:
        shell.pids.append(pid)
    shell.type("p answer * 7")
    shell.wait("the debugger's answer", lambda s: re.search(r"^42$", s, re.M))
    shell.type("c")
    s = shell.wait("the job's end", lambda s: exit_status(s) is not None)
    assert "AFTER-DEBUGGER" in s and exit_status(s) == 0, s


def test_ctrl_z_stops_job_and_leakproof_and_fg_resumes_both(lp, shell):
    job = write(lp, "job.py", JOB)
    shell.leakproof([lp.py, job, "14"], "--step-regex", r"^Epoch (\d+)")
    s = shell.wait("a few steps", lambda s: "Epoch 3" in s)
    pid = job_pid(s)
    assert pid, s
    shell.pids.append(pid)
    ctrl_z_then_fg(shell, pid)

    steps, events = steps_and_events(lp)
    kinds = [(k, d) for k, d, _ in events]
    assert ("signal", "continued") in kinds, kinds
    stopped = [t for k, d, t in events if k == "signal" and d == "stopped by Ctrl-Z (SIGSTOP to the job)"]
    resumed = [t for k, d, t in events if k == "signal" and d == "continued"]
    assert stopped and resumed and resumed[0] - stopped[0] >= 1.5, events
    # every step recorded, each at its own time: none while stopped, and
    # no pile of steps sharing one timestamp after fg
    assert [n for n, _ in steps] == list(range(14)), steps
    assert not [t for _, t in steps if stopped[0] < t < resumed[0]], (steps, events)
    times = [t for _, t in steps]
    assert max(sum(1 for u in times if abs(u - t) < 0.01) for t in times) <= 4, steps


@pytest.mark.parametrize("how", [[], ["--no-pty"]], ids=["pty", "no-pty"])
def test_ctrl_c_ends_the_whole_job(lp, shell, how):
    """On the job's pty, Ctrl-C is a byte leakproof reads and turns into
    SIGINT to the job (an event says so); without one, the terminal sends
    it to the job's process group, which has the foreground."""
    tree = write(lp, "tree.py", TREE)
    shell.leakproof([lp.py, tree], *how)
    s = shell.wait("the job's workers", lambda s: re.search(r"^KIDS \d+ \d+", s, re.M))
    kids = [int(p) for p in re.search(r"^KIDS (\d+) (\d+)", s, re.M).groups()]
    shell.pids.extend(kids)
    shell.keys("C-c")
    s = shell.wait("the job's end", lambda s: exit_status(s) is not None)
    assert exit_status(s) == 130, s
    wait_for("the workers gone", lambda: all(proc_state(k) in (None, "Z") for k in kids))
    if not how:
        _, events = steps_and_events(lp)
        assert ("signal", "SIGINT from the terminal (Ctrl-C)") in [(k, d) for k, d, _ in events], events


def test_window_size_and_the_order_of_stdout_and_stderr(lp, shell):
    job = write(lp, "order.py", ORDER)
    shell.leakproof([lp.py, job])
    s = shell.wait("the job's size", lambda s: re.search(r"^SIZE \d+ \d+", s, re.M))
    assert re.search(r"^SIZE 100 30$", s, re.M), s
    shell.run("resize-window", "-x", "90", "-y", "25")
    s = shell.wait("the job's end", lambda s: exit_status(s) is not None)
    assert re.search(r"^RESIZED 90 25$", s, re.M) and exit_status(s) == 0, s
    # written to one terminal, read back in the order written
    got = re.findall(r"^(out|err) (\d+)$", shell.screen(), re.M)
    want = [("out" if i % 2 == 0 else "err", str(i)) for i in range(300)]
    assert got == want, got


def test_no_pty_and_no_terminal_give_pipes(lp, shell):
    job = write(lp, "job.py", JOB)
    shell.leakproof([lp.py, job, "1"], "--no-pty")
    s = shell.wait("the job's end", lambda s: exit_status(s) is not None)
    assert "ISATTY True False False" in s and exit_status(s) == 0, s   # stdin inherited

    r = lp.run([lp.py, job, "1"])
    assert r.rc == 0, r
    assert "ISATTY False False False" in r.out, r


@pytest.mark.parametrize("how", [["--no-pty"], ["--no-pty", "--status-line"]], ids=["quiet", "status-line"])
def test_no_pty_job_reads_the_terminal_and_follows_ctrl_z(lp, shell, how):
    """With --no-pty the job has pipes for its output, but its stdin is still
    the terminal: it reads it in the terminal's foreground, as a shell's
    job does (before, its process group was in the background, and input()
    stopped it with SIGTTIN for good); Ctrl-Z stops it and leakproof, fg
    resumes both."""
    job = write(lp, "job.py", JOB)
    shell.leakproof([lp.py, job, "12", "ask"], *how, "--step-regex", r"^Epoch (\d+)")
    s = shell.wait("the job's prompt", lambda s: "Name: " in s)
    assert "ISATTY True False False" in s, s
    pid = job_pid(s)
    assert pid, s
    shell.pids.append(pid)
    shell.type("bob")
    s = shell.wait("the answer and a few steps", lambda s: "HELLO bob" in s and "Epoch 2" in s)
    ctrl_z_then_fg(shell, pid)
    steps, _ = steps_and_events(lp)
    assert [n for n, _ in steps] == list(range(12)), steps
    # the terminal is the shell's again: it reads what is typed next
    shell.type("echo TYPED-$((6*7))")
    shell.wait("the shell reading the terminal", lambda s: re.search(r"^TYPED-42$", s, re.M))


def test_no_pty_job_that_reads_at_once(lp, shell):
    """A job that reads before leakproof has given it the terminal stops
    on SIGTTIN; leakproof gives it the terminal and resumes it, and stays
    in the foreground itself (it once stopped with the job)."""
    for i in range(4):
        shell.leakproof(["sh", "-c", "read x; echo GOT $x"], "--no-pty", "--quiet")
        shell.type(f"typed{i}")
        s = shell.wait("the job's answer", lambda s: re.search(rf"^GOT typed{i}$", s, re.M) and
                       len(re.findall(r"^EXIT=\d+", s, re.M)) == i + 1)
        assert "Stopped" not in s and set(re.findall(r"^EXIT=(\d+)", s, re.M)) == {"0"}, s


PARENT = r'''
import os, subprocess, sys, time
argv = sys.argv[1:]
# stdin the terminal, output to a pipe: the job gets the terminal's foreground
p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
end = time.monotonic() + 60
while os.tcgetpgrp(0) == os.getpgrp() and time.monotonic() < end:
    time.sleep(0.05)
print("JOB-HAS-IT", os.tcgetpgrp(0) != os.getpgrp(), flush=True)
os.kill(p.pid, 9)
p.wait()
end = time.monotonic() + 30
while os.tcgetpgrp(0) != os.getpgrp() and time.monotonic() < end:
    time.sleep(0.05)
print("BACK", os.tcgetpgrp(0) == os.getpgrp(), flush=True)
'''


def test_kill_9_of_leakproof_gives_the_foreground_back(lp, shell):
    """Without a pty the job holds the terminal's foreground; when leakproof
    is killed, its guard gives it back to the process group leakproof was
    in, for a parent that is not a shell (a shell takes it back itself)."""
    job = write(lp, "job.py", JOB)
    parent = write(lp, "parent.py", PARENT)
    argv = [lp.py, parent, lp.binary, "run", "--store", lp.store, "--", lp.py, job, "1000"]
    shell.type(" ".join(shlex.quote(str(a)) for a in argv))
    s = shell.wait("the parent's word", lambda s: re.search(r"^BACK \w+", s, re.M), timeout=150)
    assert re.search(r"^JOB-HAS-IT True$", s, re.M) and re.search(r"^BACK True$", s, re.M), s


def test_job_lines_reach_the_terminal_as_without_leakproof(lp):
    """The bytes the terminal gets: "\n" becomes "\r\n" once, by the
    terminal's own output processing; the pty processed them too, and each
    line arrived as "\r\r\n"."""
    argv = [lp.binary, "run", "-q", "--no-status-line", "--store", str(lp.store), "--",
            "printf", "one\\ntwo\\n"]
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, lp.env())
    out = b""
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        try:
            chunk = os.read(fd, 4096)
        except OSError:   # EIO: the other side is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert out.replace(b"\r\n", b"\n") == b"one\ntwo\n" and b"\r\r" not in out, out


def test_kill_9_of_leakproof_gives_the_terminal_back(lp, shell):
    """SIGKILL cannot be caught: the job's guard, which outlives the
    supervisor, restores the terminal it left raw and ends the job.
    leakproof runs under `sh -c`, as from a script or a scheduler's
    wrapper: bash restores the terminal after a job of its own that a
    signal killed, but here its job (sh) exits, and bash keeps the modes
    it then finds.

    The modes are read in the same command line, after the wrapper: typed
    as a command of their own, bash's line editor would read the next line
    with the modes it found at its prompt and put those back before running
    it, and whether it found them raw or restored depends on whether the
    guard or the wrapper's exit was scheduled first (a race no program can
    win against SIGKILL; terminal.md). The check waits up to 30 s for the
    guard, and fails if the modes are never restored."""
    job = write(lp, "job.py", JOB)
    argv = [lp.binary, "run", "--store", lp.store, "--", lp.py, job, "1000"]
    inner = " ".join(shlex.quote(str(a)) for a in argv) + "; echo EXIT=$?"
    modes = "stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e echo | tr '\\n' ' '"
    shell.type("sh -c " + shlex.quote(inner)
               + f"; for i in $(seq 300); do [ \"$({modes})\" = 'icanon echo ' ] && break; sleep 0.1; done"
               + f"; {modes}; echo MODES-END")
    s = shell.wait("a few steps", lambda s: "Epoch 2" in s)
    pid = job_pid(s)
    assert pid, s
    shell.pids.append(pid)

    def supervisor():
        db = sqlite3.connect(lp.store)
        try:
            row = db.execute("SELECT supervisor_pid FROM runs").fetchone()
        finally:
            db.close()
        return row and row[0]
    sup = wait_for("the supervisor's pid in the store", supervisor)
    os.kill(sup, 9)
    s = shell.wait("the shell's word that it was killed", lambda s: re.search(r"^EXIT=137", s, re.M))
    wait_for("the job ended by the guard", lambda: proc_state(pid) in (None, "Z"))
    shell.wait("the terminal's modes as before", lambda s: re.search(r"^icanon echo MODES-END", s, re.M))

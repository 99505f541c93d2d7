"""leakproof.stop_requested() and leakproof.on_stop() without the supervisor.

Each test plays the supervisor's part as test_client_python.py does: a pipe
whose write end the child gets as LEAKPROOF_FD, plus LEAKPROOF_STOP_SIGNAL;
the stop signal is sent for real, to the child's process group as the
supervisor sends it (or, where the moment matters, by the child to itself).
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def base_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEAKPROOF_")}
    env["PYTHONPATH"] = os.path.join(REPO, "python")
    env.update(extra)
    return env


class Job:
    """A child `python -c code` in its own process group; with channel=True
    its LEAKPROOF_FD names a pipe read here. stdout is read line by line."""

    def __init__(self, code, channel=True, stop_signal="SIGTERM", env=None, timeout=60):
        env = dict(env if env is not None else base_env())
        if stop_signal is not None:
            env["LEAKPROOF_STOP_SIGNAL"] = stop_signal
        fds = ()
        self.chunks = []
        self.reader = None
        if channel:
            r, w = os.pipe()
            env["LEAKPROOF_FD"] = str(w)
            fds = (w,)
        self.proc = subprocess.Popen([PYTHON, "-c", textwrap.dedent(code)], env=env,
                                     pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        if channel:
            os.close(w)
            self.reader = threading.Thread(target=self._drain, args=(r,), daemon=True)
            self.reader.start()
        self.watchdog = threading.Timer(timeout, self._kill)
        self.watchdog.start()

    def _drain(self, r):
        with os.fdopen(r, "rb", buffering=0) as f:
            while True:
                chunk = f.read(65536)
                if not chunk:
                    break
                self.chunks.append(chunk)

    def _kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def expect(self, text):
        """Read stdout up to a line equal to text."""
        seen = []
        for line in self.proc.stdout:
            line = line.decode().rstrip("\n")
            if line == text:
                return seen
            seen.append(line)
        pytest.fail("no line %r on stdout; got %r, stderr %s"
                    % (text, seen, self.proc.stderr.read().decode()[-2000:]))

    def signal_group(self, sig=signal.SIGTERM):
        os.killpg(self.proc.pid, sig)

    def finish(self):
        """(returncode, rest of stdout, stderr, channel lines)."""
        out, err = self.proc.communicate()
        self.watchdog.cancel()
        if self.reader:
            self.reader.join(10)
        data = b"".join(self.chunks)
        lines = data.split(b"\n")[:-1] if data else []
        return self.proc.returncode, out.decode(), err.decode(), lines


def test_stop_flag_and_callbacks_once():
    job = Job("""
        import os, signal, sys, time, leakproof
        calls = []
        def first(): calls.append("first"); leakproof.mark("stopping")
        def broken(): calls.append("broken"); raise RuntimeError("callback failed")
        assert leakproof.on_stop(first) is first             # usable as a decorator
        leakproof.on_stop(broken)
        leakproof.on_stop(lambda: calls.append("third"))
        leakproof.on_stop("not callable")                    # ignored
        assert leakproof.stop_requested() is False
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        print("ready", flush=True)
        for step in range(1, 10000):                         # a training loop
            leakproof.step(step)
            if leakproof.stop_requested():
                break
            time.sleep(0.01)
        print("stopped after step", step, calls, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)                 # a second request
        time.sleep(0.05)
        leakproof.on_stop(lambda: calls.append("late"))      # runs at once
        print(leakproof.stop_requested(), calls)
    """)
    job.expect("ready")
    job.signal_group(signal.SIGTERM)
    rc, out, err, lines = job.finish()
    assert rc == 0, err
    first, second = out.splitlines()
    assert first.startswith("stopped after step ")
    assert first.endswith(" ['first', 'broken', 'third']")
    assert second == "True ['first', 'broken', 'third', 'late']"
    assert "leakproof: on_stop callback" in err and "RuntimeError: callback failed" in err
    assert err.count("Traceback") == 1
    assert lines.count(b"mark stopping") == 1
    step = int(first.split()[3])
    assert [line for line in lines if line != b"mark stopping"] == [
        b"step %d" % i for i in range(1, step + 1)]


def test_chains_to_the_programs_own_handler():
    job = Job("""
        import signal, time, leakproof
        got = []
        signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
        leakproof.on_stop(lambda: got.append("callback"))
        assert leakproof.stop_requested() is False
        print("ready", flush=True)
        while len(got) < 2:
            time.sleep(0.01)
        print("first", flush=True)
        while len(got) < 3:
            time.sleep(0.01)
        print(leakproof.stop_requested(), got, flush=True)
    """)
    job.expect("ready")
    job.signal_group(signal.SIGTERM)
    job.expect("first")
    job.signal_group(signal.SIGTERM)
    rc, out, err, _ = job.finish()
    assert rc == 0, err
    assert out == "True ['callback', %d, %d]\n" % (signal.SIGTERM, signal.SIGTERM)


@pytest.mark.parametrize("name", ["SIGUSR1", "USR1", "sigusr1", " SIGUSR1\n",
                                  str(int(signal.SIGUSR1)), "SIGRTMIN+2", "RTMAX-1",
                                  "SIGINT", "TERM"])
def test_signal_names(name):
    job = Job("""
        import os, signal, time, leakproof
        name = os.environ["LEAKPROOF_STOP_SIGNAL"].strip().upper().replace("SIG", "")
        if name.isdigit():
            sig = int(name)
        elif name.startswith("RT"):
            base = signal.SIGRTMIN if "MIN" in name else signal.SIGRTMAX
            sig = base + int(name[5:])
        else:
            sig = signal.Signals["SIG" + name]
        assert not leakproof.stop_requested()
        try:
            os.kill(os.getpid(), sig)
            for _ in range(100):
                if leakproof.stop_requested():
                    break
                time.sleep(0.01)
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        print(leakproof.stop_requested())
    """, stop_signal=name)
    rc, out, err, _ = job.finish()
    assert (rc, out) == (0, "True\n"), err


@pytest.mark.parametrize("name", ["SIGKILL", "STOP", "BOGUS", "", "0", "999", "-15", "RTMIN+99"])
def test_unusable_signal_names_install_nothing(name):
    job = Job("""
        import signal, leakproof
        assert leakproof.on_stop(print) is print
        print(leakproof.stop_requested(), signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
              flush=True)
        print("ready", flush=True)
        signal.pause()
    """, stop_signal=name)
    job.expect("False True")
    job.expect("ready")
    job.signal_group(signal.SIGTERM)
    rc, _, err, _ = job.finish()
    assert rc == -signal.SIGTERM, err


@pytest.mark.parametrize("case", ["no LEAKPROOF_FD", "LEAKPROOF_FD not a pipe",
                                  "no LEAKPROOF_STOP_SIGNAL"])
def test_noop_without_leakproof(case):
    # Without the supervisor: always False, nothing registered, no handler:
    # SIGTERM kills as it did.
    env = base_env()
    if case == "LEAKPROOF_FD not a pipe":
        env["LEAKPROOF_FD"] = "0"       # stdin: /dev/null, not a pipe
    job = Job("""
        import signal, leakproof
        calls = []
        leakproof.on_stop(lambda: calls.append(1))
        print(leakproof.stop_requested(), len(leakproof._stop_callbacks) == 0,
              signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
        print("ready", flush=True)
        signal.pause()
    """, channel=(case == "no LEAKPROOF_STOP_SIGNAL"),
         stop_signal=None if case == "no LEAKPROOF_STOP_SIGNAL" else "SIGTERM", env=env)
    job.expect("False True True")
    job.expect("ready")
    job.signal_group(signal.SIGTERM)
    rc, _, err, _ = job.finish()
    assert rc == -signal.SIGTERM, err
    assert err == ""


def test_a_job_that_never_asks_still_dies_on_sigterm():
    job = Job("""
        import signal, time, leakproof
        for i in range(3):
            leakproof.step(i)
            leakproof.metric(loss=1.0 / (i + 1))
        leakproof.on_stop                    # looked up, never called
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
        time.sleep(60)
    """)
    job.expect("True")
    job.signal_group(signal.SIGTERM)
    rc, out, err, lines = job.finish()
    assert rc == -signal.SIGTERM, err
    assert lines == [b"step 0", b"metric loss=1.0", b"step 1", b"metric loss=0.5",
                     b"step 2", b"metric loss=0.3333333333333333"]


def test_only_the_main_thread_installs():
    job = Job("""
        import os, signal, threading, time, leakproof
        calls = []
        def worker():
            calls.append(leakproof.stop_requested())
            leakproof.on_stop(lambda: calls.append("callback"))
        t = threading.Thread(target=worker)
        t.start(); t.join()
        print(calls, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        assert leakproof.stop_requested() is False           # the main thread: installed
        os.kill(os.getpid(), signal.SIGTERM)
        while not leakproof.stop_requested():
            time.sleep(0.01)
        print(calls)
    """)
    rc, out, err, _ = job.finish()
    assert rc == 0, err
    assert out == "[False] True\n[False, 'callback']\n"


def test_callback_may_send_while_the_lock_is_held():
    # The signal lands while the main thread is inside a client call (here:
    # holding its lock); a callback that sends must not deadlock.
    job = Job("""
        import os, signal, leakproof
        leakproof.on_stop(lambda: leakproof.mark("from the handler"))
        leakproof.stop_requested()
        with leakproof._lock:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
            leakproof.step(1)
        print(leakproof.stop_requested())
    """, timeout=20)
    rc, out, err, lines = job.finish()
    assert (rc, out) == (0, "True\n"), err
    assert lines == [b"mark from the handler", b"step 1"]


def test_sys_exit_in_a_callback_ends_the_job_after_the_others():
    job = Job("""
        import sys, time, leakproof
        leakproof.on_stop(lambda: sys.exit(3))
        leakproof.on_stop(lambda: print("second callback", flush=True))
        leakproof.stop_requested()
        try:
            print("ready", flush=True)
            time.sleep(60)
        finally:
            print("finally", flush=True)
        print("not reached")
    """)
    job.expect("ready")
    job.signal_group(signal.SIGTERM)
    rc, out, err, _ = job.finish()
    assert rc == 3, err
    assert out == "second callback\nfinally\n"


def test_forked_children_get_the_previous_handling_back():
    # DataLoader and Pool workers made by fork() must still die of the
    # SIGTERM that ends leftover processes; the parent keeps its handler.
    job = Job("""
        import multiprocessing, os, signal, time, leakproof
        leakproof.stop_requested()
        pid = os.fork()
        if pid == 0:
            time.sleep(60)              # until the SIGTERM
            os._exit(0)
        time.sleep(0.2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        print("child", os.WIFSIGNALED(status) and os.WTERMSIG(status), flush=True)
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2) as pool:            # terminate() sends SIGTERM to the workers
            print("pool", pool.map(abs, [-1, -2]), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        while not leakproof.stop_requested():
            time.sleep(0.01)
        print("parent", leakproof.stop_requested())
    """, timeout=30)
    rc, out, err, _ = job.finish()
    assert rc == 0, err
    assert out == "child %d\npool [1, 2]\nparent True\n" % signal.SIGTERM


def test_a_forked_child_that_asks_gets_its_own():
    job = Job("""
        import os, signal, time, leakproof
        leakproof.on_stop(lambda: print("parent callback", os.getpid() == parent, flush=True))
        parent = os.getpid()
        leakproof.stop_requested()
        pid = os.fork()
        if pid == 0:
            leakproof.on_stop(lambda: print("child callback", flush=True))
            os.kill(os.getpid(), signal.SIGTERM)
            while not leakproof.stop_requested():
                time.sleep(0.01)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child status", status, leakproof.stop_requested(), flush=True)
    """, timeout=30)
    rc, out, err, _ = job.finish()
    assert rc == 0, err
    assert out == "child callback\nchild status 0 False\n"

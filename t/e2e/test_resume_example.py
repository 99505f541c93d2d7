"""examples/resume_train.py: stopped and resumed at any point, by the stop
signal or by SIGKILL, it ends with the same weights as a run never
interrupted.

The script runs directly under /usr/bin/python3, not under the supervisor
(the restart policies are tested with the binary elsewhere). Where it
matters the test plays the supervisor's part: a pipe as LEAKPROOF_FD that
it reads, LEAKPROOF_STOP_SIGNAL and LEAKPROOF_RESTART in the environment,
and signals sent to the job's process group.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
SCRIPT = os.path.join(REPO, "examples", "resume_train.py")
FINAL = re.compile(r"^final weights sha256 ([0-9a-f]{64})$", re.M)
MIB = 1 << 20


class Run:
    """One start of the script in workdir. With supervised=True it gets a
    channel (read here), LEAKPROOF_STOP_SIGNAL and LEAKPROOF_RESTART."""

    def __init__(self, workdir, *args, supervised=True, restart=0, stop_signal="SIGTERM",
                 timeout=120):
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEAKPROOF_")}
        env["PYTHONPATH"] = os.path.join(REPO, "python")
        fds = ()
        if supervised:
            r, w = os.pipe()
            env.update(LEAKPROOF_FD=str(w), LEAKPROOF_RUN="1", LEAKPROOF_RESTART=str(restart),
                       LEAKPROOF_STOP_SIGNAL=stop_signal)
            fds = (w,)
        self.proc = subprocess.Popen([PYTHON, SCRIPT, *map(str, args)], cwd=workdir, env=env,
                                     pass_fds=fds, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.chunks, self.reader = [], None
        if supervised:
            os.close(w)
            self.reader = threading.Thread(target=self._drain, args=(r,), daemon=True)
            self.reader.start()
        self.watchdog = threading.Timer(timeout, self.kill)
        self.watchdog.start()
        self.out = []

    def _drain(self, r):
        with os.fdopen(r, "rb", buffering=0) as f:
            for chunk in iter(lambda: f.read(65536), b""):
                self.chunks.append(chunk)

    def kill(self, sig=signal.SIGKILL):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def until(self, text, required=True):
        """Read stdout up to a line that starts with text; False at the end
        of the output when not required."""
        for line in self.proc.stdout:
            line = line.decode().rstrip("\n")
            self.out.append(line)
            if line.startswith(text):
                return True
        if required:
            pytest.fail("no line %r; stdout %r" % (text, self.out))
        return False

    def finish(self):
        out, err = self.proc.communicate()
        self.watchdog.cancel()
        if self.reader:
            self.reader.join(10)
        self.out += out.decode().splitlines()
        self.err = err.decode()
        self.rc = self.proc.returncode
        data = b"".join(self.chunks)
        self.lines = data.decode().splitlines()
        self.steps = [int(line.split()[1]) for line in self.lines if line.startswith("step ")]
        self.epochs = [int(line.split()[1]) for line in self.lines if line.startswith("epoch ")]
        return self

    def checksum(self):
        m = FINAL.search("\n".join(self.out))
        return m.group(1) if m else None

    def __repr__(self):
        return "<resume_train: rc %s\n%s\n--- stderr\n%s>" % (
            self.rc, "\n".join(self.out[-20:]), self.err[-3000:])


def resumed_at(run):
    """The step a run resumed from, by its first line."""
    m = re.match(r"resumed from checkpoint.pt at step (\d+) \(epoch \d+\), restart \d+$",
                 run.out[0])
    assert m, run
    return int(m.group(1))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The checksum of a run never interrupted (default options: 300 steps)."""
    d = tmp_path_factory.mktemp("reference")
    run = Run(d, supervised=False).finish()
    assert run.rc == 0 and run.checksum(), run
    assert run.out[0] == "Epoch 1/5" and run.out.count("Epoch 5/5") == 1
    return run.checksum()


def test_uninterrupted_and_run_again(tmp_path, reference):
    run = Run(tmp_path).finish()                # with the client this time
    assert run.rc == 0 and run.checksum() == reference, run
    assert run.steps == list(range(1, 301)) and run.epochs == [1, 2, 3, 4, 5]
    assert any(line.startswith("result loss=") for line in run.lines)
    assert not os.path.exists(tmp_path / "checkpoint.pt.tmp")
    # The finished run's checkpoint is kept: running again trains nothing.
    again = Run(tmp_path, restart=1).finish()
    assert again.rc == 0 and again.checksum() == reference, again
    assert again.out[0] == "resumed from checkpoint.pt at step 300 (epoch 5), restart 1"
    assert again.steps == []
    # A checkpoint made with other settings is refused.
    other = Run(tmp_path, "--seed", 1, supervised=False).finish()
    assert other.rc == 2 and "delete it to start over" in other.err, other


def test_stopped_by_sigterm_and_resumed(tmp_path, reference):
    # Stopped twice by the stop signal, as a soft limit or a schedule would.
    first = Run(tmp_path)
    first.until("Epoch 2/5")
    first.kill(signal.SIGTERM)
    first.finish()
    assert first.rc == 0, first                 # stopped as asked: exit 0
    assert first.checksum() is None and first.out[-1].startswith("stopped at step "), first
    stopped = int(first.out[-1].split()[3])
    assert 60 <= stopped < 300 and first.steps == list(range(1, stopped + 1))

    second = Run(tmp_path, restart=1)
    second.until("Epoch 4/5")
    second.kill(signal.SIGTERM)
    second.finish()
    assert second.rc == 0 and second.checksum() is None, second
    assert second.out[0] == "resumed from checkpoint.pt at step %d (epoch %d), restart 1" % (
        stopped, stopped // 60)
    stopped2 = int(second.out[-1].split()[3])
    assert second.steps == list(range(stopped + 1, stopped2 + 1))   # numbers continue

    last = Run(tmp_path, restart=2).finish()
    assert last.rc == 0 and last.checksum() == reference, last
    assert last.steps == list(range(stopped2 + 1, 301))
    assert first.epochs + second.epochs + last.epochs == [1, 2, 3, 4, 5]


def test_killed_and_resumed(tmp_path, reference):
    # SIGKILL (a hard limit, the OOM killer): the steps since the last
    # checkpoint are done again, identically.
    first = Run(tmp_path, "--checkpoint-every", 7)
    first.until("Epoch 3/5")
    first.kill(signal.SIGKILL)
    first.finish()
    assert first.rc == -signal.SIGKILL, first

    last = Run(tmp_path, "--checkpoint-every", 7, restart=1).finish()
    assert last.rc == 0 and last.checksum() == reference, last
    saved = resumed_at(last)
    # The last checkpoint: the last multiple of 7 saved (the save follows the report).
    assert saved % 7 == 0 and first.steps[-1] - 7 <= saved <= first.steps[-1]
    assert first.steps[-1] >= 120
    assert last.steps == list(range(saved + 1, 301))


def test_killed_again_and_again(tmp_path, reference):
    # SIGKILL at arbitrary moments, checkpoints at every step (so that many
    # kills land during a write), and stop requests in between, until the
    # run gets to the end.
    # Seconds after the first "Epoch" line. With at least 4 ms a step, even
    # a machine that computes and saves in no time is 274 steps short of the
    # end after them: every one lands.
    delays = [0.2, 0.3, 0.25, 0.35]
    runs = []
    while not (runs and runs[-1].checksum()):
        assert len(runs) < 10, "the run never finished"
        run = Run(tmp_path, "--checkpoint-every", 1, "--step-time", 0.004, restart=len(runs))
        if len(runs) < len(delays) and run.until("Epoch", required=False):
            time.sleep(delays[len(runs)])
            run.kill(signal.SIGTERM if len(runs) == 2 else signal.SIGKILL)
        runs.append(run.finish())
        assert run.rc in (0, -signal.SIGKILL), run
        if len(runs) > 1 and run.out and run.out[0].startswith("resumed"):
            # Steps continue from the last checkpoint, at or before the last step reported.
            assert resumed_at(run) <= (runs[-2].steps or [0])[-1]
    assert len(runs) == len(delays) + 1, "an interruption came after the end"
    assert [r.rc for r in runs] == [-signal.SIGKILL, -signal.SIGKILL, 0, -signal.SIGKILL, 0]
    assert runs[2].out[-1].startswith("stopped at step ")
    assert runs[-1].checksum() == reference, runs[-1]
    assert not os.path.exists(tmp_path / "checkpoint.pt.tmp")


def test_leak_grows_memory_and_changes_nothing(tmp_path, reference):
    run = Run(tmp_path, "--leak-mib", 0.5, supervised=False)

    def rss():
        with open("/proc/%d/status" % run.proc.pid) as f:
            return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024

    run.until("Epoch 2/5")
    before = rss()
    run.until("  step 240")
    after = rss()
    run.finish()
    assert run.rc == 0 and run.checksum() == reference, run
    # About 180 steps of 0.5 MiB each between the two readings.
    assert after - before > 45 * MIB, (before, after)

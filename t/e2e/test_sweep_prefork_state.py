"""What a trial forked from the prefork template must not share with the
template or with the other forked trials (src/sweep/prefork.c;
docs/internals/prefork.md): the state a fresh interpreter seeds at its
start — random, numpy's global RandomState, torch's CPU generator. Before,
every warm trial drew the template's numbers (the same np.random.randint
in 4 of 4 trials; cold: 4 different). And what a template killed under
its trials leaves: the trial in flight runs again, no directory is left.
"""
import importlib.util
import os
import signal
import sqlite3
import subprocess
import time

import pytest
from conftest import WRAPPER

DRAW = r"""
import os, random, sys
import numpy as np
with open('/proc/%d/comm' % os.getppid()) as f:
    parent = f.read().strip()
line = 'draw np=%d random=%r warm=%d' % (np.random.randint(1 << 62), random.random(), parent != 'leakproof')
torch = sys.modules.get('torch')
if torch is not None:
    line += ' torch=%d' % torch.initial_seed()
print(line, flush=True)
"""


def trials(lp, sweep_id=1):
    con = sqlite3.connect(f"file:{lp.store}?mode=ro", uri=True)
    try:
        return con.execute("SELECT idx, attempt, status FROM trials WHERE sweep_id = ? ORDER BY idx, attempt",
                           (sweep_id,)).fetchall()
    finally:
        con.close()


def needs_cgroup(lp):
    r = lp.run(["true"], timeout=60)
    assert r.rc == 0, r
    if lp.report()["run"]["cgroup_mode"] == "none":
        pytest.skip("no cgroup for a job here: prefork falls back to cold starts")


def test_warm_trials_draw_different_random_numbers(lp):
    needs_cgroup(lp)
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("no numpy")
    mods = "[numpy, torch]" if importlib.util.find_spec("torch") else "[numpy]"
    job = lp.dir / "draw.py"
    job.write_text(DRAW)
    f = lp.dir / "draw.yaml"
    f.write_text(f"""
command: [{lp.py}, {job}, "{{i}}"]
method: grid
parameters:
  i: {{values: [1, 2, 3, 4]}}
prefork: {mods}
""")
    r = lp.cmd(["sweep", str(f), "--store", lp.store], timeout=600)
    assert r.rc == 0, r
    assert [t[2] for t in trials(lp)] == ["ok"] * 4, trials(lp)
    draws = []
    for idx in range(4):
        text = (lp.dir / "sweeps" / "lp.db" / "1" / f"trial-{idx}.0.log").read_text()
        line = [ln for ln in text.splitlines() if ln.startswith("draw ")]
        assert len(line) == 1, text
        draws.append(dict(kv.split("=", 1) for kv in line[0].split()[1:]))
    assert all(d["warm"] == "1" for d in draws), draws          # forked, not cold
    for key in draws[0]:
        if key != "warm":
            assert len({d[key] for d in draws}) == 4, (key, draws)


WAIT_GO = r"""
import os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, 'started.%s' % sys.argv[1]), 'a') as f:
    f.write('%d\n' % os.getpid())
while not os.path.exists(os.path.join(here, 'go')):
    time.sleep(0.05)
print('went', flush=True)
"""


def children_of(pid):
    """The command lines of pid's children, for a message."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != pid:
                    continue
            with open(f"/proc/{p}/cmdline", "rb") as f:
                out.append(f.read().replace(b"\0", b" ")[:120].decode(errors="replace"))
        except (OSError, ValueError):
            continue
    return out


def template_of(sweep_pid):
    """The prefork template: the sweep's child that runs leakproof/_prefork.py."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if ppid == sweep_pid and len(argv) > 2 and argv[1].endswith(b"/leakproof/_prefork.py"):
            return int(pid)
    return None


def wait_for(cond, what, seen=None, timeout=60):
    """cond()'s first true value; fails after timeout seconds, with what
    seen() says when given."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    pytest.fail("still waiting for " + what + ("; " + seen() if seen else ""))


def test_a_trial_ended_with_its_template_runs_again_and_the_template_leaves_no_directory(lp):
    """SIGKILL to the template while a warm trial runs: before, the trial was
    recorded `failed (error)` and never run again, and the template's
    private directory (socket, stub) was left in $TMPDIR."""
    needs_cgroup(lp)
    job = lp.dir / "wait_go.py"
    job.write_text(WAIT_GO)
    tmp = lp.dir / "tmp"
    tmp.mkdir()
    f = lp.dir / "go.yaml"
    f.write_text(f"""
command: [{lp.py}, {job}, "{{i}}"]
method: grid
parameters:
  i: {{values: [1, 2]}}
prefork: [json]
""")
    argv = WRAPPER + [lp.binary, "sweep", str(f), "--store", lp.store]
    proc = subprocess.Popen(argv, cwd=lp.dir, env=lp.env({"TMPDIR": str(tmp)}), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (lp.dir / "started.1").exists(), "the first trial")
        assert [p.name for p in tmp.iterdir()][0].startswith("leakproof-prefork-")
        template = wait_for(lambda: template_of(proc.pid), "the template", lambda: (
            "the sweep's children: %s; the first trial's log: %s" % (children_of(proc.pid), "".join(
                p.read_text() for p in (lp.dir / "sweeps").glob("*/1/trial-0.0.log")))))
        os.kill(template, signal.SIGKILL)
        wait_for(lambda: len((lp.dir / "started.1").read_text().split()) == 2, "the first trial to run again",
                 timeout=120)
        (lp.dir / "go").write_text("")
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            lp.kill_tree(proc)
            proc.communicate()
    err = err.decode(errors="replace")
    assert proc.returncode == 0, err
    rows = trials(lp)
    assert rows == [(0, 0, "interrupted"), (0, 1, "ok"), (1, 0, "ok")], (rows, err)
    assert "the prefork template ended" in err, err
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())


def test_sweep_help_lists_prefork(lp):
    r = lp.cmd(["sweep", "--help"], timeout=60)
    assert r.rc == 0, r
    assert "--prefork MODULES" in r.out, r.out


def test_a_keyboard_interrupt_in_a_warm_trial_prints_its_traceback(lp):
    """As a cold interpreter does before it dies of SIGINT; before, a warm
    trial died of SIGINT without a word."""
    needs_cgroup(lp)
    job = lp.dir / "kbd.py"
    job.write_text("def deep():\n    raise KeyboardInterrupt\ndeep()\n")
    f = lp.dir / "kbd.yaml"
    f.write_text(f"""
command: [{lp.py}, {job}, "{{i}}"]
method: grid
parameters:
  i: {{values: [1]}}
prefork: [json]
""")
    r = lp.cmd(["sweep", str(f), "--store", lp.store], timeout=300)
    text = (lp.dir / "sweeps" / "lp.db" / "1" / "trial-0.0.log").read_text()
    assert "cold start" not in text, text
    assert "Traceback (most recent call last)" in text and "in deep" in text and "KeyboardInterrupt" in text, text
    with sqlite3.connect(lp.store) as db:
        assert db.execute("SELECT exit_signal FROM runs WHERE trial_idx = 0").fetchone() == (signal.SIGINT,), r

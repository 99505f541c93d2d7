"""The Python programs of a sweep's warm starts, as Python: the template
(python/leakproof/_prefork.py) and its stub (_prefork_stub.py), without
`leakproof sweep` (docs/internals/prefork.md; the sweep's use of them:
test_sweep_prefork*.py).

Their functions are called directly in this process (the checks that send
a trial cold, the request's framing with descriptors attached, the stub's
JSON next to json's, the fork's new random state and its setup of the
trial), and the template is run as the sweep runs it, a script started
with the modules to import: it refuses what it cannot serve, writes the
stub beside its socket, and answers a stub that asks from no cgroup of
its own with a cold start that the stub carries out.
"""

import json
import os
import pathlib
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENT = os.path.join(REPO, "python")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
TEMPLATE = os.path.join(CLIENT, "leakproof", "_prefork.py")

sys.path.insert(0, CLIENT)
from leakproof import _prefork, _prefork_stub  # noqa: E402


# ---- what sends a trial cold ----------------------------------------------

def request(argv, env=None):
    return {"argv": argv, "env": dict(os.environ if env is None else env), "cwd": "/", "fds": [], "pid": 1}


EXE = os.path.realpath(sys.executable)


def test_a_trial_of_the_same_python_and_environment_is_forked():
    env0 = dict(os.environ)
    assert _prefork.check(request([sys.executable, "train.py"]), env0, EXE, ["torch"]) is None
    assert _prefork.check(request([sys.executable, "-m", "pkg.train", "--lr", "1"]), env0, EXE, ["torch"]) is None


def test_another_python_or_interpreter_options_start_cold():
    env0 = dict(os.environ)
    why = _prefork.check(request(["/bin/sh", "train.py"]), env0, EXE, ["torch"])
    assert why == "the command's Python (/bin/sh) is not the template's (%s)" % EXE
    for argv in ([sys.executable], [sys.executable, "-u", "train.py"], [sys.executable, "-m"],
                 [sys.executable, "-c", "pass"]):
        assert _prefork.check(request(argv), env0, EXE, ["torch"]) == \
            "the command is not PYTHON SCRIPT ... or PYTHON -m MODULE ...", argv


def test_a_variable_read_at_import_that_differs_starts_cold_but_not_those_applied_in_the_fork():
    env0 = {k: v for k, v in os.environ.items() if not k.startswith(_prefork.PREFIXES)}
    env0["PATH"] = os.environ.get("PATH", os.defpath)
    argv = [sys.executable, "train.py"]
    trial = dict(env0, OMP_NUM_THREADS="1")
    assert _prefork.check(request(argv, trial), env0, EXE, ["torch", "numpy"]) == \
        "OMP_NUM_THREADS is '1' for the trial but unset in the template, which imported torch, numpy with it"
    assert _prefork.check(request(argv, env0), dict(env0, MALLOC_ARENA_MAX="2"), EXE, ["torch"]) == \
        "MALLOC_ARENA_MAX is unset for the trial but '2' in the template, which imported torch with it"
    applied = dict(env0, PYTHONPATH="/x", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="1", MY_OWN="y")
    assert _prefork.check(request(argv, applied), env0, EXE, ["torch"]) is None


def test_a_process_in_the_templates_own_cgroups_cannot_be_followed():
    files, why = _prefork.cgroup_files(os.getpid())
    assert files is None
    assert why == "the trial has no cgroup of its own, so its supervisor would not see a forked process"


# ---- the request: a length, JSON, descriptors ------------------------------

def send_request(s, obj, fds):
    data = json.dumps(obj).encode()
    data = struct.pack("I", len(data)) + data
    sent = s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))])
    s.sendall(data[sent:])


def test_a_request_longer_than_one_read_arrives_whole_with_its_descriptors(tmp_path):
    a, b = socket.socketpair()
    f = tmp_path / "f"
    f.write_text("x")
    fd = os.open(f, os.O_RDONLY)
    big = {"argv": ["python", "t.py"], "env": {"BIG": "v" * 200000}, "fds": [0, 1, 2], "pid": 5}
    try:
        import threading
        sender = threading.Thread(target=send_request, args=(a, big, [fd, 1]))
        sender.start()
        req, fds = _prefork.recv_request(b)
        sender.join()
        assert req == big
        assert len(fds) == 2 and os.path.samestat(os.fstat(fds[0]), os.fstat(fd))
        for x in fds:
            os.close(x)
    finally:
        os.close(fd)
        a.close()
        b.close()


def test_a_request_cut_short_is_refused():
    a, b = socket.socketpair()
    a.sendall(struct.pack("I", 100) + b'{"argv": ')
    a.close()
    with pytest.raises(ValueError, match="short request"):
        _prefork.recv_request(b)
    b.close()


# ---- the stub's JSON, without the json module -------------------------------

def test_the_stub_writes_json_as_json_does():
    odd = "caf\u00e9 \"q\" \\ \t\n \udcff \U0001f600"          # a lone surrogate: os.environ's surrogateescape
    for v in ({"argv": ["python3", odd], "env": {"A": odd, "": ""}, "fds": [0, 1, 2, 255], "pid": 4194304},
              [], {}, "", 0, [[1, "2"], {"k": []}]):
        assert _prefork_stub.enc(v) == json.dumps(v), v
        assert json.loads(_prefork_stub.enc(v)) == v


def test_the_stub_reads_the_templates_answers_and_nothing_else():
    for key, value in (("pid", 4194304), ("status", 256), ("status", 0), ("cold", "a \"quoted\" \u00fc \\ why"),
                       ("cold", "")):
        line = (json.dumps({key: value}) + "\n").encode()
        assert _prefork_stub.parse_answer(line) == (key, value)
    for bad in (b"", b"ready", b"{}", b"[1]", b'{"pid": x}', b'{"cold": "unterminated}'):
        with pytest.raises(ValueError):
            _prefork_stub.parse_answer(bad)


def test_answers_split_across_reads_are_taken_one_a_line():
    a, b = socket.socketpair()
    a.sendall(b'{"pid": 12}\n{"sta')
    answers = _prefork_stub.Answers(b)
    assert answers.next() == ("pid", 12)
    a.sendall(b'tus": 9}\n')
    a.close()
    assert answers.next() == ("status", 9)
    with pytest.raises(ValueError, match="the template ended"):
        answers.next()
    b.close()


# ---- the fork: new random state, the trial set up as a cold one -------------

RESEED = textwrap.dedent("""
    import os, random, sys
    import numpy
    sys.path.insert(0, sys.argv[1])
    from leakproof import _prefork
    try:
        import torch
    except ImportError:
        torch = None
    reseed = sys.argv[2] == "reseed"
    random.seed(1)
    numpy.random.seed(1)
    if torch is not None:
        torch.manual_seed(1)
    r, w = os.pipe()
    for i in range(4):
        if os.fork() == 0:
            if reseed:
                _prefork.reseed()
            draws = [numpy.random.randint(1 << 30), int(torch.randint(1 << 30, (1,))) if torch else 0]
            os.write(w, ("%d %d\\n" % tuple(draws)).encode())
            os._exit(0)
        os.wait()
    os.close(w)
    print(os.read(r, 4096).decode(), end="")
""")


@pytest.mark.parametrize("how", ["reseed", "none"])
def test_each_fork_draws_its_own_numbers_after_reseed(how):
    pytest.importorskip("numpy")
    out = subprocess.run([PYTHON, "-c", RESEED, CLIENT, how], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    draws = [tuple(line.split()) for line in out.stdout.splitlines()]
    assert len(draws) == 4
    if how == "reseed":
        assert len({d[0] for d in draws}) == 4, draws           # numpy's global RandomState
        if draws[0][1] != "0":
            assert len({d[1] for d in draws}) == 4, draws       # torch's CPU generator
    else:   # what the fork carries over without it: the test can fail
        assert len(set(draws)) == 1, draws


TRIAL = textwrap.dedent("""
    import os, sys
    print("argv", sys.argv)
    print("cwd", os.getcwd())
    print("env", os.environ.get("TRIAL_VAR"), "LEAKPROOF_FD" in os.environ)
    print("path", sys.path[0], sys.path[1])
    print("main", __name__)
    sys.stdout.flush()
    print("to stderr", file=sys.stderr)
    if sys.argv[1] == "interrupt":
        raise KeyboardInterrupt
    sys.exit(int(sys.argv[1]))
""")


def fork_trial(tmp_path, argv, extra_env=None):
    """run_trial() in a fork of this process, its stdout and stderr into
    files: (wait status, stdout, stderr)."""
    out, err = tmp_path / "out", tmp_path / "err"
    fds = [os.open(os.devnull, os.O_RDONLY), os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
           os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)]
    env = {"PATH": os.environ.get("PATH", os.defpath), "TRIAL_VAR": "v1", "PYTHONPATH": "/nonexistent/extra"}
    env.update(extra_env or {})
    req = {"argv": argv, "cwd": str(tmp_path), "env": env, "fds": [0, 1, 2], "pid": os.getpid()}
    pid = os.fork()
    if pid == 0:
        _prefork.run_trial(req, fds, [])
        os._exit(99)                       # never reached: run_trial does not return
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return status, out.read_text(), err.read_text()


def test_a_forked_trial_runs_its_script_as_main_with_its_own_argv_cwd_and_environment(tmp_path):
    (tmp_path / "sub").mkdir()
    script = tmp_path / "sub" / "trial.py"
    script.write_text(TRIAL)
    status, out, err = fork_trial(tmp_path, [sys.executable, str(script), "7", "x"])
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7, (status, out, err)
    assert out.splitlines() == [
        "argv %r" % [str(script), "7", "x"],
        "cwd %s" % tmp_path,
        "env v1 False",
        "path %s /nonexistent/extra" % (tmp_path / "sub"),
        "main __main__",
    ]
    assert err == "to stderr\n"


def test_a_forked_module_trial_and_a_keyboard_interrupt_end_as_a_cold_one_would(tmp_path):
    (tmp_path / "trialmod.py").write_text(TRIAL)
    status, out, err = fork_trial(tmp_path, [sys.executable, "-m", "trialmod", "0"])
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, out, err)
    assert "path %s /nonexistent/extra" % tmp_path in out.splitlines()
    status, out, err = fork_trial(tmp_path, [sys.executable, "-m", "trialmod", "interrupt"])
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT, (status, out, err)
    assert "Traceback" in err and err.rstrip().endswith("KeyboardInterrupt"), err


# ---- the template as the sweep runs it --------------------------------------

def start_template(cwd, *modules, env=None):
    proc = subprocess.Popen([PYTHON, TEMPLATE, *modules], cwd=cwd, stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    line = proc.stdout.readline().decode().rstrip("\n")
    return proc, line


def stop_template(proc):
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_the_template_refuses_what_it_cannot_fork(tmp_path):
    (tmp_path / "threaded.py").write_text("import threading, time\n"
                                          "threading.Thread(target=time.sleep, args=(60,), name='pool-1',"
                                          " daemon=True).start()\n")
    proc, line = start_template(tmp_path, "json", "no_such_module_here")
    assert line == "refuse: importing no_such_module_here failed: ModuleNotFoundError: " \
                   "No module named 'no_such_module_here'"
    assert proc.wait(timeout=60) == 0
    # a module of the working directory is found, as under `python -c`
    proc, line = start_template(tmp_path, "threaded")
    comm = open("/proc/%d/comm" % proc.pid).read().strip()       # the thread's: its process's name
    assert line == "refuse: the template runs 1 more thread(s) after the imports (%s), " \
                   "which a fork would not carry over" % comm
    assert proc.wait(timeout=60) == 0


def test_a_tmpdir_too_long_for_a_sockets_address_is_listened_on_all_the_same(tmp_path):
    # a socket's address holds 107 bytes; the template binds through a
    # descriptor of its directory (before: "refuse: cannot listen on")
    tmpdir = tmp_path / ("d" * 120)
    tmpdir.mkdir()
    (tmp_path / "mine.py").write_text("VALUE = 42\n")
    proc, line = start_template(tmp_path, "mine", env=dict(os.environ, TMPDIR=str(tmpdir)))
    try:
        assert line.startswith("ready " + str(tmpdir) + "/leakproof-prefork-"), line
        sock = line[len("ready "):]
        assert len(sock) > 107 and stat.S_ISSOCK(os.stat(sock).st_mode), sock
    finally:
        proc.terminate()
    assert proc.wait(timeout=60) == 0
    assert os.listdir(tmpdir) == []          # its directory removed


def test_the_template_writes_the_stub_and_a_stub_without_a_cgroup_of_its_own_starts_cold(tmp_path):
    # a socket's path holds 107 bytes: a short $TMPDIR, not one in pytest's
    # tmp_path (under xdist, /tmp/pytest-of-root/pytest-N/popen-gwN/test_...)
    tmpdir = pathlib.Path(tempfile.mkdtemp(prefix="lp-", dir="/tmp"))
    (tmp_path / "mine.py").write_text("VALUE = 42\n")
    proc, line = start_template(tmp_path, "mine", env=dict(os.environ, TMPDIR=str(tmpdir)))
    try:
        assert line.startswith("ready " + str(tmpdir) + "/leakproof-prefork-"), line
        sock = line[len("ready "):]
        d = os.path.dirname(sock)
        stub = os.path.join(d, "stub.py")
        assert sorted(os.listdir(d)) == ["sock", "stub.py"]
        assert open(stub, "rb").read() == open(_prefork_stub.__file__, "rb").read()
        assert os.stat(stub).st_mode & 0o777 == 0o600 and os.stat(d).st_mode & 0o777 == 0o700
        script = tmp_path / "trial.py"
        script.write_text(TRIAL)
        r = subprocess.run([PYTHON, "-E", "-S", stub, PYTHON, str(script), "5"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, TRIAL_VAR="cold"))
        # cold: the stub itself became the trial (exec), with the reason first
        assert r.returncode == 5, r
        assert r.stderr.splitlines() == [
            "leakproof: prefork: cold start: the trial has no cgroup of its own, so its supervisor "
            "would not see a forked process", "to stderr"], r.stderr
        assert "env cold False" in r.stdout.splitlines()
        r = subprocess.run([PYTHON, "-E", "-S", stub, PYTHON, str(script), "0"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, OMP_NUM_THREADS="317"))
        assert r.returncode == 0, r
        assert r.stderr.splitlines()[0] == "leakproof: prefork: cold start: OMP_NUM_THREADS is '317' for " \
            "the trial but %s in the template, which imported mine with it" % (
                repr(os.environ["OMP_NUM_THREADS"]) if "OMP_NUM_THREADS" in os.environ else "unset"), r.stderr
    finally:
        stop_template(proc)
    try:
        assert os.listdir(tmpdir) == []            # its private directory gone with it
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    # a stub whose template is gone starts cold too
    os.makedirs(d)
    with open(stub, "wb") as f:
        f.write(open(_prefork_stub.__file__, "rb").read())
    t0 = time.monotonic()
    r = subprocess.run([PYTHON, "-E", "-S", stub, PYTHON, "-c", "print('ran')"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == "ran\n", r
    assert r.stderr.startswith("leakproof: prefork: cold start: no template at %s (" % sock), r.stderr
    assert time.monotonic() - t0 < 60

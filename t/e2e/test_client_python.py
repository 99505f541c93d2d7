"""The job-side clients without the supervisor: python/leakproof and
include/leakproof.h.

Each test plays the supervisor's part: it makes a pipe, runs a child (a
/usr/bin/python3 with PYTHONPATH=<repo>/python, or a small C/C++ program
built against include/leakproof.h) with LEAKPROOF_FD naming the write end,
reads every line the child wrote and compares it with the exact protocol
text (docs/internals/clients.md).
"""

import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MAX_LINE = 4096


def base_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEAKPROOF_")}
    env["PYTHONPATH"] = os.path.join(REPO, "python")
    env.update(extra)
    return env


def run_with_pipe(argv, env=None, close_reader=False, timeout=120, pin=None):
    """Run argv with LEAKPROOF_FD naming a pipe's write end. Returns (lines
    as bytes without their newlines, raw bytes, completed process). A child
    that hangs (a deadlocked client) is killed with its whole session."""
    r, w = os.pipe()
    env = dict(env if env is not None else base_env())
    env["LEAKPROOF_FD"] = str(w)
    if pin is not None:         # "same" or "other": as a run's first process left it
        st = os.fstat(w)
        ident = "%d:%d" % (st.st_dev, st.st_ino) if pin == "same" else "1:2"
        env["LEAKPROOF_FD_INODE"] = "%s:%d=%s" % (env.get("LEAKPROOF_RUN", ""), w, ident)
    if close_reader:
        os.close(r)
    proc = subprocess.Popen(argv, env=env, pass_fds=(w,), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    os.close(w)
    deadline = time.monotonic() + timeout
    chunks = []
    if not close_reader:
        with selectors.DefaultSelector() as sel, os.fdopen(r, "rb", buffering=0) as f:
            sel.register(f, selectors.EVENT_READ)
            while True:             # until every writer is gone
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    pytest.fail("%s did not finish in %ds" % (argv[0], timeout))
                chunk = f.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    data = b"".join(chunks)
    try:
        out, err = proc.communicate(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("%s did not finish in %ds" % (argv[0], timeout))
    proc.stdout_text = out.decode()
    proc.stderr_text = err.decode()
    assert data == b"" or data.endswith(b"\n"), data[-100:]
    lines = data.split(b"\n")[:-1] if data else []
    return lines, data, proc


def run_py(code, timeout=60, **kw):
    return run_with_pipe([PYTHON, "-c", textwrap.dedent(code)], timeout=timeout, **kw)


def ok(proc):
    assert proc.returncode == 0, proc.stderr_text
    return proc


def test_protocol_lines():
    lines, _, proc = run_py("""
        import leakproof
        assert leakproof.enabled()
        leakproof.step()
        leakproof.step(7)
        leakproof.epoch()
        leakproof.epoch(2)
        leakproof.metric(loss=0.5, lr=1e-4)
        leakproof.result(acc=0.93, n=3)
        leakproof.gpu(allocated=1024, reserved=2048)
        leakproof.gpu(reserved=4096)
        leakproof.mark("eval start")
    """)
    ok(proc)
    assert proc.stdout_text == ""
    assert lines == [
        b"step",
        b"step 7",
        b"epoch",
        b"epoch 2",
        b"metric loss=0.5 lr=0.0001",
        b"result acc=0.93 n=3.0",
        b"gpu allocated=1024 reserved=2048",
        b"gpu reserved=4096",
        b"mark eval start",
    ]


def test_step_numbers():
    lines, _, proc = run_py("""
        import numpy, leakproof
        leakproof.step(3.0)          # an integral float is a number
        leakproof.step(numpy.int64(5))
        leakproof.step(2.5)          # not a step number: numbered by the supervisor
        leakproof.step(-1)
        leakproof.step("x")
        leakproof.step(2 ** 63)      # past int64
        leakproof.epoch(numpy.float32(4))
    """)
    ok(proc)
    assert lines == [b"step 3", b"step 5", b"step", b"step", b"step", b"step", b"epoch 4"]


def test_metric_values_and_names():
    lines, _, proc = run_py("""
        import leakproof
        leakproof.metric(a=float("nan"), b=float("inf"), c=float("-inf"), d=True, e=-0.0)
        leakproof.metric(**{"val loss": 1, "1st": 2, "a/b:c-d.e": 3, "\u00e9t\u00e9": 4, "": 5})
        leakproof.metric(skip="not a number", keep=1.5, obj=object())
        leakproof.metric(only="text")      # nothing left: no line
        leakproof.metric()
        leakproof.result(**{"x=y": 1e300, "big": 10**400})
        leakproof.result(loss=float("nan"), up=float("inf"))
    """)
    ok(proc)
    assert lines == [
        b"metric d=1.0 e=-0.0",   # NaN and infinities: refused by the supervisor
        b"metric val_loss=1.0 _st=2.0 a/b:c-d.e=3.0 _t_=4.0 _=5.0",
        b"metric keep=1.5",
        b"result x_y=1e+300",
        b"result loss=nan",       # a diverged trial's result is kept
    ]


def test_many_values_split_over_lines():
    # The supervisor takes at most 32 NAME=VALUE pairs to a line and names
    # of at most 63 bytes.
    lines, _, proc = run_py("""
        import leakproof
        leakproof.metric(**{"m%04d_" % i + "x" * 100: i for i in range(200)})
        leakproof.result(**{"r%d" % i: i for i in range(32)})
    """)
    ok(proc)
    assert [len(line.split(b" ")) - 1 for line in lines] == [32] * 6 + [8] + [32]
    pairs = [pair for line in lines[:-1] for pair in line.split(b" ")[1:]]
    assert all(line.startswith(b"metric ") for line in lines[:-1])
    for i, pair in enumerate(pairs):                    # every one, in order
        assert pair == b"m%04d_%s=%d.0" % (i, b"x" * (63 - 6), i)
    assert lines[-1] == b"result " + b" ".join(b"r%d=%d.0" % (i, i) for i in range(32))


def test_marks():
    lines, _, proc = run_py("""
        import leakproof
        leakproof.mark("a\\nb\\r\\nc\\rd")
        leakproof.mark("x" * 10000)
        leakproof.mark("a" + "\u00e9" * 5000)  # 2 bytes each, cut inside one
        leakproof.mark("\u20ac" * 3000)      # 3 bytes each
        leakproof.mark(42)
        leakproof.mark("")
    """)
    ok(proc)
    assert len(lines) == 6
    assert lines[0] == b"mark a b c d"
    assert lines[1] == b"mark " + b"x" * (MAX_LINE - 1 - 5)
    assert len(lines[1]) + 1 == MAX_LINE
    for line, prefix, ch in ((lines[2], "mark a", "\u00e9"), (lines[3], "mark ", "\u20ac")):
        assert MAX_LINE - 3 < len(line) + 1 < MAX_LINE   # a partial character dropped
        text = line.decode("utf-8")
        assert text == prefix + ch * (len(text) - len(prefix))
    assert lines[4] == b"mark 42"
    assert lines[5] == b"mark "


def test_noop_without_fd():
    code = textwrap.dedent("""
        import leakproof
        assert not leakproof.enabled()
        leakproof.step(); leakproof.step(1); leakproof.epoch(); leakproof.metric(a=1)
        leakproof.result(b=2); leakproof.gpu(allocated=1, reserved=2); leakproof.mark("m")
        assert leakproof.gpu_from_torch() is None
        assert leakproof.run_id() is None and leakproof.restart() == 0
        print("done")
    """)
    # A pipe is open in the child, but LEAKPROOF_FD does not name it.
    r, w = os.pipe()
    proc = subprocess.run([PYTHON, "-c", code], env=base_env(), pass_fds=(w,),
                          capture_output=True, timeout=60)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        assert f.read() == b""
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"done\n"
    assert proc.stderr == b""


@pytest.mark.parametrize("value", ["999", "abc", "", "-1", "1.5"])
def test_noop_with_invalid_fd(value):
    code = """
        import leakproof
        assert not leakproof.enabled()
        leakproof.step(); leakproof.metric(a=1); leakproof.mark("m")
        print("done")
    """
    proc = subprocess.run([PYTHON, "-c", textwrap.dedent(code)],
                          env=base_env(LEAKPROOF_FD=value), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"done\n"
    assert proc.stderr == b""


def test_noop_when_fd_is_a_regular_file(tmp_path):
    path = tmp_path / "file"
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        proc = subprocess.run(
            [PYTHON, "-c", "import leakproof; leakproof.step(); print(leakproof.enabled())"],
            env=base_env(LEAKPROOF_FD=str(fd)), pass_fds=(fd,), capture_output=True, timeout=60)
    finally:
        os.close(fd)
    assert proc.stdout == b"False\n", proc.stderr
    assert path.read_bytes() == b""


def test_environment_helpers():
    code = "import leakproof; print(leakproof.run_id(), leakproof.restart())"
    for extra, want in (({"LEAKPROOF_RUN": "r42", "LEAKPROOF_RESTART": "3"}, b"r42 3\n"),
                        ({"LEAKPROOF_RESTART": "junk"}, b"None 0\n"),
                        ({"LEAKPROOF_RESTART": "-2"}, b"None 0\n")):
        proc = subprocess.run([PYTHON, "-c", code], env=base_env(**extra),
                              capture_output=True, timeout=60)
        assert proc.stdout == want, proc.stderr


@pytest.mark.parametrize("sigpipe", ["ignored", "default"])
def test_closed_reader_does_not_raise(sigpipe):
    # Python ignores SIGPIPE; a program that restored the default action
    # must not be killed by it either.
    lines, _, proc = run_py("""
        import signal, leakproof
        if %r == "default":
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        assert leakproof.enabled()
        for i in range(100):
            leakproof.step(i)
            leakproof.metric(loss=i)
            leakproof.mark("x" * 3000)
        assert not leakproof.enabled()     # turned off after EPIPE
        print("alive")
    """ % sigpipe, close_reader=True)
    ok(proc)
    assert proc.stdout_text == "alive\n"
    assert proc.stderr_text == ""


def test_threads_never_interleave():
    nthreads, per_thread = 8, 400
    lines, data, proc = run_py("""
        import threading, leakproof
        def work(t):
            for i in range(%d):
                size = (i * 977 + t * 131) %% 4000
                leakproof.mark("%%d:%%d:" %% (t, i) + chr(97 + t) * size)
                leakproof.step()
        threads = [threading.Thread(target=work, args=(t,)) for t in range(%d)]
        for th in threads: th.start()
        for th in threads: th.join()
    """ % (per_thread, nthreads))
    ok(proc)
    assert len(lines) == 2 * nthreads * per_thread
    seen = set()
    for line in lines:
        if line == b"step":
            continue
        assert line.startswith(b"mark "), line[:40]
        t, i, fill = line[5:].split(b":", 2)
        t, i = int(t), int(i)
        assert fill == bytes([97 + t]) * ((i * 977 + t * 131) % 4000)
        seen.add((t, i))
    assert len(seen) == nthreads * per_thread
    assert lines.count(b"step") == nthreads * per_thread


def test_nonblocking_socket_lines_whole_or_dropped():
    # A channel that is a non-blocking TCP socket with a small buffer: writes
    # are partial or refused now and then (a pipe's never are partial); a
    # line is then finished or dropped, never cut with the next glued on.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        child = socket.socket()
        child.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        child.connect(server.getsockname())
        parent, _ = server.accept()
    child.setblocking(False)
    code = textwrap.dedent("""
        import leakproof
        for i in range(300):
            leakproof.mark("%d:" % i + "y" * (1000 + i * 7 % 3000))
        print(leakproof.enabled())
    """)
    proc = subprocess.Popen([PYTHON, "-c", code], env=base_env(LEAKPROOF_FD=str(child.fileno())),
                            pass_fds=(child.fileno(),), stdout=subprocess.PIPE)
    child.close()
    chunks = []
    parent.settimeout(60)
    while True:
        chunk = parent.recv(1500)
        if not chunk:
            break
        chunks.append(chunk)
    out, _ = proc.communicate(timeout=60)
    parent.close()
    assert proc.returncode == 0 and out == b"True\n"
    data = b"".join(chunks)
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    assert 0 < len(lines) <= 300
    last = -1
    for line in lines:
        head, fill = line[5:].split(b":", 1)
        i = int(head)
        assert line.startswith(b"mark ") and i > last
        assert fill == b"y" * (1000 + i * 7 % 3000)
        last = i


def test_forked_children_report_too():
    lines, _, proc = run_py("""
        import os, threading, time, leakproof
        leakproof.step(1)
        # A lock held by another thread at fork time must not deadlock the child.
        held = threading.Event()
        def hold():
            with leakproof._lock:
                held.set()
                time.sleep(0.2)
        t = threading.Thread(target=hold)
        t.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            leakproof.mark("child")
            leakproof.step(2)
            os._exit(0)
        os.waitpid(pid, 0)
        t.join()
        leakproof.mark("parent")
    """, timeout=20)
    ok(proc)
    assert lines == [b"step 1", b"mark child", b"step 2", b"mark parent"]


def test_descriptor_reused_for_another_pipe_stays_silent():
    # A child started fresh (subprocess, multiprocessing "spawn") does not
    # inherit the channel; if its descriptor of that number is another pipe,
    # the client must not write into it.
    lines, _, proc = run_py("""
        import os, subprocess, sys, leakproof
        leakproof.step(1)
        fd = int(os.environ["LEAKPROOF_FD"])
        child = '''
        import os, fcntl, leakproof
        fd = int(os.environ["LEAKPROOF_FD"])
        r, w = os.pipe()
        os.dup2(w, fd)
        leakproof.step(99)
        leakproof.mark("leak")
        fcntl.fcntl(r, fcntl.F_SETFL, os.O_NONBLOCK)
        try:
            data = os.read(r, 100)
        except BlockingIOError:
            data = b""
        print(leakproof.enabled(), repr(data))
        '''
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
        sys.stdout.write(out.stdout + out.stderr)
        # A child that does inherit the channel reports.
        subprocess.run([sys.executable, "-c", "import leakproof; leakproof.step(3)"],
                       pass_fds=(fd,), check=True)
        leakproof.step(4)
    """)
    ok(proc)
    assert proc.stdout_text == "False b''\n"
    assert lines == [b"step 1", b"step 3", b"step 4"]


def test_gpu_from_torch_with_a_stand_in():
    lines, _, proc = run_py("""
        import sys, types, leakproof
        assert leakproof.gpu_from_torch() is None          # torch not imported
        torch = types.ModuleType("torch")
        torch.cuda = types.SimpleNamespace(
            is_available=lambda: True, is_initialized=lambda: False,
            memory_allocated=lambda d=None: 123, memory_reserved=lambda d=None: 456)
        sys.modules["torch"] = torch
        assert leakproof.gpu_from_torch() is None          # no CUDA context yet
        torch.cuda.is_initialized = lambda: True
        assert leakproof.gpu_from_torch() == (123, 456)
        torch.cuda.memory_allocated = lambda d=None: 1 / 0
        assert leakproof.gpu_from_torch() is None          # errors stay inside
    """)
    ok(proc)
    assert lines == [b"gpu allocated=123 reserved=456"]


def test_gpu_from_real_torch_without_cuda():
    lines, _, proc = run_py("""
        import torch, leakproof
        want = None
        if torch.cuda.is_available():
            torch.zeros(1024, device="cuda")
            want = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        assert leakproof.gpu_from_torch() == want
        print(want is not None)
    """)
    ok(proc)
    if proc.stdout_text == "True\n":
        assert len(lines) == 1 and lines[0].startswith(b"gpu allocated=")
    else:
        assert lines == []


# ---- the C client ----

C_PROGRAM = r"""
#include <leakproof.h>
#include <stdlib.h>
#include <string.h>

static char big[10000];

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 1)   /* make the first write fail with EPIPE */
		signal(SIGPIPE, SIG_DFL);
	lp_step(3);
	lp_step_auto();
	lp_step(-5);
	lp_epoch(1);
	lp_epoch_auto();
	lp_metric("loss", 0.5);
	lp_metric("val loss", 0.1);
	lp_metric("x", 1.0 / 3.0);
	lp_metric("1st", 1e300);
	lp_metric("a_name_of_seventy_characters_is_cut_to_sixty_three_bytes_xxxxxxxxxxxxx", 1);
	lp_metric("n", strtod("nan", NULL));
	lp_metric("nn", -strtod("nan", NULL));   /* printf would say -nan */
	lp_metric("p", strtod("inf", NULL));
	lp_metric("m", -strtod("inf", NULL));
	lp_result("acc", 0.93);
	lp_gpu(1024, 2048);
	lp_mark("hello\nworld\r!");
	memset(big, 'x', sizeof(big) - 1);
	lp_mark(big);
	memset(big, 0, sizeof(big));
	big[0] = 'a';   /* so that the cut falls inside a 2-byte character */
	for (int i = 1; i + 2 < 5000; i += 2)
		memcpy(big + i, "\xc3\xa9", 2);   /* e acute */
	lp_mark(big);
	printf("enabled=%d restart=%d run=%s\n", lp_enabled(), lp_restart(),
	       lp_run_id() ? lp_run_id() : "(none)");
	return 0;
}
"""

C_EXPECTED = [
    b"step 3",
    b"step",
    b"step",
    b"epoch 1",
    b"epoch",
    b"metric loss=0.5",
    b"metric val_loss=0.1",
    b"metric x=0.3333333333333333",
    b"metric _st=1e+300",
    b"metric a_name_of_seventy_characters_is_cut_to_sixty_three_bytes_xxxxxx=1",
    b"metric n=nan",
    b"metric nn=nan",
    b"metric p=inf",
    b"metric m=-inf",
    b"result acc=0.93",
    b"gpu allocated=1024 reserved=2048",
    b"mark hello world !",
    b"mark " + b"x" * (MAX_LINE - 1 - 5),
]

COMPILERS = [
    ("gcc", "c11", ["-std=c11", "-pedantic"]),
    ("gcc", "gnu99", ["-std=gnu99"]),
    ("clang", "c11", ["-std=c11", "-pedantic"]),
    ("g++", "c++11", ["-std=c++11", "-pedantic", "-Wold-style-cast", "-x", "c++"]),
    ("clang++", "c++17", ["-std=c++17", "-pedantic", "-Wold-style-cast", "-x", "c++"]),
]
WARNINGS = ["-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wformat=2", "-Wconversion",
            "-Wsign-conversion", "-Wfloat-equal", "-Wundef"]


@pytest.fixture(scope="module", params=COMPILERS, ids=lambda c: "%s-%s" % (c[0], c[1]))
def c_client(request, tmp_path_factory):
    cc, _, flags = request.param
    if not shutil.which(cc):
        if cc == "gcc":
            pytest.fail("gcc is needed to build the C client test")
        pytest.skip("%s not installed" % cc)
    d = tmp_path_factory.mktemp("cclient")
    src = d / "prog.c"
    src.write_text(C_PROGRAM)
    exe = d / "prog"
    subprocess.run([cc] + flags + WARNINGS + ["-I", os.path.join(REPO, "include"),
                   "-o", str(exe), str(src)], check=True, timeout=120)
    return str(exe)


def test_c_client_lines(c_client):
    lines, _, proc = run_with_pipe([c_client], env=base_env(LEAKPROOF_RUN="r7",
                                                            LEAKPROOF_RESTART="2"))
    ok(proc)
    assert proc.stdout_text == "enabled=1 restart=2 run=r7\n"
    assert lines[:-1] == C_EXPECTED
    last = lines[-1]
    assert len(last) + 1 == MAX_LINE - 1       # half a character dropped
    text = last.decode("utf-8")
    assert text == "mark a" + "\u00e9" * (len(text) - 6)


def test_c_client_noop(c_client):
    for extra in ({}, {"LEAKPROOF_FD": "999"}, {"LEAKPROOF_FD": "x"}):
        proc = subprocess.run([c_client], env=base_env(**extra), capture_output=True, timeout=60)
        assert proc.returncode == 0
        assert proc.stdout == b"enabled=0 restart=0 run=(none)\n"
        assert proc.stderr == b""


def test_c_client_closed_reader(c_client):
    # SIGPIPE at its default action: the client must hold it off.
    _, _, proc = run_with_pipe([c_client, "sigpipe"], close_reader=True)
    assert proc.returncode == 0, (proc.returncode, signal.SIGPIPE)
    assert proc.stdout_text == "enabled=0 restart=0 run=(none)\n"


def test_c_client_checks_the_pin(c_client):
    env = base_env(LEAKPROOF_RUN="r8")
    lines, _, proc = run_with_pipe([c_client], env=env, pin="same")
    ok(proc)
    assert lines[0] == b"step 3" and proc.stdout_text.startswith("enabled=1")
    lines, _, proc = run_with_pipe([c_client], env=env, pin="other")
    ok(proc)
    assert lines == [] and proc.stdout_text.startswith("enabled=0")

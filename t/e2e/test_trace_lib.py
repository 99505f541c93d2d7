"""
The allocation tracer library (libleakproof-trace.so) on its own: the test
programs of t/trace run with LD_PRELOAD=<build>/libleakproof-trace.so and
LEAKPROOF_TRACE_FD=3, fd 3 a file or a pipe that the test then parses with a
strict parser of the wire protocol (docs/internals/tracer.md), and the
estimates are compared with what the programs say they kept.

The C programs are built into a scratch directory here. The library comes
from $LEAKPROOF_BUILD (build/ by default), like the leakproof binary.
LEAKPROOF_TRACE_VALGRIND=0 skips the valgrind test (it takes a minute).
"""
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / os.environ.get("LEAKPROOF_BUILD", "build")
LIB = BUILD / "libleakproof-trace.so"
SRC = REPO / "t" / "trace"
PY = "/usr/bin/python3"
# A site's estimate has a relative error of about 1/sqrt(live / mean): the
# tests that keep tens of MiB sample more often than the default 512 KiB so
# that their 25 % tolerance is 4 standard deviations or more.
SMALL_MEAN = {"LEAKPROOF_TRACE_MEAN": "65536"}
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-Wall", "-Wextra", "-Werror"]
LINE_MAX = 4096


# ---- the wire protocol, parsed strictly ---------------------------------

class Image:
    """One process image: everything after one hello of a pid."""

    def __init__(self, pid, ppid, mean, exe):
        self.pid, self.ppid, self.mean, self.exe = pid, ppid, mean, exe
        self.maps = {}       # id -> path
        self.sites = {}      # id -> {"kind", "frames": [(map, vaddr, sym)]}
        self.py = {}         # id -> [(line, func, file)]
        self.live = {}       # id -> (live_bytes, allocs, frees), latest
        self.ends = []       # (seq, total_live_bytes, dropped)
        self.open_seq = None

    @property
    def total(self):
        return self.ends[-1][1] if self.ends else 0

    def site_live(self, sid):
        return self.live.get(sid, (0, 0, 0))[0]

    def frames_text(self, sid):
        return " ".join("%s:%x:%s" % (self.maps.get(m, "?"), v, s or "") for m, v, s in self.sites[sid]["frames"])

    def describe(self, n=8):
        rows = sorted(self.live, key=lambda s: -self.site_live(s))[:n]
        return "\n".join("  site %d live=%d allocs=%d frees=%d %s | py %s" % (
            s, *self.live[s], self.frames_text(s)[:300], self.py.get(s, [])[:3]) for s in rows)


class Trace:
    def __init__(self, data):
        self.images = []                 # in order of hello
        self.by_pid = {}                 # pid -> [Image]
        assert isinstance(data, bytes)
        assert data == b"" or data.endswith(b"\n"), "the trace ends in the middle of a line"
        for raw in data.split(b"\n")[:-1]:
            assert len(raw) + 1 <= LINE_MAX, "line over %d bytes: %r" % (LINE_MAX, raw[:200])
            self.parse(raw.decode("utf-8", "replace"))

    def current(self, pid):
        assert pid in self.by_pid, "a record of pid %d before its hello" % pid
        return self.by_pid[pid][-1]

    def parse(self, line):
        word, _, rest = line.partition(" ")
        if word == "hello":
            pid, ppid, mean, exe = rest.split(" ", 3)
            img = Image(int(pid), int(ppid), int(mean), exe)
            self.images.append(img)
            self.by_pid.setdefault(img.pid, []).append(img)
        elif word == "map":
            pid, mid, path = rest.split(" ", 2)
            img = self.current(int(pid))
            assert int(mid) not in img.maps, "map %s announced twice: %s" % (mid, line)
            img.maps[int(mid)] = path
        elif word == "site":
            f = rest.split(" ")
            img = self.current(int(f[0]))
            sid, kind = int(f[1]), f[2]
            assert kind in ("m", "a"), line
            frames = []
            for fr in f[3:]:
                parts = fr.split(":", 2)
                assert len(parts) >= 2, "bad frame %r" % fr
                m = int(parts[0])
                assert m in img.maps, "frame in map %d before its map line: %s" % (m, line[:200])
                frames.append((m, int(parts[1], 16), parts[2] if len(parts) > 2 else None))
            assert len(frames) <= 64
            img.sites[sid] = {"kind": kind, "frames": frames}
        elif word == "py":
            pid, sid, text = rest.split(" ", 2)
            img = self.current(int(pid))
            assert int(sid) in img.sites, "py line before its site line: " + line[:200]
            frames = []
            for fr in text.split("\t"):
                ln, func, file = fr.split(":", 2)
                frames.append((int(ln), func, file))
            assert 1 <= len(frames) <= 32
            img.py[int(sid)] = frames
        elif word == "live":
            f = rest.split(" ")
            img = self.current(int(f[0]))
            seq, t_ns = int(f[1]), int(f[2])
            assert t_ns > 0
            assert img.open_seq in (None, seq), "live of seq %d inside seq %s" % (seq, img.open_seq)
            img.open_seq = seq
            assert len(f) > 3, "a live line with no site"
            for e in f[3:]:
                sid, live, allocs, frees = (int(x) for x in e.split(":"))
                assert sid in img.sites, "live of site %d before its site line" % sid
                assert allocs >= frees >= 0 and live >= 0, e
                img.live[sid] = (live, allocs, frees)
        elif word == "end":
            pid, seq, total, dropped = (int(x) for x in rest.split(" "))
            img = self.current(pid)
            assert img.open_seq in (None, seq)
            assert not img.ends or seq > img.ends[-1][0], "seq went back: " + line
            img.open_seq = None
            img.ends.append((seq, total, dropped))
            # with no line lost, the total is the sum of what the live lines said
            assert dropped or total == sum(v[0] for v in img.live.values()), \
                "end total %d is not the sum of the sites' live bytes %d" % (
                    total, sum(v[0] for v in img.live.values()))
        else:
            raise AssertionError("unknown record: " + line[:200])


# ---- building and running ------------------------------------------------

@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    assert LIB.is_file(), f"{LIB} is missing: run make B={BUILD.name} first"
    out = tmp_path_factory.mktemp("trace-progs")
    cc = os.environ.get("CC", "cc")

    def build(args):
        subprocess.run([cc] + CFLAGS + args, check=True, cwd=out)

    build(["-fPIC", "-shared", "-o", "libtracekeep.so", str(SRC / "keep_lib.c")])
    build(["-rdynamic", "-o", "keep_main", str(SRC / "keep_main.c"), "-L.", "-ltracekeep",
           "-Wl,-rpath," + str(out)])
    build(["-pthread", "-o", "stress", str(SRC / "stress.c")])
    build(["-o", "forker", str(SRC / "forker.c")])
    build(["-o", "robust", str(SRC / "robust.c"), "-ldl"])
    return out


def traced_env(extra=None, fd=3):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEAKPROOF_TRACE")}
    env["LD_PRELOAD"] = str(LIB)
    if fd is not None:
        env["LEAKPROOF_TRACE_FD"] = str(fd)
    env.update(extra or {})
    return env


def run_traced(argv, cwd, env_extra=None, pipe=False, timeout=120, prefix=()):
    """Runs argv with the tracer writing to fd 3: a file, or a pipe read by a
    thread. Returns (CompletedProcess, Trace)."""
    if pipe:
        r, w = os.pipe()
        chunks = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(r, 65536), b"")))
        reader.start()
        src = w
    else:
        path = Path(cwd) / "trace.out"
        src = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        proc = subprocess.run(list(prefix) + argv, cwd=cwd, env=traced_env(env_extra), capture_output=True,
                              timeout=timeout, pass_fds=(3,), preexec_fn=lambda: os.dup2(src, 3))
    finally:
        os.close(src)
    if pipe:
        reader.join(timeout=30)
        os.close(r)
        data = b"".join(chunks)
    else:
        data = path.read_bytes()
    return proc, Trace(data)


def kv(text, key):
    m = re.search(r"^%s=(\d+)$" % key, text if isinstance(text, str) else text.decode(), re.M)
    assert m, "%s missing from the program's output:\n%s" % (key, text)
    return int(m.group(1))


def within(est, truth, tol):
    return abs(est - truth) <= tol * truth


def has_sym(img, sid, sym, lib=None):
    return any(s == sym and (lib is None or img.maps.get(m, "").endswith(lib))
               for m, _, s in img.sites[sid]["frames"])


# ---- 1. a helper that keeps one allocation in 50 --------------------------

def test_helper_site_is_found_and_sized(progs, tmp_path):
    proc, tr = run_traced([str(progs / "keep_main")], tmp_path, pipe=True)
    assert proc.returncode == 0, proc.stderr
    truth = kv(proc.stdout, "KEPT_BYTES")
    assert len(tr.images) == 1
    img = tr.images[0]
    assert img.pid > 0 and img.mean == 524288 and img.exe.endswith("/keep_main")
    assert img.ends, "no end line"
    top = max(img.live, key=img.site_live)
    assert has_sym(img, top, "keep_some", "libtracekeep.so"), \
        "the largest site is not keep_some's:\n" + img.describe()
    helper = [s for s in img.sites if has_sym(img, s, "keep_some")]
    est = sum(img.site_live(s) for s in helper)
    assert within(est, truth, 0.25), "keep_some: %d estimated, %d kept\n%s" % (est, truth, img.describe())
    # the short-lived sites were sampled a lot and end near zero
    short = [s for s in img.sites if has_sym(img, s, "short_a") or has_sym(img, s, "short_b")]
    assert sum(img.live[s][1] for s in short if s in img.live) > 1000, img.describe()
    assert sum(img.site_live(s) for s in short) < 0.05 * truth, img.describe()
    # whatever is not keep_some's is small
    assert img.total - est < 0.05 * truth, img.describe()
    assert img.ends[-1][2] == 0, "lines dropped"


def test_helper_is_the_top_growing_site_of_a_run(progs, lp):
    """The same program under `leakproof run --trace`, its steps marked by a
    regex on its output: keep_some is the one growing site, and the
    short-lived sites, sampled far more often, are not growing.

    keep_some keeps about 2 MB a step in blocks of about 2 KB: at the default
    mean of 512 KiB that is some 4 samples a step, and the slope over the
    steps after warm-up spread 0.68-1.27 of the truth in 15 busy runs. At
    128 KiB, some 16 a step, it spread 0.94-1.05, so the 25% below is the
    estimate's, not the sampling's."""
    iters, steps = 2000000, 40
    r = lp.run([progs / "keep_main", iters, steps], "--trace", "--trace-mean", "128K",
               "--step-regex", r"^step (\d+)$")
    assert r.rc == 0, r
    kept = kv(r.stdout, "KEPT_BYTES")
    rep = lp.report()
    sites = rep["trace"]["sites"]
    grow = [s for s in sites if s["growing"]]
    assert grow and grow[0]["function"] == "keep_some" and grow[0]["library"] == "libtracekeep.so", \
        [(s["library"], s["function"], s["growth_bytes_per_step"]) for s in sites[:5]]
    assert grow[0]["growth_bytes_per_step"] == pytest.approx(kept / steps, rel=0.25), grow[0]
    assert all(s["function"] == "keep_some" for s in grow), grow
    short = [s for s in sites if s["function"] in ("short_a", "short_b")]
    assert all(not s["growing"] for s in short), short
    assert rep["trace"]["libraries"][0]["library"] == "libtracekeep.so", rep["trace"]["libraries"]
    text = lp.cmd(["report", "--store", lp.store, "--trace"])
    assert text.rc == 0 and "keep_some" in text.out and "libtracekeep.so" in text.out, text


# ---- 2. threads and every entry point --------------------------------------

def test_threads_stress(progs, tmp_path):
    proc, tr = run_traced([str(progs / "stress"), "4", "300000"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    truth = kv(proc.stdout, "KEPT_BYTES")
    assert len(tr.images) == 1
    img = tr.images[0]
    assert within(img.total, truth, 0.2), "%d estimated, %d kept\n%s" % (img.total, truth, img.describe())
    kinds = {s["kind"] for s in img.sites.values()}
    assert kinds == {"m", "a"}, kinds
    # mmap'd blocks are unmapped right away: their sites end at zero
    assert sum(img.site_live(s) for s, v in img.sites.items() if v["kind"] == "a") == 0
    # the work was spread over the threads' sites: many sites, sampled often
    assert len(img.sites) >= 8 and sum(v[1] for v in img.live.values()) > 1000, img.describe()


# ---- 3. fork per batch ------------------------------------------------------

def test_fork_per_batch(progs, tmp_path):
    proc, tr = run_traced([str(progs / "forker")], tmp_path, env_extra=SMALL_MEAN, pipe=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().split("\n")
    children = {int(l.split()[1]): int(l.split()[2]) for l in out if l.startswith("CHILD ")}
    parent_pid, parent_kept = next((int(l.split()[1]), int(l.split()[2])) for l in out if l.startswith("PARENT "))
    assert len(children) == 4
    assert [i.pid for i in tr.images][0] == parent_pid
    for pid, kept in children.items():
        imgs = tr.by_pid.get(pid)
        assert imgs, "child %d never said hello" % pid
        assert imgs[0].ppid == parent_pid
        assert within(imgs[-1].total, kept, 0.25), "child %d: %d estimated, %d kept\n%s" % (
            pid, imgs[-1].total, kept, imgs[-1].describe())
    parent = tr.by_pid[parent_pid][-1]
    assert within(parent.total, parent_kept, 0.25), "parent: %d estimated, %d kept" % (parent.total, parent_kept)


# ---- 4. Python ---------------------------------------------------------------

def test_python_numpy_site(tmp_path):
    script = SRC / "keep_numpy.py"
    proc, tr = run_traced([PY, str(script)], tmp_path, env_extra={"LEAKPROOF_TRACE_MEAN": "131072"}, pipe=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    truth, line = kv(proc.stdout, "KEPT_BYTES"), kv(proc.stdout, "KEEP_LINE")
    img = tr.images[0]
    want = (line, "grow_step", str(script))
    sites = [s for s, fr in img.py.items() if want in fr]
    assert sites, "no site names %s:%d in grow_step; py sites:\n%s" % (script, line, "\n".join(
        str(v[:4]) for v in list(img.py.values())[:20]))
    est = sum(img.site_live(s) for s in sites)
    assert within(est, truth, 0.25), "grow_step: %d estimated, %d kept\n%s" % (est, truth, img.describe())
    top = max(img.live, key=img.site_live)
    assert top in sites, img.describe()
    # the churn's arrays are gone
    churn = [s for s, fr in img.py.items() if any(f[1] == "churn" for f in fr)]
    assert churn and sum(img.site_live(s) for s in churn) < 0.1 * truth


def interpreters():
    """Debian's python3 and every other CPython 3.10+ found: on PATH, in
    $LEAKPROOF_TEST_PYTHONS (colon-separated), or installed by pyenv. The
    in-place frame reader has a layout per version."""
    candidates = [shutil.which("python3.%d" % minor) for minor in range(10, 15)]
    candidates += os.environ.get("LEAKPROOF_TEST_PYTHONS", "").split(":")
    if shutil.which("pyenv"):
        bare = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        for v in bare:
            if re.fullmatch(r"3\.1\d\.\d+", v):
                prefix = subprocess.run(["pyenv", "prefix", v], capture_output=True, text=True).stdout.strip()
                candidates.append(os.path.join(prefix, "bin", "python3"))
    found = {os.path.realpath(PY): PY}
    for exe in filter(None, candidates):
        # by its real executable: a version manager's shim is a shell script
        r = subprocess.run([exe, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
        real = r.stdout.strip()
        if r.returncode == 0 and real:
            found.setdefault(os.path.realpath(real), real)
    return sorted(found.values())


@pytest.mark.parametrize("python", interpreters())
def test_python_line_without_the_gil(progs, tmp_path, python):
    """keep_ctypes.py allocates through ctypes, which releases the GIL around
    the call as PyTorch does around its operators: the Python line is read in
    place, for the main thread, for a thread of its own, and for realloc."""
    script = SRC / "keep_ctypes.py"
    proc, tr = run_traced([python, str(script), str(progs / "libtracekeep.so")], tmp_path,
                          env_extra=SMALL_MEAN, timeout=300)
    assert proc.returncode == 0, proc.stderr
    img = next(i for i in tr.images if i.py)
    assert not img.ends[-1][2], "%d lines dropped" % img.ends[-1][2]
    out = proc.stdout

    def sites_at(line, func):
        return [s for s, fr in img.py.items() if fr[0] == (line, func, str(script))]

    main_sites = sites_at(kv(out, "KEEP_LINE"), "grow_step")
    thread_sites = sites_at(kv(out, "THREAD_LINE"), "grow_in_thread")
    assert main_sites and thread_sites, img.describe(20)
    # the kept memory is keep_some's, seen through the ctypes call; a sample
    # of CPython's own allocations at the same line (a string interned while
    # it runs) may be a site of that line too
    for sites in (main_sites, thread_sites):
        assert [s for s in sites if has_sym(img, s, "keep_some", "libtracekeep.so")], \
            "\n".join(img.frames_text(s) for s in sites)
    # the thread's stack is its own: it starts in threading, not in main()
    assert all(any(f[1] == "run" and f[2].endswith("threading.py") for f in img.py[s]) for s in thread_sites)
    main_live = sum(img.site_live(s) for s in main_sites)
    thread_live = sum(img.site_live(s) for s in thread_sites)
    assert main_live > 0 and thread_live > 0, img.describe(20)
    assert within(main_live + thread_live, kv(out, "KEPT_BYTES"), 0.25), img.describe()
    grown = sites_at(kv(out, "REALLOC_LINE"), "grow_by_realloc")
    assert grown, img.describe(20)
    assert within(sum(img.site_live(s) for s in grown), kv(out, "REALLOC_BYTES"), 0.25), img.describe()


# ---- 5. exec, dlopen, signals, a dead reader, no channel ------------------------

def test_exec_children_are_traced(progs, tmp_path):
    proc, tr = run_traced([str(progs / "robust"), "exec"], tmp_path, env_extra=SMALL_MEAN)
    assert proc.returncode == 0, proc.stderr
    allocs = {int(l.split()[1]): int(l.split()[2]) for l in proc.stdout.decode().splitlines()
              if l.startswith("ALLOC ")}
    assert len(allocs) == 2
    first = tr.images[0].pid
    assert first in allocs, "the image that exec'd in place keeps its pid"
    for pid, kept in allocs.items():
        imgs = tr.by_pid[pid]
        assert imgs[-1].exe.endswith("/robust")
        assert within(imgs[-1].total, kept, 0.25), "%d: %d estimated, %d kept" % (pid, imgs[-1].total, kept)
    # the forked child: a hello at fork and one after its exec
    child = next(p for p in allocs if p != first)
    assert len(tr.by_pid[child]) == 2 and tr.by_pid[child][0].ppid == first
    # the parent: its first image, then the one it exec'd into
    assert len(tr.by_pid[first]) == 2


def test_dlopen_after_start(progs, tmp_path):
    proc, tr = run_traced([str(progs / "robust"), "dlopen", str(progs / "libtracekeep.so")], tmp_path,
                          env_extra=SMALL_MEAN)
    assert proc.returncode == 0, proc.stderr
    truth = kv(proc.stdout, "KEPT_BYTES")
    img = tr.images[0]
    helper = [s for s in img.sites if has_sym(img, s, "keep_some", "libtracekeep.so")]
    assert helper, img.describe()
    assert within(sum(img.site_live(s) for s in helper), truth, 0.25), img.describe()


def test_signal_handler_that_mallocs(progs, tmp_path):
    # a small mean: nearly every mapping is sampled, so the timer often lands
    # inside the tracer's sampled path
    proc, tr = run_traced([str(progs / "robust"), "signal"], tmp_path, env_extra={"LEAKPROOF_TRACE_MEAN": "4096"},
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert kv(proc.stdout, "HANDLER_CALLS") >= 200
    img = tr.images[0]
    assert any(v["kind"] == "a" for v in img.sites.values())
    assert img.ends


def test_reader_gone(progs, tmp_path):
    """The supervisor died: writes fail with EPIPE, the job must not get SIGPIPE."""
    r, w = os.pipe()
    os.close(r)
    env = traced_env()
    proc = subprocess.run([str(progs / "keep_main"), "200000"], cwd=tmp_path, env=env, capture_output=True,
                          timeout=60, pass_fds=(3,), preexec_fn=lambda: os.dup2(w, 3))
    os.close(w)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.startswith(b"KEPT_BYTES=")


def test_full_pipe_drops_lines(progs, tmp_path):
    """Nobody reads: lines that would block are dropped, the job goes on."""
    r, w = os.pipe()
    env = traced_env({"LEAKPROOF_TRACE_MEAN": "4096", "LEAKPROOF_TRACE_INTERVAL_MS": "0"})
    proc = subprocess.run([str(progs / "keep_main"), "300000"], cwd=tmp_path, env=env, capture_output=True,
                          timeout=60, pass_fds=(3,), preexec_fn=lambda: os.dup2(w, 3))
    os.close(w)
    os.set_blocking(r, False)
    data = b""
    try:
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    os.close(r)
    assert proc.returncode == 0, proc.stderr
    assert 32768 <= len(data) <= 65536, len(data)
    Trace(data[:data.rfind(b"\n") + 1])      # what got through is whole lines


@pytest.mark.parametrize("fd", [None, "99", "1", "2", "0", "x"])
def test_no_channel_no_output(progs, tmp_path, fd):
    plain = subprocess.run([str(progs / "robust"), "plain"], cwd=tmp_path, capture_output=True, timeout=60)
    env = traced_env(fd=fd)
    traced = subprocess.run([str(progs / "robust"), "plain"], cwd=tmp_path, env=env, capture_output=True,
                            timeout=60)
    assert traced.returncode == 0 == plain.returncode
    assert traced.stdout == plain.stdout and traced.stdout.startswith(b"plain output")
    assert traced.stderr == b""
    assert list(tmp_path.iterdir()) == []


def test_pinned_descriptor(progs, tmp_path):
    """With LEAKPROOF_TRACE_FD_INODE, a descriptor that is some other file is left alone."""
    path = tmp_path / "trace.out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    st = os.fstat(fd)
    for pin, want in (("%d:%d" % (st.st_dev, st.st_ino), True), ("%d:%d" % (st.st_dev, st.st_ino + 1), False)):
        os.ftruncate(fd, 0)
        env = traced_env({"LEAKPROOF_TRACE_FD_INODE": pin})
        proc = subprocess.run([str(progs / "robust"), "plain"], cwd=tmp_path, env=env, capture_output=True,
                              timeout=60, pass_fds=(3,), preexec_fn=lambda: os.dup2(fd, 3))
        assert proc.returncode == 0
        assert (path.stat().st_size > 0) == want, pin
    os.close(fd)


# ---- 6. valgrind --------------------------------------------------------------

@pytest.mark.skipif(os.environ.get("LEAKPROOF_TRACE_VALGRIND") == "0", reason="LEAKPROOF_TRACE_VALGRIND=0")
@pytest.mark.parametrize("argv", [["keep_main", "100000"], ["stress", "2", "20000"], ["forker"],
                                  ["robust", "dlopen", "libtracekeep.so"], ["robust", "exec"]])
def test_under_valgrind(progs, tmp_path, argv):
    """By default memcheck replaces malloc in every object, the tracer's
    included, which would leave the tracer out of the run. With
    somalloc=nouserintercepts it replaces only libc's (__libc_malloc and
    friends too), so the program calls the tracer, the tracer forwards to
    memcheck's allocator, the program's heap is still checked, and what
    memcheck checks of the tracer is its own code: reads and writes, use of
    undefined values, system call arguments. t/trace/valgrind.supp
    suppresses libunwind's deliberate probing of addresses."""
    vg = shutil.which("valgrind")
    assert vg, "valgrind is not installed (scripts/install-deps)"
    args = [str(progs / argv[0])] + [str(progs / a) if a.endswith(".so") else a for a in argv[1:]]
    prefix = [vg, "-q", "--error-exitcode=99", "--soname-synonyms=somalloc=nouserintercepts",
              "--suppressions=" + str(SRC / "valgrind.supp"), "--trace-children=yes"]
    proc, tr = run_traced(args, tmp_path, prefix=prefix, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-4000:]
    assert b"ERROR SUMMARY" not in proc.stderr and proc.stderr == b"", proc.stderr.decode()[-4000:]
    # valgrind's launcher is traced too (it says hello, then execs the tool)
    img = max(tr.images, key=lambda i: len(i.sites)) if tr.images else None
    assert img and img.sites, "the tracer saw nothing under valgrind"
    assert img.ends


@pytest.mark.skipif(os.environ.get("LEAKPROOF_TRACE_VALGRIND") == "0", reason="LEAKPROOF_TRACE_VALGRIND=0")
def test_python_frames_under_valgrind(progs, tmp_path):
    """The Python stack read in place, under memcheck: keep_ctypes.py's
    allocations made without the GIL name their line, and memcheck finds
    nothing wrong in the reads (PYTHONMALLOC=malloc: CPython's own small
    object allocator is not memcheck-clean by design)."""
    vg = shutil.which("valgrind")
    assert vg, "valgrind is not installed (scripts/install-deps)"
    prefix = [vg, "-q", "--error-exitcode=99", "--soname-synonyms=somalloc=nouserintercepts",
              "--suppressions=" + str(SRC / "valgrind.supp")]
    script = SRC / "keep_ctypes.py"
    proc, tr = run_traced([PY, str(script), str(progs / "libtracekeep.so"), "20000"], tmp_path, prefix=prefix,
                          env_extra=dict(SMALL_MEAN, PYTHONMALLOC="malloc"), timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-4000:]
    assert proc.stderr == b"", proc.stderr.decode()[-4000:]
    img = next(i for i in tr.images if i.py)
    line = kv(proc.stdout, "KEEP_LINE")
    assert any(fr[0] == (line, "grow_step", str(script)) for fr in img.py.values()), img.describe(20)

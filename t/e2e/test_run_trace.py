"""
`leakproof run --trace` end to end: the tracer preloaded into real jobs
(PyTorch, h5py, numpy), the sites gathered by the supervisor, stored,
named with libdw, judged across steps, and reported by `report --trace`
and `report --format json` (`trace.sites`, `trace.libraries`).
"""

import pytest

KIB = 1024


def growing(rep):
    return [s for s in rep["trace"]["sites"] if s["growing"]]


def lib_growth(rep, prefix):
    return sum(l["growth_bytes_per_step"] or 0 for l in rep["trace"]["libraries"]
               if l["library"].startswith(prefix))


@pytest.mark.slow
def test_torch_keep_loss_grows_in_libtorch(lp):
    r = lp.run([lp.py, lp.workload("torch_keep_loss.py"), "--steps", "150"], "--trace", timeout=240)
    assert r.rc == 0, r
    expected = lp.expected_growth(r.stderr)
    rep = lp.report()
    sites = growing(rep)
    assert sites, rep["trace"]["sites"][:3]
    top = sites[0]
    # the graph kept alive is allocated by ATen's empty tensors
    assert top["library"].startswith("libtorch_cpu"), top
    assert "empty" in top["function"], top
    # ... for the held-out batch that the kept graph holds, made while the
    # GIL was released: its Python stack is read in place
    workload = lp.workload("torch_keep_loss.py")
    line = next(n for n, text in enumerate(open(workload), 1) if "held-out batch: kept" in text)
    frames = [(f["file"], f["line"], f["function"]) for f in top["python_stack"] or []]
    assert (str(workload), line, "main") in frames, frames
    assert rep["trace"]["libraries"][0]["library"].startswith("libtorch_cpu")
    assert lib_growth(rep, "libtorch_cpu") == pytest.approx(expected, rel=0.30), rep["trace"]["libraries"][:3]
    # the summary on stderr names it too
    assert "libtorch_cpu" in r.err and "Allocation sites" in r.err
    assert "torch_keep_loss.py:" in r.err


@pytest.mark.slow
def test_torch_item_has_no_growing_torch_site(lp):
    r = lp.run([lp.py, lp.workload("torch_keep_loss.py"), "--item", "--steps", "150"], "--trace", timeout=240)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["trace"]["sites"], "no sites recorded"
    assert lib_growth(rep, "libtorch_cpu") < 100 * KIB, rep["trace"]["libraries"][:3]


@pytest.mark.slow
def test_h5py_staging_grows_in_libhdf5(lp):
    r = lp.run([lp.py, lp.workload("h5py_staging.py"), "--steps", "150"], "--trace", timeout=240)
    assert r.rc == 0, r
    rep = lp.report()
    libs = [l for l in rep["trace"]["libraries"] if l["growing"]]
    assert libs and libs[0]["library"].startswith("libhdf5"), rep["trace"]["libraries"][:3]
    text = lp.cmd(["report", "--store", lp.store, "--trace"])
    assert text.rc == 0 and "libhdf5" in text.out.splitlines()[1], text.out
    # the html report lists the growing sites too
    page = lp.cmd(["report", "--store", lp.store, "--format", "html"])
    assert page.rc == 0 and "libhdf5" in page.out, page


@pytest.mark.slow
def test_h5py_closed_files_do_not_grow_in_libhdf5(lp):
    r = lp.run([lp.py, lp.workload("h5py_staging.py"), "--close", "--steps", "150"], "--trace", timeout=240)
    assert r.rc == 0, r
    rep = lp.report()
    assert not [l for l in rep["trace"]["libraries"] if l["growing"] and l["library"].startswith("libhdf5")], \
        rep["trace"]["libraries"][:3]


KEEPER = """\
import time
import numpy as np
import leakproof

kept = []

def train_step():
    kept.append(np.ones(1 << 18))     # line 8: 2 MiB kept every step
    scratch = np.ones(1 << 19)        # line 9: 4 MiB, freed at once
    return scratch.sum()

for _ in range(250):            # 5 s: some 25 records of the sites
    train_step()
    leakproof.step()
    time.sleep(0.02)
"""


def test_python_line_of_a_growing_numpy_site(lp):
    (lp.dir / "keeper.py").write_text(KEEPER)
    r = lp.run([lp.py, "keeper.py"], "--trace")
    assert r.rc == 0, r
    rep = lp.report()
    sites = growing(rep)
    assert len(sites) == 1, [(s["function"], s["python_stack"], s["growth_bytes_per_step"]) for s in sites]
    top = sites[0]
    assert top["growth_bytes_per_step"] == pytest.approx(2 * lp.MIB, rel=0.2), top
    frames = [(f["file"].rsplit("/", 1)[-1], f["line"], f["function"]) for f in top["python_stack"]]
    assert ("keeper.py", 8, "train_step") in frames, frames
    # the scratch array is allocated as often, and bigger, but is freed
    # within the step: not growing, and, as it never holds memory when the
    # sites are written, not even stored
    scratch = [s for s in rep["trace"]["sites"]
               if s["python_stack"] and any(f["line"] == 9 and f["function"] == "train_step"
                                            for f in s["python_stack"])]
    assert not any(s["growing"] for s in scratch), scratch
    text = lp.cmd(["report", "--store", lp.store, "--trace"])
    assert "keeper.py:8 in train_step" in text.out, text.out


TEMPORARIES = """\
import numpy as np
import leakproof

# 200 functions, each on its own line: 200 sites, each a 1 MiB temporary
exec(compile("".join("def f%d(): return np.ones(131072).sum()\\n" % i for i in range(200)), "generated.py", "exec"))
kept = []
for step in range(40):
    for i in range(200):
        globals()["f%d" % i]()
    kept.append(np.ones(131072))                 # KEPT
    leakproof.step()
"""


def test_temporaries_do_not_fill_the_store(lp):
    """A site is stored once it holds memory when the sites are written:
    the temporaries of a step, however many, mostly never are."""
    (lp.dir / "temps.py").write_text(TEMPORARIES)
    r = lp.run([lp.py, "temps.py"], "--trace")
    assert r.rc == 0, r
    sites = lp.report()["trace"]["sites"]
    def called_from(s, file, line=None):
        return any(f["file"].endswith(file) and line in (None, f["line"]) for f in s["python_stack"] or [])
    temps = [s for s in sites if called_from(s, "generated.py")]
    kept = [s for s in sites if called_from(s, "temps.py", 10)]
    assert kept and kept[0]["live_bytes"] > 20 * lp.MIB, kept
    # each of the 200 was sampled (1 MiB against a 512 KiB mean, 40 times)
    assert len(temps) < 50, "%d of the 200 temporary sites stored" % len(temps)


FAST = """\
import time
import numpy as np
import leakproof

kept = []
for step in range(60):
    kept.append(np.ones(131072))                 # 1 MiB kept a step
    time.sleep(0.01)
    leakproof.step()
"""


def test_a_fast_short_run_is_judged_by_its_steps(lp):
    """60 steps in under a second: the tracers flush at each step (not only
    every 200 ms), so the kept array's site has a record for most steps and
    is judged growing by 1 MiB a step."""
    (lp.dir / "fast.py").write_text(FAST)
    r = lp.run([lp.py, "fast.py"], "--trace")
    assert r.rc == 0, r
    sites = growing(lp.report())
    assert len(sites) == 1, [(s["function"], s["python_stack"], s["growth_bytes_per_step"]) for s in sites]
    assert sites[0]["growth_bytes_per_step"] == pytest.approx(lp.MIB, rel=0.25), sites[0]
    assert any(f["file"].endswith("fast.py") and f["line"] == 7 for f in sites[0]["python_stack"]), sites[0]


def test_untraced_run_has_no_trace(lp):
    r = lp.run([lp.py, "-c", "print('hi')"])
    assert r.rc == 0, r
    assert lp.report()["trace"] is None
    t = lp.cmd(["report", "--store", lp.store, "--trace"])
    assert t.rc == 1 and "was not traced" in t.err, t
    u = lp.cmd(["report", "--store", lp.store, "--trace", "--format", "csv"])
    assert u.rc == 124 and "--trace" in u.err, u


def test_trace_mean_is_checked_and_recorded(lp):
    bad = lp.cmd(["run", "--store", lp.store, "--trace-mean", "1", "--", "true"])
    assert bad.rc == 124 and "--trace-mean" in bad.err, bad
    r = lp.run([lp.py, "-c", "import numpy; x = [numpy.ones(1 << 16) for _ in range(50)]"],
               "--trace-mean", "64K")
    assert r.rc == 0, r
    trace = lp.report()["trace"]
    assert trace["mean_bytes"] == 64 * 1024
    assert trace["sites"], "a job that allocated 25 MiB has sampled sites"


def test_tracer_pipe_is_pinned_by_inode(lp):
    """The job is told which pipe is the tracer's, so a descriptor number
    the job closed and reused is never written to."""
    job = ("import os\n"
           "fd = int(os.environ['LEAKPROOF_TRACE_FD'])\n"
           "st = os.fstat(fd)\n"
           "assert os.environ['LEAKPROOF_TRACE_FD_INODE'] == '%d:%d' % (st.st_dev, st.st_ino)\n"
           "assert os.environ['LD_PRELOAD'].split(':')[0].endswith('libleakproof-trace.so')\n")
    r = lp.run([lp.py, "-c", job], "--trace")
    assert r.rc == 0, r

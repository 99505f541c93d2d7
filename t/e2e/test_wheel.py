"""The pip wheel: built from this tree with the standard tools, offline
(`pip wheel --no-build-isolation --no-deps`), installed with
`pip install --no-index` into fresh virtual environments, and used from
outside the tree with no PYTHONPATH — as a user other than root when the
tests run as root (`runuser -u nobody`), so nothing depends on root's files.

A plain venv: `leakproof` is on its PATH, a job that imports the client and
leakproof.integrations marks its steps, `report --format json` sees them,
and `run --trace` finds the installed tracer. A venv with the system's
packages: the pytest plugin is registered by the wheel's pytest11 entry
point, and a leaking NumPy function fails while a bounded cache passes.

The wheel is built once per session (make runs into build-wheel/c of this
tree, incrementally); the environments live in a directory every user can
read.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
STEPS = 40


def sh(argv, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    return subprocess.run(argv, **kw)


def as_user():
    """The argv prefix that runs a command as a non-root user: [] when the
    tests are not root, runuser -u nobody when they are; skips when root has
    no way to become another user."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if not runuser:
        pytest.skip("running as root and runuser is missing: no non-root user to install as")
    probe = sh([runuser, "-u", "nobody", "--", "true"])
    if probe.returncode != 0:
        pytest.skip("running as root and cannot become nobody: %s" % probe.stderr.strip())
    return [runuser, "-u", "nobody", "--"]


@pytest.fixture(scope="module")
def area():
    """A scratch directory every user can read and write (mode 1777)."""
    d = tempfile.mkdtemp(prefix="leakproof-wheel-")
    os.chmod(d, 0o1777)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(area):
    dist = area / "dist"
    r = sh([PY, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index", "--no-cache-dir",
            "-w", str(dist), str(REPO)], cwd=str(area))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = list(dist.glob("leakproof-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def make_venv(area, wheel, name, *venv_opts):
    """A venv at area/name with the wheel installed, readable by all."""
    venv = area / name
    r = sh([PY, "-m", "venv", *venv_opts, str(venv)])
    assert r.returncode == 0, r.stderr
    r = sh([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--no-cache-dir", str(wheel)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sh(["chmod", "-R", "a+rX", str(venv)])
    return venv


def user_env(venv):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LEAKPROOF_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = "%s:/usr/local/bin:/usr/bin:/bin" % (venv / "bin")
    env["HOME"] = "/tmp"
    return env


def test_wheel_is_honest_about_its_platform(wheel):
    assert wheel.name.endswith("-py3-none-linux_%s.whl" % os.uname().machine), wheel.name
    names = sh([PY, "-m", "zipfile", "-l", str(wheel)]).stdout
    for member in ("data/bin/leakproof", "data/lib/leakproof/libleakproof-trace.so",
                   "data/lib/leakproof/python/leakproof/__init__.py", "leakproof/integrations.py",
                   "leakproof/pytest_plugin.py", "data/share/man/man1/leakproof.1"):
        assert member in names, (member, names)


def test_installed_wheel_runs_a_job_as_a_plain_user(area, wheel):
    venv = make_venv(area, wheel, "plain")
    user = as_user()
    work = area / "work-plain"
    work.mkdir()
    os.chmod(work, 0o777)
    job = work / "job.py"
    job.write_text(textwrap.dedent("""\
        import os
        import sys
        import leakproof
        import leakproof.integrations
        assert leakproof.__file__.startswith(sys.argv[1]), leakproof.__file__
        for i in range(%d):
            leakproof.step()
        print("JOB-DONE uid=%%d" %% os.geteuid(), leakproof.__file__)
        """ % STEPS))
    env = user_env(venv)

    which = sh(user + ["sh", "-c", "command -v leakproof"], env=env, cwd=str(work))
    assert which.stdout.strip() == str(venv / "bin" / "leakproof"), which

    # The venv's python imports the installed client (not the tree's).
    site = sh([str(venv / "bin" / "python"), "-c", "import leakproof, os; print(os.path.dirname(leakproof.__file__))"],
              env=env, cwd=str(work)).stdout.strip()
    assert site.startswith(str(venv)), site

    r = sh(user + ["leakproof", "run", "--store", "lp.db", "--", "python3", str(job), str(venv)],
           env=env, cwd=str(work))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "JOB-DONE" in r.stdout + r.stderr
    if user:
        assert "JOB-DONE uid=0 " not in r.stdout + r.stderr, "the job ran as root"
    rep = sh(user + ["leakproof", "report", "--store", "lp.db", "--format", "json"], env=env, cwd=str(work))
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["steps"] == STEPS

    # A job run by the system's python3 gets the client from the
    # supervisor's PYTHONPATH (<venv>/lib/leakproof/python).
    r = sh(user + ["leakproof", "run", "--store", "lp.db", "--", "/usr/bin/python3", str(job),
                   str(venv / "lib" / "leakproof" / "python")], env=env, cwd=str(work))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]

    # --trace finds the installed tracer.
    r = sh(user + ["leakproof", "run", "--trace", "--store", "lp.db", "--", "python3", str(job), str(venv)],
           env=env, cwd=str(work))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "cannot find the tracer" not in r.stderr
    rep = sh(user + ["leakproof", "report", "--store", "lp.db", "--format", "json"], env=env, cwd=str(work))
    report = json.loads(rep.stdout)
    assert report["steps"] == STEPS
    assert report.get("trace"), report.keys()


def test_installed_pytest_plugin_judges_numpy(area, wheel):
    pytest.importorskip("numpy")
    venv = make_venv(area, wheel, "system", "--system-site-packages")
    user = as_user()
    work = area / "work-plugin"
    work.mkdir()
    os.chmod(work, 0o777)
    (work / "test_np.py").write_text(textwrap.dedent("""\
        import numpy as np
        kept = []
        def test_leaking(leakproof_check):
            leakproof_check(lambda: kept.append(np.ones(128 * 1024)), steps=150)
        cache = {}
        def test_cache(leakproof_check):
            n = [0]
            def fill():
                n[0] += 1
                cache[n[0] % 20] = np.ones(128 * 1024)
            leakproof_check(fill, steps=150)
        """))
    r = sh(user + ["python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_np.py"],
           env=user_env(venv), cwd=str(work))
    out = r.stdout + r.stderr
    assert "test_np.py::test_leaking FAILED" in out, out[-4000:]
    assert "test_np.py::test_cache PASSED" in out, out[-4000:]
    assert "verdict   leak" in out and "per-step change" in out, out[-4000:]

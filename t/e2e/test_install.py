"""`make install PREFIX=...`: what lands where, and that the installed copy
works on its own, away from this tree.

The tree under test is installed once into a scratch PREFIX with
`make install PREFIX=<tmp> B=<the build directory under test>` (the build
directory is the one holding the binary the other tests use: $LEAKPROOF_BUILD,
else build/). Then, from a directory outside the tree and with no PYTHONPATH:
the installed binary supervises a Python job that imports the installed
client, a C program built with nothing but `pkg-config --cflags leakproof`
reports its steps, `man -l` renders the installed page without warnings, and
the installed bash completion completes the installed binary.
"""

import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

# One xdist worker for the whole module: its module fixture builds and installs into a prefix,
# once, not once in each worker that draws one of its tests.
pytestmark = pytest.mark.xdist_group("test_install")

REPO = Path(__file__).resolve().parents[2]


def sh(argv, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    return subprocess.run(argv, **kw)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LEAKPROOF_") and k not in ("PYTHONPATH", "PKG_CONFIG_PATH")}
    env.update(extra)
    return env


def makefile_has_rule(target):
    return re.search(r"^\$\(B\)/%s:" % re.escape(target), (REPO / "Makefile").read_text(), re.M)


@pytest.fixture(scope="module")
def prefix(lp_bin, tmp_path_factory):
    build = os.path.relpath(lp_bin.parent, REPO)
    if build.startswith("..") or lp_bin.name != "leakproof":
        pytest.fail(f"the binary under test ({lp_bin}) is not a build directory of this tree; "
                    f"set LEAKPROOF_BUILD", pytrace=False)
    root = tmp_path_factory.mktemp("install") / "prefix"
    r = sh(["make", "-s", "install", f"PREFIX={root}", f"B={build}"], cwd=REPO, env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def test_what_is_installed_where(prefix):
    want = ["bin/leakproof", "include/leakproof.h", "share/man/man1/leakproof.1",
            "share/pkgconfig/leakproof.pc", "share/bash-completion/completions/leakproof"]
    client = sorted(p.relative_to(REPO / "python") for p in (REPO / "python" / "leakproof").rglob("*.py"))
    assert Path("leakproof/__init__.py") in client and Path("leakproof/integrations.py") in client
    want += ["lib/leakproof/python/%s" % p for p in client]
    if makefile_has_rule("libleakproof-trace.so"):
        want.append("lib/leakproof/libleakproof-trace.so")
    for rel in want:
        assert (prefix / rel).is_file(), f"{rel} not installed; found " + \
            str(sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file()))
    assert os.access(prefix / "bin/leakproof", os.X_OK)
    for p in client:    # the client, whole and unchanged
        assert (prefix / "lib/leakproof/python" / p).read_bytes() == (REPO / "python" / p).read_bytes()
    assert (prefix / "include/leakproof.h").read_bytes() == (REPO / "include/leakproof.h").read_bytes()


def test_installed_binary_finds_its_installed_client(prefix, tmp_path):
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent("""
        import leakproof, leakproof.integrations
        print("client", leakproof.__file__, leakproof.enabled())
        for i in range(5):
            leakproof.step()
        leakproof.result(val_loss=0.25)
    """))
    store = tmp_path / "s.db"
    lp = str(prefix / "bin/leakproof")
    r = sh([lp, "run", "--store", str(store), "--", "/usr/bin/python3", str(job)], cwd=tmp_path,
           env=clean_env())
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if l.startswith("client ")]
    assert line == ["client %s True" % (prefix / "lib/leakproof/python/leakproof/__init__.py")], r.stdout
    assert ", 5 steps (channel)" in r.stderr, r.stderr
    r = sh([lp, "report", "--store", str(store), "--format", "json"], cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert '"results": {"val_loss": 0.25}' in r.stdout
    r = sh([lp, "--version"], env=clean_env())
    assert r.returncode == 0 and r.stdout.startswith("leakproof "), r


def test_installed_binary_finds_its_installed_tracer(prefix, tmp_path):
    if not makefile_has_rule("libleakproof-trace.so"):
        pytest.fail("the Makefile builds no tracer library: drop this test", pytrace=False)
    r = sh([str(prefix / "bin/leakproof"), "run", "--trace", "--store", str(tmp_path / "s.db"), "--",
            "/usr/bin/python3", "-c", "x = [bytearray(4096) for _ in range(1000)]"],
           cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert "cannot find the tracer" not in r.stderr, r.stderr


def test_installed_binary_runs_the_sweeps_python_programs(prefix, tmp_path):
    """The prefork template and the Optuna process are Python files of the
    installed client (lib/leakproof/python/leakproof/_prefork.py,
    _optuna_worker.py), run from there."""
    have_optuna = sh(["/usr/bin/python3", "-c", "import optuna"]).returncode == 0 and \
        sh(["sh", "-c", "command -v optuna"]).returncode == 0
    f = tmp_path / "sweep.yaml"
    f.write_text(textwrap.dedent("""
        command: [/usr/bin/python3, -c, "print('loss=%%r' %% ((float('{x}') - 0.3) ** 2))"]
        method: %s
        metric: {name: loss, goal: minimize}
        result_regex: '^loss=(\\S+)'
        parameters:
          x: %s
        run_cap: 2
        seed: 5
        prefork: [json]
    """ % (("optuna", "{min: 0.0, max: 1.0}") if have_optuna else ("grid", "{values: [0.1, 0.2]}"))))
    store = tmp_path / "s.db"
    lp = str(prefix / "bin/leakproof")
    r = sh([lp, "sweep", str(f), "--store", str(store)], cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    # the template started, from the installed copy, and nothing refused
    # (such as a _prefork.py not there)
    assert "leakproof: prefork: json imported once; trials are forked from it" in r.stderr, r.stderr
    assert "trials start cold" not in r.stderr, r.stderr
    r = sh([lp, "report", "--store", str(store), "--format", "json"], cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stderr
    if have_optuna:
        assert '"optuna_study"' in r.stdout, r.stdout


def test_c_client_builds_with_pkg_config(prefix, tmp_path):
    pc = sh(["pkg-config", "--cflags", "leakproof"],
            env=clean_env(PKG_CONFIG_PATH=str(prefix / "share/pkgconfig")))
    assert pc.returncode == 0, pc.stderr
    assert pc.stdout.split() == ["-I%s" % (prefix / "include")]
    mod = sh(["pkg-config", "--modversion", "leakproof"],
             env=clean_env(PKG_CONFIG_PATH=str(prefix / "share/pkgconfig")))
    assert mod.stdout.strip() == re.search(r"^VERSION\s*=\s*(\S+)", (REPO / "Makefile").read_text(),
                                           re.M).group(1)
    src = tmp_path / "job.c"
    src.write_text(textwrap.dedent("""
        #include <leakproof.h>

        int main(void)
        {
        	struct timespec pause = { 0, 20 * 1000 * 1000 };
        	for (long i = 1; i <= 7; i++) {
        		nanosleep(&pause, NULL);      /* a training step */
        		lp_step(i);
        	}
        	lp_result("score", 0.5);
        	return 0;
        }
    """))
    exe = tmp_path / "job"
    r = sh(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *pc.stdout.split(), "-o", str(exe),
            str(src)], cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stderr
    store = tmp_path / "s.db"
    r = sh([str(prefix / "bin/leakproof"), "run", "--store", str(store), "--", str(exe)],
           cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert ", 7 steps (channel)" in r.stderr, r.stderr
    assert "score=0.5" in r.stderr, r.stderr


def test_man_page_renders(prefix):
    r = sh(["man", "--warnings", "-P", "cat", "-l", str(prefix / "share/man/man1/leakproof.1")],
           env=clean_env(MANWIDTH="80", LC_ALL="C.UTF-8"))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    text = r.stdout
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "FILES", "EXAMPLES"):
        assert re.search(r"^%s$" % heading, text, re.M), heading
    assert "leakproof run" in text


def test_installed_completion(prefix, tmp_path):
    script = textwrap.dedent("""
        source "$1" || exit 99
        COMP_WORDS=("$2" "")
        COMP_CWORD=1
        $(complete -p leakproof | sed 's/.*-F \\([^ ]*\\) .*/\\1/')
        printf '%s\\n' "${COMPREPLY[@]}"
    """)
    r = sh(["bash", "--norc", "--noprofile", "-c", script, "bash",
            str(prefix / "share/bash-completion/completions/leakproof"), str(prefix / "bin/leakproof")],
           cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["attach", "help", "judge", "ls", "report", "run", "sweep", "top"]


def test_destdir_stages_without_changing_the_paths(lp_bin, tmp_path):
    build = os.path.relpath(lp_bin.parent, REPO)
    stage = tmp_path / "stage"
    r = sh(["make", "-s", "install", f"DESTDIR={stage}", "PREFIX=/opt/lp", f"B={build}"], cwd=REPO,
           env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert (stage / "opt/lp/bin/leakproof").is_file()
    pc = (stage / "opt/lp/share/pkgconfig/leakproof.pc").read_text()
    assert "\nincludedir=/opt/lp/include\n" in pc and "\nCflags: -I${includedir}\n" in pc

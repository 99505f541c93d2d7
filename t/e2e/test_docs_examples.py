"""The documentation's examples and help texts, run as tests.

README.md: every line of every ```sh block, and the ```yaml block that
starts with `# sweep.yaml` (written as sweep.yaml for the sweep examples).
man/leakproof.1: every line of the EXAMPLES section (.nf/.fi) and of any
.EX/.EE block (the page's convention: .EX/.EE holds shell examples; code
in other languages, such as the sweep file or Python, is set with .nf/.fi). Each example runs in one scratch directory per document, in
order, through bash, with:

- `leakproof` found first on PATH: the binary under test;
- LEAKPROOF_STORE set to a scratch store, so the examples share it as a
  user's default store would be shared;
- train.py and train_keras.py: a small job written below (stdlib and the
  client only) that takes the examples' arguments (--epochs, the sweep's
  --lr and --batch_size), prints `Epoch N/M` lines, marks steps, stops on
  leakproof's request and resumes from a checkpoint;
- a run id (`RUN`, or a number after `report`) replaced by the latest run,
  and `sweep:N` by the latest sweep: the ids of the documents' examples are
  those of the reader's store.

Every example must exit 0. The ones that cannot run here are listed in
NOT_RUNNABLE with the reason; every other line is run, so a new example is
tested the day it is written, and an example that stops working fails.
A NOT_RUNNABLE entry that no document has any more fails too.

The help tests: every subcommand in `leakproof --help` (and in src/cmd/)
answers `--help`, `-h` and `leakproof help CMD` with its usage and options
on stdout and status 0; an unknown option gives the usage status the help
documents (124) with a pointer to --help on stderr.
"""

import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

NOT_RUNNABLE = {
    "scripts/demo": "installs Debian packages and runs the PyTorch demo for minutes; "
                    "t/e2e/test_run_demo.py tests the demo",
    "scripts/test": "the whole test suite, this test included",
    "make fuzz && scripts/fuzz": "the bounded fuzzing campaign, which scripts/test runs after the build",
    "scripts/install-deps": "installs Debian packages with apt-get as root",
    "make": "builds into build/ of the source tree; the tests run on a build already made",
    "make install PREFIX=/usr/local": "writes to /usr/local; t/e2e/test_install.py runs "
                                      "`make install` into a scratch PREFIX",
    "make check": "the whole test suite, this test included",
    "make asan": "a second full build with sanitizers, for CI's sanitizer pass",
    "scripts/cluster start": "starts PostgreSQL and SLURM as root; t/e2e/test_cluster_services.py "
                             "tests the script",
    'eval "$(scripts/cluster env)"': "needs the services of `scripts/cluster start`",
    "sbatch --mem=1G --wrap 'leakproof run -- /usr/bin/python3 train.py'":
        "needs the SLURM of `scripts/cluster start`",
    "export LEAKPROOF_STORE=$LEAKPROOF_CLUSTER_STORE": "needs the services of `scripts/cluster start`",
    "leakproof sweep sweep.yaml --executor slurm":
        "needs the SLURM of `scripts/cluster start`; t/e2e/test_sweep_slurm.py runs sweeps on it",
    "leakproof sweep sweep.yaml --executor slurm --resume": "follows the SLURM sweep above",
    "sbatch -n 3 --mem=3G --wrap 'srun -n 3 leakproof run -- /usr/bin/python3 train.py'":
        "needs the SLURM of `scripts/cluster start`; t/e2e/test_cluster_placement.py runs srun -n 3",
    "scripts/cluster stop": "stops what `scripts/cluster start` started",
    "make wheel": "builds the wheel in the tree; t/e2e/test_wheel.py builds and installs it",
    "python3 -m venv venv && venv/bin/pip install --no-index build-wheel/dist/leakproof-*.whl":
        "needs the wheel of `make wheel`; t/e2e/test_wheel.py installs it into fresh venvs",
    "venv/bin/leakproof run --trace -- venv/bin/python train.py": "needs the venv above",
}

TRAIN_PY = r'''
import argparse, os, sys, time
import leakproof

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--batch_size", type=int, default=32)
args = p.parse_args()
checkpoint = "checkpoint-%d.txt" % os.getpid() if not leakproof.run_id() else \
    "checkpoint-run%s.txt" % leakproof.run_id()
start = 0
if leakproof.restart() and os.path.exists(checkpoint):
    start = int(open(checkpoint).read())
for epoch in range(start, args.epochs):
    print("Epoch %d/%d" % (epoch + 1, args.epochs), flush=True)
    for step in range(8):
        time.sleep(0.01)
        leakproof.step()
        if leakproof.stop_requested():
            with open(checkpoint, "w") as f:
                f.write(str(epoch))         # this epoch again, from its start
            sys.exit(0)
    with open(checkpoint, "w") as f:
        f.write(str(epoch + 1))
val_loss = args.lr * 10 + args.batch_size / 4096
leakproof.result(val_loss=val_loss)
print("val_loss=%g" % val_loss)
'''


def unroff(line):
    line = line.replace("\\-", "-").replace("\\e", "\\").replace("\\(aq", "'").replace("\\&", "")
    return re.sub(r"\\f[BIRP]", "", line)


def strip_comment(line):
    """The command without a trailing `# comment` (outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def readme_examples():
    text = (REPO / "README.md").read_text()
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        commands += [strip_comment(l) for l in block.splitlines() if strip_comment(l)]
    yaml = re.findall(r"^```yaml\n(# sweep\.yaml\n.*?)^```", text, re.M | re.S)
    return commands, yaml


def man_examples():
    text = (REPO / "man" / "leakproof.1").read_text()
    blocks = re.findall(r"^\.EX\n(.*?)^\.EE", text, re.M | re.S)
    m = re.search(r"^\.SH EXAMPLES\n(.*?)(?=^\.SH )", text, re.M | re.S)
    assert m, "man/leakproof.1 has no EXAMPLES section"
    blocks += re.findall(r"^\.nf\n(.*?)^\.fi", m.group(1), re.M | re.S)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            line = strip_comment(unroff(line))
            if line and not line.startswith("."):
                commands.append(line)
    return commands


def test_the_documents_have_examples():
    commands, yaml = readme_examples()
    assert len(commands) >= 10 and len(yaml) == 1, (commands, yaml)
    assert len(man_examples()) >= 8
    # every excuse is still needed
    documented = set(commands) | set(man_examples())
    stale = [c for c in NOT_RUNNABLE if c not in documented]
    assert not stale, f"NOT_RUNNABLE lists examples no document has: {stale}"


def latest(store, what):
    with sqlite3.connect(store) as db:
        table = "runs" if what == "run" else "sweeps"
        row = db.execute("SELECT max(id) FROM %s" % table).fetchone()
    assert row and row[0] is not None, f"no {what} in the store for an example that needs one"
    return str(row[0])


def run_examples(lp, commands, yaml=None):
    bindir = lp.dir / "bin"
    bindir.mkdir()
    (bindir / "leakproof").symlink_to(lp.binary)
    for name in ("train.py", "train_keras.py"):
        (lp.dir / name).write_text(TRAIN_PY)
    if yaml:
        (lp.dir / "sweep.yaml").write_text(yaml)
    store = str(lp.dir / "store.db")
    env = lp.env({"PATH": "%s:/usr/bin:/bin" % bindir, "LEAKPROOF_STORE": store})
    ran = 0
    for command in commands:
        if command in NOT_RUNNABLE:
            continue
        assert command.startswith("leakproof "), \
            f"example {command!r} is neither a leakproof command nor in NOT_RUNNABLE"
        line = command
        if re.search(r"\breport (RUN|[0-9]+)\b", line):
            line = re.sub(r"\breport (RUN|[0-9]+)\b", "report " + latest(store, "run"), line)
        if re.search(r"\bsweep:[0-9]+\b", line):
            line = re.sub(r"\bsweep:[0-9]+\b", "sweep:" + latest(store, "sweep"), line)
        r = subprocess.run(["bash", "-c", line], cwd=lp.dir, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, (f"example `{command}` (run as `{line}`) exited {r.returncode}\n"
                                   f"stdout:\n{r.stdout[-2000:]}\nstderr:\n{r.stderr[-3000:]}")
        ran += 1
    return ran


def test_readme_examples(lp):
    commands, yaml = readme_examples()
    ran = run_examples(lp, commands, yaml[0])
    assert ran == len([c for c in commands if c not in NOT_RUNNABLE])
    # the sweep example ran the file's grid: 2 x 2 x 2 trials
    sweeps = lp.cmd(["report", "sweep:1", "--format", "json", "--store", str(lp.dir / "store.db")])
    assert sweeps.rc == 0, sweeps
    assert sweeps.out.count('"trial":') == 8, sweeps.out[:2000]


def test_man_page_examples(lp):
    commands = man_examples()
    assert run_examples(lp, commands, readme_examples()[1][0]) == len(
        [c for c in commands if c not in NOT_RUNNABLE])


# ---- help ----

def commands_of(lp):
    r = lp.cmd(["--help"])
    assert r.rc == 0, r
    section = r.out.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in section.splitlines() if line.strip()]


def test_every_command_is_in_the_help(lp):
    listed = commands_of(lp)
    sources = {p.stem for p in (REPO / "src" / "cmd").glob("*.c")} - {"common"}
    assert sources <= set(listed), (sources, listed)
    assert "help" in listed


@pytest.mark.parametrize("cmd", ["run", "report", "ls", "sweep", "top"])
def test_help(lp, cmd):
    assert cmd in commands_of(lp)
    r = lp.cmd([cmd, "--help"])
    assert r.rc == 0 and r.err == "", r
    text = r.out
    assert text.startswith("usage: leakproof %s" % cmd), text[:200]
    assert "\noptions:\n" in text
    options = re.findall(r"^ {2,6}(?:-[A-Za-z], )?(--[a-z][a-z-]*)", text, re.M)
    assert "--help" in options and len(options) >= 3, options
    assert "--store" in options
    assert re.search(r"exit status", text)
    for same in ([cmd, "-h"], ["help", cmd]):
        r2 = lp.cmd(same)
        assert (r2.rc, r2.out) == (0, text), same


@pytest.mark.parametrize("cmd", ["run", "report", "ls", "sweep", "top"])
def test_unknown_option_gives_the_usage_status(lp, cmd):
    text = " ".join(lp.cmd([cmd, "--help"]).out.split())
    m = re.search(r"\b(\d+) for (?:a usage error|a bad file or option)", text)
    assert m, f"the help of {cmd} does not document its usage status"
    r = lp.cmd([cmd, "--no-such-option"])
    assert r.rc == int(m.group(1)) == 124, r
    assert r.out == ""
    assert "--no-such-option" in r.err and "leakproof %s --help" % cmd in r.err, r.err


def test_unknown_command(lp):
    r = lp.cmd(["no-such-command"])
    assert r.rc == 124 and "no-such-command" in r.err, r
    r = lp.cmd(["help", "no-such-command"])
    assert r.rc == 124, r


def test_help_shows_percent_signs_once(lp):
    for cmd in ("run", "report", "ls", "sweep"):
        assert "%%" not in lp.cmd([cmd, "--help"]).out, cmd

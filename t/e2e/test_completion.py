"""completion/leakproof.bash: source it in a real bash, set COMP_WORDS and
COMP_CWORD as bash does at a TAB, call the completion function and compare
COMPREPLY with what the user should be offered.

The expected options are read here, independently, from the binary's own
`--help` texts and from its table of options (`leakproof help
--complete-options CMD`, what the completion reads), so a new option that
the completion or the help misses fails a test.
"""

import os
import re
import subprocess

import pytest

COMPLETION = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "completion", "leakproof.bash")
COMMANDS = ["run", "attach", "report", "ls", "sweep", "top", "judge"]

SCRIPT = r'''
source "$1" || exit 99
shift
COMP_CWORD=$1
shift
COMP_WORDS=("$@")
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
_leakproof
printf '%s\n' "${COMPREPLY[@]}"
'''


def complete(lp, *words, env=None):
    """COMPREPLY for the command line `words`, the cursor in the last word
    (the first word is the binary)."""
    words = [lp.binary] + list(words)
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(lp.dir)}
    run_env.update(env or {})
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", SCRIPT, "bash", COMPLETION,
                        str(len(words) - 1)] + words, cwd=lp.dir, env=run_env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    return [line for line in r.stdout.split("\n") if line]


def help_text(lp, cmd):
    r = lp.cmd([cmd, "--help"])
    assert r.rc == 0, r
    return r.out


def help_options(text):
    """Every --long and -s option that the help lists on a line of its own."""
    opts = set()
    for m in re.finditer(r"^ {2,6}(?:(-[A-Za-z]), )?(--[a-z][a-z0-9-]*)", text, re.M):
        opts.add(m.group(2))
        if m.group(1):
            opts.add(m.group(1))
    return opts


def option_text(text, option):
    """The help paragraph of one option: its line and the deeper-indented
    lines after it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r" {2,6}(-[A-Za-z], )?%s\b" % re.escape(option), line):
            out = [line]
            for more in lines[i + 1:]:
                if not more.startswith(" " * 10):
                    break
                out.append(more)
            return "\n".join(out)
    pytest.fail("%s is not in the help:\n%s" % (option, text))


def test_subcommands(lp):
    assert sorted(complete(lp, "")) == sorted(COMMANDS + ["help"])
    assert sorted(complete(lp, "r")) == ["report", "run"]
    assert complete(lp, "--h") == ["--help"]
    assert sorted(complete(lp, "help", "")) == sorted(COMMANDS)
    assert complete(lp, "help", "run", "") == []


def table_options(lp, cmd):
    """The options of CMD's table, as the program lists them for the
    completion: {"--interval": "DUR", "-i": "DUR", "--quiet": None, ...}
    (the value's placeholder; None for a flag or a value only after '=')."""
    r = lp.cmd(["help", "--complete-options", cmd])
    assert r.rc == 0 and r.err == "", r
    opts = {}
    for line in r.out.splitlines():
        m = re.fullmatch(r"(--?[a-z][a-z0-9-]*)(?:\[=[A-Za-z|-]+\]| ([A-Za-z|-]+))?", line)
        assert m, line
        opts[m.group(1)] = m.group(2)
    return opts


@pytest.mark.parametrize("cmd", COMMANDS)
def test_options_are_those_of_the_help(lp, cmd):
    text = help_text(lp, cmd)
    want = help_options(text)
    assert len(want) >= 4, text
    table = set(table_options(lp, cmd))
    # every option the help lists is in the table, and every option of the
    # table is in the help: on a line of its own, or told in another's text
    # ("--status-line ...; --no-status-line never draws it")
    assert want <= table, want - table
    for o in table - want:
        assert re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(o), text), (o, text)
    got = set(complete(lp, cmd, "-"))
    if cmd == "run":
        assert "--no-status-line" in table        # told in --status-line's text
        table |= {"--"}                           # the job's command
    assert got == table
    assert set(complete(lp, cmd, "--")) == {o for o in table if o.startswith("--")}


@pytest.mark.parametrize("cmd", COMMANDS)
def test_the_word_after_an_option_with_a_value_is_its_value(lp, cmd):
    """An option the table says takes a value is followed by its value,
    never by more options; a flag is followed by options."""
    table = table_options(lp, cmd)
    for opt, placeholder in table.items():
        got = complete(lp, cmd, opt, "-")
        if placeholder:
            assert not any(w.startswith("-") for w in got), (opt, got)
        elif opt not in ("--help", "-h"):
            assert "--help" in got, (opt, got)


def test_options_after_other_options_and_values(lp):
    got = complete(lp, "run", "--max-mem", "12G", "--re")
    assert sorted(got) == ["--restart", "--result-name", "--result-regex"]
    # a value is never taken for the subcommand or an option
    assert complete(lp, "report", "--store", "x.db", "--for") == ["--format"]


ALL_FORMATS = ["csv", "html", "json", "junit", "md", "svg", "text"]


@pytest.mark.parametrize("cmd,least", [("report", ["csv", "json", "md", "text"]),
                                       ("ls", ["json", "text"]), ("top", ["json", "text"])])
def test_format_values(lp, cmd, least):
    text = option_text(help_text(lp, cmd), "--format")
    named = [f for f in ALL_FORMATS if re.search(r"(?<![a-z-])%s(?![a-z-])" % f, text)]
    values = sorted(complete(lp, cmd, "--format", ""))
    assert values == named, text          # the formats this binary's help names
    assert set(least) <= set(values)
    assert sorted(complete(lp, cmd, "-f", "")) == values
    assert sorted(complete(lp, cmd, "--format=j")) == [f for f in values if f.startswith("j")]


@pytest.mark.parametrize("cmd", ["run", "report"])
def test_measure_values(lp, cmd):
    values = complete(lp, cmd, "--measure", "")
    assert sorted(values) == ["cgroup", "gpu", "pss", "rss", "uss"]
    text = option_text(help_text(lp, cmd), "--measure")
    for v in values:
        assert re.search(r"\b%s\b" % v, text), (v, text)
    assert complete(lp, cmd, "-m", "u") == ["uss"]


def test_restart_and_stop_signal_values(lp):
    text = help_text(lp, "run")
    restart = complete(lp, "run", "--restart", "")
    assert sorted(restart) == ["at-limit", "every=", "never", "on-oom"]
    for v in restart:
        assert v in option_text(text, "--restart"), v
    assert complete(lp, "run", "--restart", "on") == ["on-oom"]
    signals = complete(lp, "run", "--stop-signal", "")
    assert "TERM" in signals and "USR1" in signals
    assert "TERM" in option_text(text, "--stop-signal")


def test_expect_and_executor_values(lp):
    assert complete(lp, "run", "--expect", "") == ["no-leak"]
    assert "no-leak" in option_text(help_text(lp, "run"), "--expect")
    assert sorted(complete(lp, "sweep", "--executor", "")) == ["local", "slurm"]
    assert "local|slurm" in option_text(help_text(lp, "sweep"), "--executor")


def test_free_values_are_not_completed(lp):
    for words in (("run", "--step-regex", ""), ("run", "--max-mem", ""), ("report", "--by", ""),
                  ("sweep", "-j", ""), ("top", "--delay", "")):
        assert complete(lp, *words) == [], words


def test_run_ids_from_ls(lp):
    for _ in range(3):
        assert lp.run(["true"]).rc == 0
    assert lp.run(["/bin/sh", "-c", "exit 3"]).rc == 3
    assert complete(lp, "report", "--store", lp.store, "") == ["4", "3", "2", "1"]
    assert complete(lp, "report", "--store=" + lp.store, "3") == ["3"]
    assert complete(lp, "report", "", env={"LEAKPROOF_STORE": lp.store}) == ["4", "3", "2", "1"]
    # no store, no runs, no error
    assert complete(lp, "report", "--store", str(lp.dir / "none.db"), "") == []


def test_files_after_store_and_output(lp):
    for name in ("runs.db", "runs-old.db", "report.md"):
        (lp.dir / name).write_text("")
    (lp.dir / "rundir").mkdir()
    assert sorted(complete(lp, "report", "--store", "run")) == sorted(["runs-old.db", "runs.db", "rundir"])
    assert sorted(complete(lp, "ls", "-s", "runs")) == ["runs-old.db", "runs.db"]
    assert complete(lp, "report", "-o", "rep") == ["report.md"]
    assert complete(lp, "report", "--output", "rep") == ["report.md"]


def test_sweep_file(lp):
    for name in ("sweep.yaml", "small.yml", "notes.txt"):
        (lp.dir / name).write_text("")
    (lp.dir / "specs").mkdir()
    assert sorted(complete(lp, "sweep", "")) == ["small.yml", "specs", "sweep.yaml"]


def test_the_jobs_command_after_the_double_dash(lp):
    assert "python3" in complete(lp, "run", "--max-mem", "1G", "--", "pytho")
    (lp.dir / "train.py").write_text("")
    assert complete(lp, "run", "--", "python3", "tra") == ["train.py"]
    # options after -- belong to the job: nothing of leakproof's
    assert "--max-mem" not in complete(lp, "run", "--", "python3", "--")


def test_attach_offers_the_callers_pids(lp):
    me = str(os.getpid())
    assert me in complete(lp, "attach", me[:-1])
    assert "--log" in complete(lp, "attach", "--l")

"""One table of options per command (src/util/options.h): what a sweep
file's run_options may hold is what `leakproof run`'s table says, and the
top-level help names what the commands take.

The options are read from the binary's own table (`leakproof help
--complete-options CMD`), not listed here, so an option added to `run` is
checked the day it is added.
"""

import re

import pytest


def table_options(lp, cmd):
    """{"--interval": True, "-i": True, "--quiet": False, ...}: whether each
    option of CMD's table takes a value in the next word."""
    r = lp.cmd(["help", "--complete-options", cmd])
    assert r.rc == 0 and r.err == "", r
    opts = {}
    for line in r.out.splitlines():
        name, _, placeholder = line.partition(" ")
        opts[name.split("[", 1)[0]] = bool(placeholder)
    return opts


def check_run_options(lp, items):
    """`leakproof sweep --dry-run` of a file whose run_options are items:
    (exit status, the message after 'run_options: ', or "")."""
    quoted = ", ".join("'%s'" % i.replace("'", "''") for i in items)
    f = lp.dir / "opts.yaml"
    f.write_text("command: [true]\nrun_options: [%s]\n" % quoted)
    r = lp.cmd(["sweep", str(f), "--store", lp.store, "--dry-run"])
    m = re.search(r"run_options: (.*)", r.err)
    return r.rc, m.group(1) if m else ""


NOT_AN_OPTION = "is not a `leakproof run` option"


def test_run_options_are_those_of_runs_table(lp):
    table = table_options(lp, "run")
    assert len(table) >= 20 and "--max-mem" in table and "-i" in table, table
    refused = 0
    for opt, takes_value in sorted(table.items()):
        # alone: a value is missing, or it is taken (or the sweep keeps it)
        rc, why = check_run_options(lp, [opt])
        assert NOT_AN_OPTION not in why, (opt, why)
        if takes_value:
            assert rc == 124 and ("option '%s' needs a value" % opt in why or "not allowed here" in why), \
                (opt, rc, why)
        else:
            assert rc == 0 or "not allowed here" in why, (opt, rc, why)
        # with a word after it: the word is the value of an option that
        # takes one, and the job's command after one that does not
        rc, why = check_run_options(lp, [opt, "word"])
        assert NOT_AN_OPTION not in why, (opt, why)
        if takes_value:
            assert "'word' is not an option" not in why, (opt, why)
        else:
            assert rc == 124 and ("'word' is not an option" in why or "not allowed here" in why), (opt, why)
        refused += "not allowed here" in why
        # a name of no option
        rc, why = check_run_options(lp, [opt + "x-y-z"] if opt.startswith("--") else ["--x" + opt[1:] + "-y-z"])
        assert rc == 124 and NOT_AN_OPTION in why, (opt, why)
    assert 0 < refused < len(table)        # --store, --quiet, ... are the sweep's; the rest are not


def test_a_flag_given_a_value_is_no_run_option(lp):
    table = table_options(lp, "run")
    flag = next(o for o, v in table.items() if not v and o.startswith("--no-"))
    rc, why = check_run_options(lp, [flag + "=1"])
    assert rc == 124 and NOT_AN_OPTION in why, why


def test_the_help_names_every_report_format(lp):
    r = lp.cmd(["report", "--format", "no-such-format"])
    assert r.rc == 124, r
    m = re.search(r"\(use ([a-z, ]+) or ([a-z]+)\)", r.err)
    assert m, r.err
    formats = m.group(1).split(", ") + [m.group(2)]
    assert len(formats) >= 7 and "html" in formats, formats
    top = lp.cmd(["--help"]).out
    line = next(l for l in top.splitlines() if l.startswith("  report "))
    for f in formats:
        assert re.search(r"\b%s\b" % f, line), (f, line)
    report_help = lp.cmd(["report", "--help"]).out
    for f in formats:
        assert re.search(r"\b%s\b" % f, report_help), f


@pytest.mark.parametrize("cmd", ["run", "attach", "report", "ls", "sweep", "top", "judge"])
def test_usage_errors_name_the_option(lp, cmd):
    """The tail every command had copied: one wording, exit 124, the pointer
    to --help; a short option at fault is named, not the word it is in."""
    table = table_options(lp, cmd)
    value_opt = next(o for o, v in table.items() if v and o.startswith("--"))
    cases = [(["--no-such-option"], "unknown option '--no-such-option'"),
             (["-hZ"], None),
             (["-Z"], "unknown option '-Z'"),
             ([value_opt], "option '%s' needs a value" % value_opt),
             ([value_opt, "--", "x"], "option '%s' needs a value before '--'" % value_opt)]
    for args, said in cases:
        r = lp.cmd([cmd] + args)
        if said is None:                  # -h first: the help, whatever follows
            assert r.rc == 0 and r.out.startswith("usage: leakproof %s" % cmd), r
            continue
        assert r.rc == 124 and r.out == "", (args, r)
        assert r.err == "leakproof: %s\nTry 'leakproof %s --help' for more information.\n" % (said, cmd), \
            (args, r.err)

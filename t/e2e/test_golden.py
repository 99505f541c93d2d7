"""Golden files for `leakproof report`: text, Markdown, CSV and JSON, of runs
and of a sweep, compared whole with t/golden/*.

The runs are made so that their numbers do not depend on timing: the job
(t/golden/job.c, built here against include/leakproof.h) maps and touches
exactly N MiB per step and pauses after marking each step, the verdict
judges RSS (exact page counts from statm; PSS is estimated between
rollups), the job has no cgroup of its own (--no-cgroup) and a fixed budget
(--max-mem 1G), so the projection is not the machine's memory. What still
varies from run to run and machine to machine is replaced by a placeholder
before the comparison (normalize() below, the whole list):

  text, Markdown   the scratch directory -> <dir>; "after 0.8 s" -> "after
                   <duration>"; pids -> <pid>; the peak and the most
                   memory's size -> <size>; steps/s -> <rate>; the limit's
                   "in about N steps (~T)" and "the peak is N% of it";
                   table cells of the columns steps/s and peak. Table rows
                   are compared cell by cell: column padding, which follows
                   the widths of the replaced values, is not compared.
  CSV              run: t -> <t>; rss as the change from the first row
                   (exact: whole pages); the other memory columns and the
                   growth kinds' columns -> <bytes> (empty stays empty).
                   sweep: steps_per_second, peak_bytes.
  Markdown         also the growth kinds' table: its Process, Growth/step
                   and Now cells.
  JSON             the keys in VOLATILE_KEYS (times, durations, rates,
                   pids, host, directory, absolute byte counts, sample
                   counts, the Mann-Kendall statistics, growth_kinds) ->
                   <number>, <str>, <list> (by type); the sizes and pids
                   in the diagnosis's text; everything else, keys and
                   their order included, is exact.
  text             also the sizes on the diagnosis and growth-kind lines.
  text, Markdown   the growth-kind row of the machine's /dev/shm, which
                   any process beside the run may have grown.

Exact, then: headings, labels, columns, verdicts and their reasons, growth
per step and its interval, the warm-up, the per-step quantiles, step
counts, results, causes, the sweep's trials, dimensions, statuses and
metrics.

To regenerate after an intended change of a report:

    LEAKPROOF_UPDATE_GOLDEN=1 LEAKPROOF_BUILD=build \\
        /usr/bin/python3 -m pytest -q t/e2e/test_golden.py

and review `git diff t/golden`.
"""

import json
import os
import re
import subprocess
import types
from pathlib import Path

import pytest

# One xdist worker for the whole module: its module fixture runs the jobs every golden file is made from,
# once, not once in each worker that draws one of its tests.
pytestmark = pytest.mark.xdist_group("test_golden")

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "t" / "golden"
UPDATE = os.environ.get("LEAKPROOF_UPDATE_GOLDEN") == "1"

RUN_OPTIONS = ["--no-cgroup", "--measure", "rss", "--max-mem", "1G", "--quiet"]

SWEEP_YAML = """\
command: [./job, "${args}", --steps=20]
method: grid
metric: {name: val_loss, goal: minimize}
parameters:
  leak_mib: {values: [0, 1]}
env:
  OMP_NUM_THREADS: {values: ["1", "2"]}
parallel: 1
run_options: [--no-cgroup, --measure, rss]
"""

VOLATILE_KEYS = {
    "started_at", "ended_at", "cwd", "hostname", "file", "t", "pid", "ppid",
    "steps_per_second", "duration_seconds", "samples",
    "peak_bytes", "baseline_bytes", "floor_growth_bytes", "memory_start_bytes", "memory_bytes",
    "rss_bytes", "pss_bytes", "uss_bytes", "swap_bytes", "gpu_bytes",
    "projected_steps_to_limit", "projected_seconds_to_limit",
    "mann_kendall_z", "mann_kendall_p",
    "growth_kinds",
}
VOLATILE_COLUMNS = {"steps/s": "<rate>", "peak": "<size>", "steps_per_second": "<rate>",
                    "peak_bytes": "<bytes>",
                    # the Markdown table of growth kinds: rows stored when a kind moved
                    "Process": "<pid>", "Growth/step": "<size>", "Now": "<size>"}
KIND_COLUMNS = ("anonymous", "copy_on_write", "file_cache", "shared_memory")
SIZE = r"-?[0-9][0-9.,]* (?:B|KiB|MiB|GiB|TiB)"


MACHINE_SHM_REASON = re.compile(r"; the machine's /dev/shm grew [^;|\n]*? not counted: without a cgroup of the"
                                r" job's own, its files cannot be told from other processes'")


def drop_machine_shm(text):
    """A run without a cgroup of its own shows the machine's /dev/shm as a
    kind when it grew meanwhile, which any process on the machine may have
    made it do (a test beside this one): its row, and the reason's words on
    it, are not the job's."""
    text = MACHINE_SHM_REASON.sub("", text)
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if "the machine's (/dev/shm)" not in line and not re.match(r"\|\s*shared-memory\s*\|[^|]*\|\s*/dev/shm\s*\|", line):
            out.append(line)
        elif line.startswith("  by kind   ") and i + 1 < len(lines) and lines[i + 1].startswith(" " * 12):
            lines[i + 1] = "  by kind   " + lines[i + 1][12:]
    return "\n".join(out)


def normalize_prose(text, scratch):
    text = text.replace(str(scratch), "<dir>")
    rules = [
        (r"after [0-9][^,|]*?(?=, )", "after <duration>"),
        (r"\bpid [0-9]+", "pid <pid>"),
        (r"(pid <pid> \([^)]*\)) %s" % SIZE, r"\1 <size>"),
        (r"^(  peak\s+)%s\s+rate\s+\S+ steps/s" % SIZE, r"\1<size>  rate <rate> steps/s"),
        (r"^\| Peak \| %s \|" % SIZE, "| Peak | <size> |"),
        (r"in about [0-9][0-9,]* steps \(~[^)]*\)", "in about <n> steps (~<duration>)"),
        (r"the peak is (?:under )?[0-9.]+% of it", "the peak is <share> of it"),
        # growth kinds come from rows stored when a kind moved: their sizes
        # follow the sampler's timing
        (r"^(\| Diagnosis \| .*)$", lambda m: re.sub(SIZE, "<size>", m.group(1))),
        (r"^(  (?:diagnosis|by kind  |         ) "
         r"(?:leak|anonymous|copy-on-write|file-cache|shared-memory|gpu) .*)$",
         lambda m: re.sub(r"[-+]?" + SIZE, "<size>", m.group(1))),
    ]
    for pattern, repl in rules:
        text = re.sub(pattern, repl, text, flags=re.M)
    return text


def normalize_tables(text):
    """Text tables (a header over a row of dashes, cells 2+ spaces apart) and
    Markdown tables: cells of VOLATILE_COLUMNS replaced, padding dropped."""
    lines = text.split("\n")
    out = []
    columns = None
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", nxt.strip()):
                columns = cells
            elif all(re.fullmatch(r":?-+:?", c) for c in cells):
                cells = [re.sub("-+", "---", c) for c in cells]
            elif columns and len(cells) == len(columns):
                cells = [VOLATILE_COLUMNS.get(col, cell) for col, cell in zip(columns, cells)]
            out.append("| " + " | ".join(cells) + " |")
            continue
        if re.fullmatch(r"-+(  -+)+", nxt):
            columns = re.split(r"\s{2,}", line.strip())
            out.append("  ".join(columns))
            continue
        if columns and re.fullmatch(r"-+(  -+)+", line):
            out.append("  ".join("---" for _ in columns))
            continue
        if columns and line.strip() and not line.startswith("|"):
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) == len(columns):
                cells = [VOLATILE_COLUMNS.get(col, cell) for col, cell in zip(columns, cells)]
                out.append("  ".join(cells))
                continue
        if not line.strip():
            columns = None
        out.append(line)
    return "\n".join(out)


def normalize_csv(text):
    lines = text.rstrip("\n").split("\n")
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    out = [lines[0]]
    first_rss = int(rows[0][header.index("rss")]) if "rss" in header and rows else None
    for row in rows:
        cells = []
        for col, cell in zip(header, row):
            if col == "t":
                cell = "<t>"
            elif col == "rss" and first_rss is not None:
                cell = "%+d" % (int(cell) - first_rss)
            elif col in ("pss", "uss", "swap", "cgroup", "gpu") + KIND_COLUMNS and cell:
                cell = "<bytes>"
            elif col in VOLATILE_COLUMNS:
                cell = VOLATILE_COLUMNS[col]
            cells.append(cell)
        out.append(",".join(cells))
    return "\n".join(out) + "\n"


def placeholder(value):
    if isinstance(value, (int, float)):
        return "<number>"
    return "<%s>" % type(value).__name__


def normalize_json(text, scratch):
    text = MACHINE_SHM_REASON.sub("", text)

    def walk(value):
        if isinstance(value, dict):
            return {k: (placeholder(v) if k in VOLATILE_KEYS and v is not None else walk(v))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            return value.replace(str(scratch), "<dir>")
        return value
    value = walk(json.loads(text))
    if isinstance(value, dict) and isinstance(value.get("diagnosis"), dict):
        d = value["diagnosis"]       # sizes in its words follow the sampler's timing
        d["text"] = re.sub(r"\bpid [0-9]+", "pid <pid>", re.sub(SIZE, "<size>", d["text"]))
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def normalize(fmt, text, scratch):
    if fmt == "json":
        return normalize_json(text, scratch)
    if fmt == "csv":
        return normalize_csv(text)
    return normalize_tables(drop_machine_shm(normalize_prose(text, scratch)))


def check_golden(name, actual):
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual)
        return
    if not path.exists():
        pytest.fail(f"no golden file {path}; make it with LEAKPROOF_UPDATE_GOLDEN=1", pytrace=False)
    expected = path.read_text()
    assert actual == expected, f"{name} differs from its golden file (normalized output):\n{actual}"


@pytest.fixture(scope="module")
def scratch(lp_bin, tmp_path_factory):
    """A directory with the job built, two runs and a sweep in their stores."""
    d = tmp_path_factory.mktemp("golden")
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(REPO / "include"),
                        "-o", str(d / "job"), str(GOLDEN / "job.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEAKPROOF_")}

    def lp(*args):
        r = subprocess.run([str(lp_bin), *args], cwd=d, env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r
    # Each store is made again (in a new file, at most 3 times) when its
    # samples show that the machine was too loaded for the job's pauses: a
    # step whose sample came after the next step's allocation. The
    # comparison with the golden files stays exact.
    def rss_deltas(store):
        lines = lp("report", "1", "--store", store, "--format", "csv").stdout.splitlines()
        rss = [int(line.split(",")[3]) for line in lines[1:]]
        return [b - a for a, b in zip(rss, rss[1:])]

    mib = 1 << 20
    stores = {}
    for name, argv, want in (("leak", ["./job"], [mib] * 29),
                             ("plateau", ["./job", "--plateau=8", "--steps=30"], [mib] * 7 + [0] * 22)):
        for attempt in range(3):
            stores[name] = "%s-%d.db" % (name, attempt)
            lp("run", "--store", stores[name], *RUN_OPTIONS, "--", *argv)
            if rss_deltas(stores[name]) == want:
                break
    (d / "sweep.yaml").write_text(SWEEP_YAML)
    for attempt in range(3):
        stores["sweep"] = "sweep-%d.db" % attempt
        lp("sweep", "sweep.yaml", "--store", stores["sweep"], "--quiet")
        trials = json.loads(lp("report", "--store", stores["sweep"], "--format", "json").stdout)["trials"]
        if all(t["step_change_quantiles_bytes"] == [t["params"]["leak_mib"] * mib] * 5 for t in trials):
            break
    return types.SimpleNamespace(dir=d, lp=lp, stores=stores)


def report(scratch, *args):
    return scratch.lp("report", *args).stdout


@pytest.mark.parametrize("fmt", ["text", "md", "csv", "json"])
def test_leaking_run(scratch, fmt):
    text = report(scratch, "1", "--store", scratch.stores["leak"], "--format", fmt)
    check_golden("run-leak." + {"text": "txt"}.get(fmt, fmt), normalize(fmt, text, scratch.dir))


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_plateau_run(scratch, fmt):
    text = report(scratch, "1", "--store", scratch.stores["plateau"], "--format", fmt)
    check_golden("run-plateau." + {"text": "txt"}.get(fmt, fmt), normalize(fmt, text, scratch.dir))


@pytest.mark.parametrize("fmt", ["text", "md", "csv", "json"])
def test_sweep(scratch, fmt):
    text = report(scratch, "--store", scratch.stores["sweep"], "--format", fmt)
    check_golden("sweep." + {"text": "txt"}.get(fmt, fmt), normalize(fmt, text, scratch.dir))


def test_sweep_by_dimension(scratch):
    text = report(scratch, "sweep:1", "--store", scratch.stores["sweep"], "--by", "OMP_NUM_THREADS")
    check_golden("sweep-by-env.txt", normalize("text", text, scratch.dir))


def test_output_file_is_the_same_report(scratch):
    out = scratch.dir / "report.md"
    store = scratch.stores["leak"]
    scratch.lp("report", "1", "--store", store, "--format", "md", "-o", str(out))
    assert out.read_text() == report(scratch, "1", "--store", store, "--format", "md")


def test_the_normalizer_keeps_what_matters():
    # The placeholders cover only what varies: a changed verdict, growth,
    # quantile or step count still shows.
    a = "  peak      41.5 MiB      rate  48.1 steps/s (median)\n  verdict   leak — x\n"
    b = "  peak      9.75 MiB      rate  1.2e+03 steps/s (median)\n  verdict   leak — x\n"
    assert normalize("text", a, "/x") == normalize("text", b, "/x")
    assert normalize("text", a, "/x") != normalize("text", a.replace("leak —", "no-leak —"), "/x")
    j = '{"steps": 30, "peak_bytes": 123, "growth_bytes_per_step": 1048576}'
    assert normalize("json", j, "/x") == normalize("json", j.replace("123", "456"), "/x")
    assert normalize("json", j, "/x") != normalize("json", j.replace("30", "31"), "/x")
    csv = "step,epoch,t,rss,pss\n1,,0.1,100,7\n2,,0.2,1148676,9\n"
    assert normalize("csv", csv, "/x") == "step,epoch,t,rss,pss\n1,,<t>,+0,<bytes>\n2,,<t>,+1148576,<bytes>\n"

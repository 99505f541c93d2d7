"""
One run vocabulary: the keys `report`, `ls` and `top --once` write with
--format json, compared with their one list in docs/internals/json.md.

A key written but not listed there fails, and so does a run key listed
there but not written: the doc is the contract, and nothing is added to
the output without it. `top --once` carries every key `ls` has, under the
same names.
"""
import json
import re

REPO_DOC = "docs/internals/json.md"

# Keys of the run object written only in some cases: a partial run's `lost`.
OPTIONAL_RUN_KEYS = {"lost"}

SECTIONS = {
    "The run object": "run",
    "`placement`": "placement",
    "`top --once --format json`: the live view's additions": "top",
    "`report --format json`": "report",
    "`segments`": "segments",
    "`top_process`": "top_process",
}


def documented(lp):
    """{section: [keys]} from the tables of json.md: every `key` in the first
    cell of a row, under the heading (## or ###) the row follows."""
    text = (lp.repo / REPO_DOC).read_text()
    keys = {}
    section = None
    for line in text.splitlines():
        heading = re.match(r"#{2,3} (.*)", line)
        if heading:
            section = SECTIONS.get(heading.group(1).strip())
            continue
        row = re.match(r"\|([^|]*)\|", line)
        if section and row and "`" in row.group(1):
            keys.setdefault(section, []).extend(re.findall(r"`([^`]+)`", row.group(1)))
    assert set(keys) == set(SECTIONS.values()), f"{REPO_DOC}: sections found {sorted(keys)}"
    return keys


def once_each(keys):
    seen = set()
    for name, listed in keys.items():
        dup = {k for k in listed if listed.count(k) > 1}
        assert not dup, f"{REPO_DOC} lists {sorted(dup)} twice under {name}"
        seen |= set(listed)
    return {name: set(listed) for name, listed in keys.items()}


def check_object(obj, doc, what, optional=frozenset()):
    extra = set(obj) - doc
    assert not extra, f"{what} writes {sorted(extra)}, not listed in {REPO_DOC}: {obj}"
    missing = doc - set(obj) - optional
    assert not missing, f"{what} lacks {sorted(missing)}, listed in {REPO_DOC}: {obj}"


def test_json_keys_are_the_documented_ones(lp):
    doc = once_each(documented(lp))
    assert not doc["run"] & doc["top"], ("listed both as run keys and as top's", doc["run"] & doc["top"])

    # A run placed in a SLURM job (so that `placement` is written) that fails,
    # and one that ends well, with steps and a result.
    placed = lp.run(["sh", "-c", "sleep 0.3; exit 3"], "-q", env={"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"})
    assert placed.rc == 3, placed
    stepped = lp.run([lp.py, "-c", "import leakproof, time\n"
                      "for i in range(5):\n"
                      "    leakproof.step(i); time.sleep(0.05)\n"
                      "leakproof.result(val_loss=0.5)\n"],
                     "-q", env={"PYTHONPATH": str(lp.repo / "python")})
    assert stepped.rc == 0, stepped

    listed = lp.ls(fmt="json")
    assert len(listed) == 2, listed
    for run in listed:
        check_object(run, doc["run"], "ls --format json", OPTIONAL_RUN_KEYS | ({"placement"} - set(run)))
    # (the other run has one too when the tests themselves run in a SLURM job)
    placed = [run for run in listed if run["exit_code"] == 3]
    assert len(placed) == 1 and placed[0].get("placement", {}).get("slurm_job_id") == "77", listed
    for run in listed:
        if "placement" in run:
            check_object(run["placement"], doc["placement"], "placement")

    r = lp.cmd(["top", "--once", "--format", "json", "--store", lp.store], timeout=60)
    assert r.rc == 0, r
    live = json.loads(r.stdout)
    assert sorted(run["id"] for run in live) == sorted(run["id"] for run in listed), (live, listed)
    ls_by_id = {run["id"]: run for run in listed}
    for run in live:
        check_object(run, doc["run"] | doc["top"], "top --once --format json",
                     OPTIONAL_RUN_KEYS | ({"placement"} - set(run)))
        missing = set(ls_by_id[run["id"]]) - set(run)
        assert not missing, f"top --once lacks {sorted(missing)} that ls has: {run}"

    for run in listed:
        rep = lp.report(run["id"])
        check_object(rep, doc["report"], "report --format json")
        check_object(rep["run"], doc["run"], "report's run", OPTIONAL_RUN_KEYS | ({"placement"} - set(run)))
        assert set(rep["run"]) == set(run), (rep["run"], run)
        assert rep["segments"], rep
        for seg in rep["segments"]:
            check_object(seg, doc["segments"], "report's segments")
        if rep["top_process"] is not None:
            check_object(rep["top_process"], doc["top_process"], "report's top_process")
    assert lp.report(placed[0]["id"])["run"]["placement"] == placed[0]["placement"]

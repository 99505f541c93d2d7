"""Growth kinds, the diagnosis, the census and the OOM flight recorder in
every report format (docs/internals/growth-kinds.md): one real Python job
that keeps a numpy array a step in a module global until leakproof's memory
budget kills it (t/workloads/census_oom.py), with the census on. Every
format must tell the same story: the kind that grows and its process, the
type that grows and the list that holds it, and, after the kill, what grew
in the last seconds, Python objects included.

The censuses are taken every 0.2 s with a cost budget of 25% of the run,
as in test_census.py, so that a job of a few seconds gets enough of them.
"""
import csv
import io
import re
import xml.etree.ElementTree as ET

import pytest

# One xdist worker for the whole module: its module fixture runs a job until the OOM killer ends it,
# once, not once in each worker that draws one of its tests.
pytestmark = pytest.mark.xdist_group("test_report_kinds")

NUMPY = "numpy.ndarray/float64"
HOLDER = "list kept in census_oom.py (module __main__)"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def killed(lp_bin, tmp_path_factory):
    from conftest import Leakproof
    lp = Leakproof(lp_bin, tmp_path_factory.mktemp("kinds-formats"))
    r = lp.run([lp.py, lp.workload("census_oom.py"), "512", "0.02"], "--census=0.2", "--no-cgroup",
               "--max-mem", "200M", "--quiet", env={"LEAKPROOF_CENSUS_BUDGET": "0.25"}, timeout=180)
    assert r.rc != 0, r
    lp.rep = lp.report()
    yield lp
    lp.cleanup()


def test_json_flight_recorder_has_the_census(killed):
    rep = killed.rep
    fr = rep["flight_recorder"]
    assert fr and fr["cause"] == "budget-kill", killed.describe(rep)
    c = fr["census"]
    assert c and c["to_t"] > c["from_t"], fr
    assert c["grew"] and c["grew"][0]["type"] == NUMPY, c
    g = c["grew"][0]
    assert g["count"] - g["from_count"] >= 8 and g["bytes"] > g["from_bytes"], g
    assert g["holder"] == HOLDER, g
    p = fr["paragraph"]
    assert "Python objects between the censuses at" in p, p
    assert "numpy.ndarray (float64)" in p and "held by " + HOLDER in p, p
    assert "anonymous memory of pid" in p and "(main, python3)" in p, p
    # the census judged over the run names the same type and holder
    assert [t for t in rep["census"]["growing"] if t["type"] == NUMPY and t["holder"] == HOLDER], rep["census"]
    assert rep["diagnosis"]["kind"] == "anonymous", rep["diagnosis"]


def test_text_paragraph_says_the_census(killed):
    text = killed.report(fmt="text")
    para = text.split("flight recorder):\n", 1)[1]
    assert "Python objects between the censuses" in para and HOLDER in para, text


def test_markdown(killed):
    md = killed.report(fmt="md")
    assert "| Diagnosis | leak — anonymous memory of pid" in md, md
    assert re.search(r"^\| anonymous \| \d+ \| main \| \+[0-9.]+ KiB \|", md, re.M), md
    assert "| numpy.ndarray (float64) | " + HOLDER + " | +1 | +512 KiB |" in md, md
    assert "**The last seconds before the end:** The job was ended" in md, md
    assert re.search(r"^\| \d+ \| main \| [0-9.]+ MiB \|", md, re.M), md


def test_csv_has_the_kind_columns(killed):
    rows = list(csv.DictReader(io.StringIO(killed.report(fmt="csv"))))
    assert rows and list(rows[0])[:9] == ["step", "epoch", "t", "rss", "pss", "uss", "swap", "cgroup", "gpu"]
    assert list(rows[0])[9:] == ["anonymous", "copy_on_write", "file_cache", "shared_memory"]
    anon = [int(r["anonymous"]) for r in rows if r["anonymous"]]
    assert anon and anon[-1] - anon[0] > 50 * killed.MIB, anon[:3] + anon[-3:]
    assert all(r["copy_on_write"] in ("", "0") for r in rows)      # no forked worker


def test_html(killed):
    page = killed.report(fmt="html")
    assert '<section id="memory-kinds">' in page and 'data-series="kind-anonymous"' in page
    assert '<tr class="lp-kind" data-kind="anonymous">' in page
    m = re.search(r'<table class="lp-sortable" id="census-growing">.*?</table>', page, re.S)
    assert m and "numpy.ndarray (float64)" in m.group(0) and HOLDER in m.group(0), page[-4000:]
    assert '<section id="flight">' in page and 'id="flight-recorder"' in page
    flight = re.search(r'id="flight-recorder">(.*?)</p>', page, re.S).group(1)
    assert "Python objects between the censuses" in flight, flight


def test_svg_draws_the_kinds(killed):
    root = ET.fromstring(killed.report(fmt="svg").encode())
    keys = [p.get("data-series") for p in root.iter(SVG + "path") if p.get("class") == "lp-series"]
    assert keys[0] == "pss" and "kind-anonymous" in keys, keys


def test_junit(killed):
    root = ET.fromstring(killed.report(fmt="junit").encode())
    (case,) = root.iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["leakproof.diagnosis_kind"] == "anonymous", props
    assert props["leakproof.end"] == "budget-kill", props
    failure = case.find("failure")
    assert failure is not None and "diagnosis: leak — anonymous memory of pid" in failure.get("message")
    assert "The last seconds before the end: The job was ended" in failure.text, failure.text
    assert "census: " + HOLDER + " holds +1 numpy.ndarray (float64) per step" in failure.text, failure.text

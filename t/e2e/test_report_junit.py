"""
`leakproof report --format junit`: the verdicts as JUnit XML for CI
systems, parsed with xml.etree. A leaking run is a failed testcase whose
message is the verdict sentence with the growth and its interval; a run that
failed is a failed testcase saying how it ended; a clean run passes; a sweep
is one testcase per trial. Odd characters in the command stay valid XML.
"""
import xml.etree.ElementTree as ET



def junit(lp, *which):
    r = lp.cmd(["report", *which, "--format", "junit", "--store", lp.store])
    assert r.rc == 0, r
    root = ET.fromstring(r.stdout)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return suites[0]


def test_a_leak_fails_with_the_verdict_and_growth(lp):
    # keeps 1 MiB every 50 ms: a leak over time
    r = lp.run([lp.py, lp.workload("steps.py"), "none", "4"], "--interval", "20ms")
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    suite = junit(lp)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "1", "0")
    (case,) = suite.findall("testcase")
    assert case.get("name").startswith(f"run {rep['run']['id']}: ")
    assert float(case.get("time")) > 0
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "leak"
    message = failure.get("message")
    assert message.startswith("leak: " + rep["reason"]), message
    assert "growth +" in message and "/s" in message and "95% interval" in message, message


def test_a_clean_run_passes_and_a_failed_run_fails(lp):
    r = lp.run(["sh", "-c", 'echo "<&>"', "a<b>&c"], "-q")
    assert r.rc == 0, r
    suite = junit(lp)
    assert suite.get("failures") == "0"
    (case,) = suite.findall("testcase")
    assert case.find("failure") is None
    # shell-quoted, as the text report shows it, and escaped
    assert case.get("name").endswith(": sh -c 'echo \"<&>\"' 'a<b>&c'"), case.get("name")
    assert "inconclusive" in case.find("system-out").text

    r = lp.run(["sh", "-c", "exit 4"], "-q")
    assert r.rc == 4, r
    suite = junit(lp)
    assert suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure.get("type") == "failed" and failure.get("message") == "exited 4"


def test_a_sweep_has_a_testcase_per_trial(lp):
    f = lp.dir / "tiny.yaml"
    f.write_text(f"""
command: [{lp.py}, -c, "import sys, leakproof; leakproof.step(); sys.exit({{v}})"]
parameters:
  v: {{values: [0, 3]}}
""")
    assert lp.cmd(["sweep", str(f), "--store", lp.store, "-q"]).rc in (0, 1)
    suite = junit(lp, "sweep:1")
    cases = suite.findall("testcase")
    assert [c.get("name").split(":")[0] for c in cases] == ["trial 1", "trial 2"]
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    assert cases[0].find("failure") is None
    assert cases[1].find("failure").get("message") == "exited 3"
    r = lp.cmd(["report", "sweep:1", "--format", "junit", "--by", "v", "--store", lp.store])
    assert r.rc == 124, r


def test_noncharacters_in_an_argument_and_a_sweep_value_stay_valid_xml(lp):
    """U+FFFE and U+FFFF are no XML 1.0 characters: before, they went into
    the report as they were and no parser would read it."""
    r = lp.run([lp.py, "-c", "pass", "a\ufffeb\uffffc"])
    assert r.rc == 0, r
    suite = junit(lp)
    (case,) = suite.findall("testcase")
    assert "a\ufffdb\ufffdc" in case.get("name"), case.get("name")
    f = lp.dir / "odd.yaml"
    f.write_text(f"""
command: [{lp.py}, -c, pass, "{{x}}"]
method: grid
parameters:
  x: {{values: ["p\\uFFFEq"]}}
""")   # a YAML escape: the file itself may not hold the character
    r = lp.cmd(["sweep", str(f), "--store", lp.store], timeout=120)
    assert r.rc == 0, r
    suite = junit(lp, "sweep:1")
    (case,) = suite.findall("testcase")
    assert "p\ufffdq" in case.get("name"), case.get("name")

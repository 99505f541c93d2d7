"""
bench/accuracy, the accuracy harness of the workload corpus (bench/corpus),
kept from rotting: its manifest and scripts check out, and a short run of
two workloads measures their truth, flags a declaration its measurement
contradicts, scores the verdicts and leaves nothing under /dev/shm. The
corpus itself is a benchmark (BENCHMARKS.md section 15), not a test.
"""
import json
import os
import subprocess

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def harness(lp_bin, *args, timeout=120):
    env = dict(os.environ, LEAKPROOF_BIN=str(lp_bin))
    return subprocess.run([os.path.join(BENCH, "accuracy"), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_corpus_checks_out(lp_bin):
    p = harness(lp_bin, "--dry-run")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "BAD" not in p.stdout
    runs = int(p.stdout.strip().splitlines()[-1].split()[0])
    assert runs >= 30, p.stdout


def test_two_workloads_measured_and_scored(lp_bin, tmp_path):
    with open(os.path.join(BENCH, "corpus", "manifest.json")) as f:
        workloads = {w["name"]: w for w in json.load(f)["workloads"]}
    leak = workloads["anon_numpy_history"]
    wrong = dict(workloads["flat_numpy_etl"], verdict="leak", kind="shared-memory")   # a false declaration
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"workloads": [leak, wrong]}))
    shm_before = set(os.listdir("/dev/shm"))
    out = tmp_path / "results.json"
    p = harness(lp_bin, "--manifest", str(manifest), "--scale", "0.6", "-j", "2", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    res = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    good, bad = res["anon_numpy_history"], res["flat_numpy_etl"]
    assert good["truth"]["ok"] is True, good["truth"]
    assert good["truth"]["floor_growth_last_quarter"]["anon"] >= 2 << 20, good["truth"]
    assert good["got"]["verdict"] == "leak" and good["verdict_ok"], good.get("summary")
    assert bad["truth"]["ok"] is False and "declared a leak (shared-memory)" in bad["truth"]["why"], bad["truth"]
    assert "TRUTH?" in p.stdout
    assert not [n for n in set(os.listdir("/dev/shm")) - shm_before if n.startswith("lpcorpus-")]

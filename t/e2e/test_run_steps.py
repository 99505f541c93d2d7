"""
Where steps come from: the client channel, --step-regex on the job's output
(carriage-return progress bars included), or nowhere (growth per second).
"""
import csv
import io

import pytest

pytestmark = pytest.mark.valgrind


def csv_steps(lp):
    rows = list(csv.DictReader(io.StringIO(lp.report(fmt="csv"))))
    return [int(row["step"]) for row in rows]


def test_steps_from_the_client_channel(lp):
    r = lp.run([lp.py, lp.workload("steps.py"), "channel", "60"])
    assert r.rc == 0, r
    assert "marked 60 steps" in r.out
    rep = lp.report()
    assert rep["steps"] == 60, lp.describe(rep)
    assert rep["x_unit"] == "step"
    assert rep["run"]["step_source"] == "channel"
    assert rep["steps_per_second"] > 0
    assert csv_steps(lp) == list(range(1, 61))   # numbered by leakproof from 1


def test_steps_from_regex_with_progress_bars(lp):
    epochs, first = 24, 5
    r = lp.run([lp.py, lp.workload("steps.py"), "regex", str(epochs), "--first", str(first),
                "--step-ms", "40"],
               "--step-regex", r"^Epoch (\d+)/\d+")
    assert r.rc == 0, r
    # the progress bars pass through as written, carriage returns and all
    assert r.stdout.count(b"\r") > epochs * 10
    assert f"trained {epochs} epochs\n".encode() in r.stdout
    rep = lp.report()
    assert rep["steps"] == epochs, lp.describe(rep)
    assert rep["run"]["step_source"] == "regex"
    assert rep["run"]["step_regex"] == r"^Epoch (\d+)/\d+"
    # numbers from the capture group, including the epochs that follow a bar
    # cleared with "\r" on the same line
    assert csv_steps(lp) == list(range(first, first + epochs))


def test_regex_without_a_group_numbers_steps_itself(lp):
    r = lp.run([lp.py, lp.workload("steps.py"), "regex", "6", "--first", "40",
                "--step-ms", "20"],
               "--step-regex", r"^Epoch \d+")
    assert r.rc == 0, r
    steps = csv_steps(lp)
    assert len(steps) == 6
    assert steps == sorted(steps) and len(set(steps)) == 6
    assert 40 not in steps


def test_memory_given_back_as_the_job_ends_is_not_judged(lp):
    # grows 20 MiB/s for 4 s, then gives all of it back 0.3 s before it
    # ends (a Python job's list freed as its function returns): the growth
    # it had is judged, not the release
    r = lp.run([lp.py, lp.workload("steps.py"), "none", "4", "--release-ms", "300"], "--interval", "20ms")
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(20 * lp.MIB, rel=0.35), lp.describe(rep)


def run_job(lp, text):
    """The report of a Python job of this text, run sampled every 20 ms."""
    job = lp.dir / "job.py"
    job.write_text(text)
    r = lp.run([lp.py, job], "--interval", "20ms")
    assert r.rc == 0, r
    return lp.report()


LAST_MARK_READ_LATE = r'''
import os, signal, time
import leakproof
kept = []
for step in range(1, 301):
    if step > 180:                     # a leak that starts late: 256 KiB a step
        kept.append(bytearray(b"\x01" * (256 << 10)))
    if step == 300:                    # the supervisor held up, as on a busy machine
        os.kill(os.getppid(), signal.SIGSTOP)
    leakproof.step()
    time.sleep(0.01)
del kept                               # freed as the job ends...
time.sleep(0.3)
os.kill(os.getppid(), signal.SIGCONT)  # ...before the last mark is read
time.sleep(0.3)
'''


def test_a_last_mark_read_after_the_job_freed_its_memory_is_not_judged(lp):
    # the last step's memory is read when the supervisor reads its mark: on
    # a busy machine, after the job freed its 30 MiB list (CI judged such a
    # late leak "no significant growth" once)
    rep = run_job(lp, LAST_MARK_READ_LATE)
    assert rep["steps"] == 300, lp.describe(rep)
    assert rep["points"] == 299, lp.describe(rep)          # the last mark, left out
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(256 << 10, rel=0.10), lp.describe(rep)


MARKS_READ_LATE = r'''
import os, signal, time
import leakproof
kept = []
for step in range(1, 61):              # 2 MiB a step from the first
    kept.append(bytearray(b"\x01" * (2 << 20)))
    if step == 45:                     # the supervisor held up for the last 16 steps
        os.kill(os.getppid(), signal.SIGSTOP)
    leakproof.step()
    time.sleep(0.03)
del kept                               # freed as the job ends...
time.sleep(0.3)
os.kill(os.getppid(), signal.SIGCONT)  # ...before those marks are read
time.sleep(0.3)
'''


def test_marks_read_together_after_the_job_freed_its_memory_are_not_judged(lp):
    # more than the last tenth of the steps read at once, late: CI judged a
    # 2 MiB-a-step leak between two restarts "no significant growth"
    rep = run_job(lp, MARKS_READ_LATE)
    assert rep["steps"] == 60, lp.describe(rep)
    assert 44 <= rep["points"] <= 46, lp.describe(rep)     # the marks read together, left out
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(2 << 20, rel=0.15), lp.describe(rep)


def test_no_steps_judges_growth_per_second(lp):
    # keeps 1 MiB every 50 ms: about 20 MiB/s
    r = lp.run([lp.py, lp.workload("steps.py"), "none", "4"], "--interval", "20ms")
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["steps"] == 0
    assert rep["x_unit"] == "s", lp.describe(rep)
    assert rep["run"]["step_source"] == "none"
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["growth_bytes_per_step"] == pytest.approx(20 * lp.MIB, rel=0.35), lp.describe(rep)


STREAM = r'''
import os, random, sys
rng = random.Random(int(sys.argv[2]))
seps = ["\n", "\r", "\r\n", "\r\r\n", "\n\n", "\r\r"]
out, n = [], 0
for i in range(6000):
    kind = rng.randrange(8)
    if kind == 0:
        n += 1
        line = "Epoch %d" % n                          # a step
    elif kind == 1:
        n += 1
        line = "Epoch %d" % n + " " * rng.randrange(4100, 9000) + "tail"   # a step: cut at 4096
    elif kind == 2 and rng.randrange(2):
        line = "Epoch 66 " + "=" * rng.randrange(3000, 9000)      # none, cut or not
    elif kind == 2:
        line = "a" * rng.randrange(4090, 9000) + "Epoch 77"       # none: not at a line's start
    elif kind == 3:
        line = " Epoch 5 or xEpoch 6 or Epoch x"              # none
    elif kind == 4:
        line = "progress %d%%" % rng.randrange(100)         # none; ends with \r mostly
    else:
        line = "loss %.4f" % rng.random()
    out.append(line + rng.choice(seps))
out.append("Epoch %d" % (n + 1))                        # the last line, unfinished
data = "".join(out).encode()
if sys.argv[1] == "block":
    os.write(1, data) if len(data) < 65536 else [os.write(1, data[i:i + (1 << 20)]) for i in range(0, len(data), 1 << 20)]
else:
    i = 0
    while i < len(data):
        k = rng.randrange(1, 600)
        os.write(1, data[i:i + k])
        i += k
'''


def expected_steps(data):
    """The spec: a line ends at \\n or \\r, is matched on its first 4096
    bytes, and the unfinished last line counts too."""
    import re
    lines = re.split(rb"[\r\n]", data)
    return [int(m.group(1)) for line in lines if (m := re.fullmatch(rb"Epoch (\d+) *", line[:4096]))]


@pytest.mark.parametrize("how", ["block", "pieces"])
def test_regex_steps_in_any_output_cut_anyhow(lp, how):
    """Every step line is found, and nothing else, however the output is
    cut into reads: carriage returns, CRLF, lines longer than 4096 bytes
    (matched on their first 4096: `$` matches where such a line is cut,
    where a search of the whole output finds nothing), matches not at a
    line's start, an unfinished last line. The stream is checked against
    the same rules in Python."""
    import sqlite3
    job = lp.dir / "stream.py"
    job.write_text(STREAM)
    r = lp.run([lp.py, str(job), how, "7"], "-q", "--step-regex", r"^Epoch (\d+) *$")
    assert r.rc == 0, r
    want = expected_steps(r.stdout)
    assert len(want) > 1000, len(want)
    db = sqlite3.connect(lp.store)
    try:
        got = [s for (s,) in db.execute("SELECT step FROM steps ORDER BY t, rowid")]
    finally:
        db.close()
    assert got == want, (len(got), len(want), next((i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w)
                         if got[:len(want)] != want[:len(got)] else "lengths differ")


def test_steps_of_a_job_that_ends_at_once_are_kept(lp):
    """A job of a few milliseconds may end before the first sample. Its
    steps were dropped; now they are stored with the first sample, or,
    when none could be taken, with the peak resident size the kernel kept
    for the job, which the report then names as such."""
    job = ["bash", "-c", 'printf "step 1\\nstep 2\\nstep 3\\n" >&"$LEAKPROOF_FD"']
    for run_id in range(1, 6):
        r = lp.run(job, "--quiet")
        assert r.rc == 0, r
        rep = lp.report(run_id)
        assert rep["steps"] == 3, lp.describe(rep)
        rows = list(csv.DictReader(io.StringIO(lp.report(run_id, fmt="csv"))))
        assert [int(row["step"]) for row in rows] == [1, 2, 3]
        assert all(int(row["rss"]) > 0 for row in rows), rows
        assert rep["peak_bytes"] > 0, lp.describe(rep)
        if any(e["kind"] == "peak-rss" for e in rep["events"]):
            assert "peak resident size the kernel recorded" in lp.report(run_id, fmt="text")

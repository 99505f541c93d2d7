"""
Sweeps with `executor: slurm` against the real engines, started by the
repo's own script (`scripts/cluster start`: PostgreSQL, munged, slurmctld,
slurmd with cgroup memory enforcement), each test in a database of its
own:

- 16 trials, 4 workers as one job array, some configurations too large
  for `slurm.mem`: every trial exactly once, the too-large ones `oom`
  (oom-kill) with slurmstepd's own line, each with its job and array task;
- `scancel` of one worker mid-trial: its trial is interrupted (cancelled)
  and run again by another worker; the sweep completes;
- `kill -9` of the controller after submission: the workers finish the
  sweep, and `--resume` from another shell reports it complete without
  running anything twice;
- `on_oom: resize` with `slurm: {mem: 700M, max_mem: 2G}`: workers of
  more than one size, a job array per size class; the trials of about
  1 GiB end ok on larger workers, those over 2 GiB never run twice;
- the PostgreSQL server stopped for 8 s while the workers run: every
  trial still runs exactly once (a worker waits for the store to record
  its trial's end, rather than leave it `running` until its lease ends).

Needs root and the packages of scripts/install-deps (postgresql,
slurm-wlm, munge). Every wait is bounded; the services are stopped in
the fixture's teardown whatever happens.
"""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cluster import OOM_LINE, wait_for   # the `cluster` fixture: conftest.py

pytestmark = pytest.mark.slow


@pytest.fixture
def sl(lp, cluster):
    """lp with a fresh PostgreSQL database as its store and the cluster's
    environment (SLURM_CONF) for every command."""
    db, lp.store = cluster.new_database()
    lp.db = db
    lp.cluster = cluster
    lp.cenv = {k: v for k, v in cluster.env.items() if k in ("SLURM_CONF", "PGHOST", "PGPORT", "PGUSER")}
    lp.cenv.update(SLURM_JOB_ID=None, SLURM_ARRAY_JOB_ID=None, SLURM_ARRAY_TASK_ID=None)
    return lp


def write(lp, text):
    path = lp.dir / "sweep.yaml"
    path.write_text(text)
    return str(path)


def trials(lp, sweep_id=1):
    return lp.cluster.psql("SELECT idx, attempt, status, coalesce(cause, ''), coalesce(note, ''), "
                           "coalesce(slurm_job, 0), coalesce(slurm_task, -1) FROM trials "
                           f"WHERE sweep_id = {sweep_id} ORDER BY idx, attempt", db=lp.db)


def trial_logs(rows):
    """The end of the log of each trial whose note names one: what its
    `leakproof run` said."""
    out = ""
    for row in rows:
        m = re.search(r"see (\S+)", row[4])
        if m and Path(m.group(1)).exists():
            out += f"\n--- {m.group(1)}\n{Path(m.group(1)).read_text(errors='replace')[-3000:]}"
    return out


def runs_per_trial(lp, sweep_id=1):
    return lp.cluster.psql(f"SELECT trial_idx, trial_attempt, count(*) FROM runs WHERE sweep_id = {sweep_id} "
                           "GROUP BY trial_idx, trial_attempt ORDER BY 1, 2", db=lp.db)


# 16 trials; mb 400 is too large for mem 200M (SLURM kills it)
MIXED = """command: [/usr/bin/python3, -c, "import sys; b = bytearray(int(sys.argv[1]) << 20); print('val=' + sys.argv[1])", "{mb}"]
parameters:
  mb: {values: [8, 16, 400, 24]}
  rep: {values: [1, 2, 3, 4]}
result_regex: '^val=(\\S+)'
executor: slurm
slurm: {workers: 4, mem: 200M, time: "10"}
"""


def test_sixteen_trials_on_four_workers_each_once_too_large_ones_oom_killed_by_slurm(sl):
    r = sl.cmd(["sweep", write(sl, MIXED), "--store", sl.store], env=sl.cenv, timeout=240)
    assert r.rc == 0, r
    assert "for 4 SLURM workers: job array" in r.err and "16 of 16 trials ended" in r.err, r
    got = trials(sl)
    assert [(int(i), int(a)) for (i, a, *_) in got] == [(i, 0) for i in range(16)], got
    assert [tuple(map(int, x)) for x in runs_per_trial(sl)] == [(i, 0, 1) for i in range(16)]
    job = int(got[0][5])
    assert job > 0 and {int(t[5]) for t in got} == {job}, got
    assert {int(t[6]) for t in got} <= {0, 1, 2, 3}, got
    for idx, _, status, cause, note, _, _ in got:
        big = int(idx) // 4 == 2
        if big:
            assert (status, cause) == ("oom", "oom-kill"), (idx, status, cause, note)
            assert OOM_LINE.search(note) and "memory cgroup" in note, note
        else:
            assert status == "ok", (idx, status, cause, note)
    # the table from the shared store, from anywhere
    r = sl.cmd(["report", "sweep:1", "--format", "json", "--store", sl.store], env=sl.cenv)
    assert r.rc == 0, r
    table = json.loads(r.stdout)
    assert table["sweep"]["status"] == "done" and len(table["trials"]) == 16, table


# MIB MiB, every page touched, over 20 steps, then held for the sampler
GROW = """import sys, time
mib = int(sys.argv[1])
kept = []
for _ in range(20):
    kept.append(bytearray(b"\\x01" * ((mib << 20) // 20)))
    time.sleep(0.02)
time.sleep(0.3)
print("val=%d" % mib)
"""

SIZED = """command: [/usr/bin/python3, {script}, "{{mib}}"]
parameters:
  mib: {{values: [40, 80, 120, 160, 240, 320, 450, 950, 1024, 1126, 2600, 3072]}}
result_regex: '^val=(\\S+)'
executor: slurm
slurm: {{workers: 2, mem: 700M, max_mem: 2G, time: "10"}}
on_oom: resize
"""


def test_on_oom_resize_gives_trials_workers_of_the_size_they_need(sl):
    # the peak is set by one parameter, 40 MiB to 3 GiB; workers start with
    # 700M: the trials of about 1 GiB run on larger workers (a job array of
    # their size class, submitted when the model or an OOM says so), those
    # over max_mem (2G) are skipped or killed once, never run twice
    script = sl.dir / "grow.py"
    script.write_text(GROW)
    r = sl.cmd(["sweep", write(sl, SIZED.format(script=script)), "--store", sl.store], env=sl.cenv, timeout=240)
    assert r.rc == 0, r
    assert "for 2 SLURM workers of 700 MiB: job array" in r.err, r
    sizes = re.findall(r"SLURM workers? of (\S+ \S+): job array", r.err)
    assert len(sizes) >= 2, r.err
    rep = json.loads(sl.cmd(["report", "sweep:1", "--format", "json", "--store", sl.store], env=sl.cenv).stdout)
    got = rep["trials"]
    by = [(t["params"]["mib"], t["attempt"], t["status"], t["allocation_bytes"], t["note"]) for t in got]
    final = {t["params"]["mib"]: t for t in got}
    mib = 1 << 20
    assert all(final[m]["status"] == "ok" for m in (40, 80, 120, 160, 240, 320, 450)), by
    for m in (950, 1024, 1126):   # ok, on a worker larger than slurm.mem, and said why
        t = final[m]
        assert t["status"] == "ok" and 700 * mib < t["allocation_bytes"] <= 2048 * mib, by
        assert t["allocation_bytes"] >= t["peak_bytes"], by
        assert "for a worker of" in t["note"] or "run again after an OOM" in t["note"], by
    for m in (2600, 3072):   # never run twice: skipped (with the prediction) or one OOM
        ran = [t for t in got if t["params"]["mib"] == m and t["status"] != "skipped"]
        assert len(ran) <= 1 and final[m]["status"] in ("skipped", "oom"), by
        if final[m]["status"] == "skipped":
            assert "predicted peak" in final[m]["note"] or "ran out of the budget" in final[m]["note"], by
    assert sum(t["status"] == "oom" for t in got) <= 3, by
    # every attempt that ran: its allocation recorded
    assert all(t["allocation_bytes"] >= 700 * mib for t in got if t["status"] != "skipped"), by
    assert rep["sweep"]["status"] == "done", rep["sweep"]


SLEEPY = """command: [/bin/sh, -c, "echo started $1; sleep $1", sh, "{s}"]
parameters:
  s: {values: [6, 6.1, 6.2, 6.3, 1, 1.1, 1.2, 1.3]}
executor: slurm
slurm: {workers: 2, mem: 100M}
"""


def test_scancel_of_a_worker_interrupts_its_trial_and_another_runs_it_again(sl):
    r = sl.cmd(["sweep", write(sl, SLEEPY), "--store", sl.store, "--no-wait"], env=sl.cenv, timeout=120)
    assert r.rc == 0, r
    job = int(re.search(r"job array (\d+)", r.err).group(1))
    # worker 0 mid-trial: a trial of its task is running
    wait_for("array task 0 to hold a running trial",
             lambda: any(t[2] == "running" and t[6] == "0" for t in trials(sl)), timeout=120)
    subprocess.run(["scancel", f"{job}_0"], env=sl.cluster.env, check=True, timeout=60)
    wait_for("the sweep to complete", lambda: (
        lambda t: t and all(x[2] in ("ok", "interrupted") for x in t) and
        sum(x[2] == "ok" for x in t) == 8)(trials(sl)), timeout=180)
    got = trials(sl)
    cut = [t for t in got if t[2] == "interrupted"]
    assert len(cut) == 1, got
    idx, attempt, _, cause, note, _, task = cut[0]
    assert (cause, task) == ("cancelled", "0"), cut
    assert "cancelled (SLURM job" in note, note
    again = [t for t in got if t[0] == idx and int(t[1]) == int(attempt) + 1]
    assert again and again[0][2] == "ok" and again[0][6] == "1", (again, got)
    assert "was cancelled" in again[0][4], again


QUICK = """command: [/bin/sh, -c, "sleep 0.5; echo val=$1", sh, "{x}"]
parameters:
  x: {values: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}
result_regex: '^val=(\\S+)'
executor: slurm
slurm: {workers: 4, mem: 100M}
"""


def test_controller_killed_after_submission_workers_finish_and_resume_reports_complete(sl):
    file = write(sl, QUICK)
    proc = subprocess.Popen([sl.binary, "sweep", file, "--store", sl.store], cwd=sl.dir, env=sl.env(sl.cenv),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sl._started.append(proc)
    sl.read_until(proc.stderr, b"job array", timeout=120)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    wait_for("the workers to finish the sweep", lambda: (
        lambda t: len(t) == 12 and all(x[2] == "ok" for x in t))(trials(sl)), timeout=180)
    r = sl.cmd(["sweep", file, "--store", sl.store, "--resume"], env=sl.cenv, timeout=120)
    assert r.rc == 0, r
    assert "12 of 12 trials ended" in r.err and "submitted" not in r.err and "job array" not in r.err, r
    assert [tuple(map(int, x)) for x in runs_per_trial(sl)] == [(i, 0, 1) for i in range(12)]


def test_store_stopped_for_8_s_while_workers_run_each_trial_still_once(sl):
    r = sl.cmd(["sweep", write(sl, SLEEPY.replace("workers: 2", "workers: 3")), "--store", sl.store, "--no-wait"],
               env=sl.cenv, timeout=120)
    assert r.rc == 0, r
    wait_for("a trial to run", lambda: any(t[2] == "running" for t in trials(sl)), timeout=120)
    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))[-1].parent
    data = sl.cluster.state / "pg" / "data"

    def pg_ctl(*args):
        subprocess.run(["runuser", "-u", "postgres", "--", str(bindir / "pg_ctl"), "-D", str(data), "-l",
                        str(sl.cluster.state / "pg" / "log"), "-w", "-t", "60", *args], check=True,
                       capture_output=True, timeout=90)

    pg_ctl("stop", "-m", "fast")
    try:
        time.sleep(8)
    finally:
        pg_ctl("start")
    got = wait_for("every trial to end", lambda: (
        lambda t: t if len(t) >= 8 and not any(x[2] in ("pending", "running") for x in t) else None)(
            trials(sl)), timeout=240)
    assert [(int(i), int(a), s) for (i, a, s, *_) in got] == [(i, 0, "ok") for i in range(8)], \
        "\n".join(" | ".join(t) for t in got) + trial_logs(got)
    assert [tuple(map(int, x)) for x in runs_per_trial(sl)] == [(i, 0, 1) for i in range(8)]


# one worker with a one-minute limit; the first trial outlasts it
OVERTIME = """command: [/bin/sh, -c, "sleep $1; echo val=$1", sh, "{s}"]
parameters:
  s: {values: [900, 1]}
result_regex: '^val=(\\S+)'
executor: slurm
slurm: {workers: 1, mem: 100M, time: "1"}
"""


def test_a_trial_cut_by_the_job_time_limit_is_interrupted_as_time_limit_and_queued_again(sl):
    """SLURM's own time limit, not a scancel: the array task is signalled at
    its limit (checked every 30 s, then KillWait), the worker names the
    cause from scontrol and gives its trial back for a worker with time."""
    r = sl.cmd(["sweep", write(sl, OVERTIME), "--store", sl.store, "--no-wait"], env=sl.cenv, timeout=120)
    assert r.rc == 0, r
    got = wait_for("the trial stopped at the time limit",
                   lambda: (lambda t: t if any(x[2] == "interrupted" for x in t) else None)(trials(sl)),
                   timeout=300)
    cut = [t for t in got if t[2] == "interrupted"]
    assert len(cut) == 1, got
    idx, attempt, _, cause, note, job, _ = cut[0]
    assert (int(idx), int(attempt), cause) == (0, 0, "time-limit"), cut
    assert f"time-limit (SLURM job {job})" in note, note
    again = [t for t in got if int(t[0]) == 0 and int(t[1]) == 1]
    assert again and again[0][2] == "pending" and "was time-limit" in again[0][4], got
    wait_for("the array job gone", lambda: not sl.cluster.squeue(job), timeout=120)


def pg_ctl(sl, *args):
    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))[-1].parent
    subprocess.run(["runuser", "-u", "postgres", "--", str(bindir / "pg_ctl"), "-D", str(sl.cluster.state / "pg" / "data"),
                    "-l", str(sl.cluster.state / "pg" / "log"), "-w", "-t", "60", *args], check=True,
                   capture_output=True, timeout=90)


def cmdlines_holding(needle):
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                line = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if needle in line:
                found[int(entry)] = line.replace(b"\0", b" ").decode(errors="replace")
    return found


def test_the_password_is_on_no_command_line_of_a_slurm_sweep(sl):
    """The store string, with a password, given in LEAKPROOF_STORE: no
    command line of the controller, the workers, their srun steps or the
    trials' `leakproof run`s holds it (every user reads every command
    line). Before, each trial ran as `srun ... leakproof run --store URI`."""
    secret = "pw-on-no-cmdline-5c2a"
    store = re.sub(r"^postgresql://([^@/]*)@", rf"postgresql://\1:{secret}@", sl.store)
    assert secret in store
    env = sl.env({**sl.cenv, "LEAKPROOF_STORE": store})
    proc = subprocess.Popen([sl.binary, "sweep", write(sl, QUICK.replace("sleep 0.5", "sleep 2"))], cwd=sl.dir,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sl._started.append(proc)
    leaks, steps = {}, set()
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        leaks.update(cmdlines_holding(secret.encode()))
        steps.update(p for p, c in cmdlines_holding(b"\0--trial\0").items() if c.startswith("srun "))
        time.sleep(0.05)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    assert steps, "no srun step of a trial was seen"
    assert not leaks, leaks
    assert secret.encode() not in out + err
    got = trials(sl)
    assert [(int(i), s) for (i, _, s, *_) in got] == [(i, "ok") for i in range(12)], got


def test_the_controller_waits_for_a_store_restarting_for_8_s(sl):
    """The server restarts (8 s down) while the controller follows its
    workers: it waits for it, as they do, and ends with the sweep (exit 0),
    instead of exiting 1 ("sweep stopped") while they carry on."""
    proc = subprocess.Popen([sl.binary, "sweep", write(sl, SLEEPY.replace("workers: 2", "workers: 3")), "--store",
                             sl.store], cwd=sl.dir, env=sl.env(sl.cenv), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sl._started.append(proc)
    sl.read_until(proc.stderr, b"running", timeout=120)
    pg_ctl(sl, "stop", "-m", "fast")
    try:
        time.sleep(8)
    finally:
        pg_ctl(sl, "start")
    out, err = proc.communicate(timeout=300)
    err = err.decode(errors="replace")
    assert proc.returncode == 0 and "8 of 8 trials ended" in err, err[-3000:]
    got = trials(sl)
    assert [(int(i), int(a), s) for (i, a, s, *_) in got] == [(i, 0, "ok") for i in range(8)], \
        "\n".join(" | ".join(t) for t in got) + trial_logs(got)


def test_slurmctld_away_for_18_s_puts_unstarted_trials_back(sl):
    """slurmctld stops for 18 s while workers claim trials: srun cannot
    make their job steps and fails at once. Each such trial goes back to
    pending (the worker backs off) and runs once the controller is back;
    before, each was recorded failed ("did not start") and the sweep said
    done."""
    r = sl.cmd(["sweep", write(sl, QUICK.replace("workers: 4", "workers: 2")), "--store", sl.store, "--no-wait"],
               env=sl.cenv, timeout=120)
    assert r.rc == 0, r
    wait_for("a trial to end", lambda: any(t[2] == "ok" for t in trials(sl)), timeout=120)
    pidfile = sl.cluster.state / "slurm" / "slurmctld.pid"
    pid = int(pidfile.read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    wait_for("slurmctld to exit", lambda: not Path(f"/proc/{pid}").exists() or
             Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z", timeout=60)
    time.sleep(18)
    log = open(sl.cluster.state / "slurm" / "log" / "slurmctld.out", "ab")
    ctld = subprocess.Popen(["slurmctld", "-D", "-f", sl.cluster.env["SLURM_CONF"]], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, env=sl.cluster.env, start_new_session=True)
    pidfile.write_text(f"{ctld.pid}\n")   # stopped by the fixture's `scripts/cluster stop`
    got = wait_for("every trial to end", lambda: (
        lambda t: t if len(t) >= 12 and not any(x[2] in ("pending", "running") for x in t) else None)(
            trials(sl)), timeout=300)
    assert [(int(i), int(a), s) for (i, a, s, *_) in got] == [(i, 0, "ok") for i in range(12)], \
        "\n".join(" | ".join(t) for t in got) + trial_logs(got)
    assert [tuple(map(int, x)) for x in runs_per_trial(sl)] == [(i, 0, 1) for i in range(12)]

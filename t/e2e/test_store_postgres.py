"""
The PostgreSQL store: the same commands as on SQLite, against a real
server, the one of the run's cluster (the `cluster` fixture: the repo's own
`scripts/cluster`), each test in a database of its own.

What it shows: a run with steps and a leak verdict, `report` in every
format with the same fields as on SQLite, `ls`, a small local sweep, a
traced run, eight first runs at once on an empty database, a password that
is never printed, and (slow) the server stopped for 10 s in the middle of
a run with nothing missing once it is back.
"""
import json
import os
import shlex
import socket
import sqlite3
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest



class PgServer:
    """The cluster's PostgreSQL server, as these tests use it. Its
    environment is the cluster's, read when used: a test that stops the
    cluster and starts it again (test_cluster_services.py) moves its ports."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.state = str(cluster.state)

    @property
    def env(self):
        return self.cluster.env

    def psql(self, sql, db="postgres"):
        env = dict(os.environ, PGHOST=self.env["PGHOST"], PGPORT=self.env["PGPORT"])
        r = subprocess.run(["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-U", "leakproof",
                            "-d", db, "-c", sql], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    def pg_ctl(self, *args):
        bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))[-1].parent
        r = subprocess.run(["runuser", "-u", "postgres", "--", str(bindir / "pg_ctl"), "-D",
                            f"{self.state}/pg/data", "-l", f"{self.state}/pg/log", "-w", "-t", "60", *args],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr

    def uri(self, db, password="s3cret-pw"):
        return f"postgresql://leakproof:{password}@127.0.0.1:{self.env['PGPORT']}/{db}"


@pytest.fixture(scope="session")
def pg_server(cluster):
    """The PostgreSQL server of the run's one cluster (conftest.py), shared
    with the SLURM tests."""
    return PgServer(cluster)


@pytest.fixture
def pg(lp, pg_server):
    """lp with a fresh PostgreSQL database as its store (a password in the
    URI: the server trusts local clients, so any password works)."""
    db = "lp_" + uuid.uuid4().hex[:12]
    pg_server.psql(f"CREATE DATABASE {db} TEMPLATE template0")
    lp.store = pg_server.uri(db)
    lp.db = db
    lp.server = pg_server
    return lp


class CuttingProxy:
    """A TCP proxy in front of the real server. It cuts the first
    connection whose client sends cut_at, then refuses connections for
    down_s seconds: what a client sees of a server that restarts between
    two of its statements."""

    def __init__(self, port, cut_at, down_s):
        self.target = ("127.0.0.1", int(port))
        self.cut_at, self.down_s = cut_at, down_s
        self.cut = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                if self.closed:
                    return
                # cut: the port refuses connections for a while, then listens again
                time.sleep(self.down_s)
                self.listener = socket.create_server(("127.0.0.1", self.port))
                continue
            self.handle(client)

    def handle(self, client):
        server = socket.create_connection(self.target)
        threading.Thread(target=self.pump, args=(client, server, True), daemon=True).start()
        threading.Thread(target=self.pump, args=(server, client, False), daemon=True).start()

    def pump(self, src, dst, from_client):
        seen = b""
        try:
            while data := src.recv(65536):
                seen = (seen + data)[-4096:]
                if from_client and not self.cut.is_set() and self.cut_at in seen:
                    self.cut.set()
                    self.listener.close()
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True
        self.listener.close()


class EndingProxy(CuttingProxy):
    """A proxy in front of the real server that, for its first `ends`
    connections, answers the client's startup as a server in a fast
    shutdown does when it ends the backend that was answering: a FATAL
    57P01 "terminating connection due to administrator command", then
    closes. Later connections go through."""

    def __init__(self, port, ends):
        self.ends = ends
        super().__init__(port, cut_at=b"\0never\0", down_s=0)

    def handle(self, client):
        if self.ends > 0:
            self.ends -= 1
            self.end(client)
        else:
            super().handle(client)

    @staticmethod
    def end(client):
        client.settimeout(30)
        def message():     # int32 length (itself included), then the body
            n = int.from_bytes(client.recv(4, socket.MSG_WAITALL), "big")
            return client.recv(n - 4, socket.MSG_WAITALL)
        try:
            if message()[:4] in (bytes.fromhex("04d2162f"), bytes.fromhex("04d21630")):
                client.sendall(b"N")             # SSL or GSS request: no
                message()                        # the startup message
            fields = b"".join(k + v.encode() + b"\0" for k, v in (
                (b"S", "FATAL"), (b"V", "FATAL"), (b"C", "57P01"),
                (b"M", "terminating connection due to administrator command")))
            body = fields + b"\0"
            client.sendall(b"E" + (len(body) + 4).to_bytes(4, "big") + body)
        except OSError:
            pass
        client.close()


def shape(value):
    """The structure of a JSON value: keys and types, not numbers."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__ if value is not None else None


def leak_run(lp):
    r = lp.run([lp.py, lp.workload("steps.py"), "channel", "60", "--step-ms", "30"], "-q", timeout=120)
    assert r.rc == 0, r
    return r


def test_run_report_ls_in_every_format_as_on_sqlite(pg, tmp_path):
    leak_run(pg)
    on_pg = pg.report()
    assert "s3cret" not in json.dumps(on_pg)

    sqlite_store = pg.store
    pg.store = str(tmp_path / "lite.db")
    leak_run(pg)
    on_lite = pg.report()
    lite_csv = pg.report(fmt="csv").splitlines()
    pg.store = sqlite_store

    assert set(on_pg) == set(on_lite) and set(on_pg["run"]) == set(on_lite["run"]), (on_pg, on_lite)
    for key in ("status", "exit_code", "step_source", "cwd", "command"):
        assert on_pg["run"][key] == on_lite["run"][key], (key, on_pg["run"], on_lite["run"])
    for key in ("verdict", "steps", "x_unit", "measure", "restarts", "results", "limit_source"):
        assert on_pg[key] == on_lite[key], (key, pg.describe(on_pg), pg.describe(on_lite))
    # the points judged: the steps, but for last marks read after the job
    # freed its memory as it ended (when they were: the machine's timing)
    assert on_pg["steps"] - 6 <= on_pg["points"] <= on_pg["steps"], pg.describe(on_pg)
    assert on_lite["steps"] - 6 <= on_lite["points"] <= on_lite["steps"], pg.describe(on_lite)
    assert shape(on_pg["segments"]) == shape(on_lite["segments"])
    assert shape(on_pg["top_process"]) == shape(on_lite["top_process"])
    assert on_pg["steps"] == 60 and on_pg["verdict"] == "leak", pg.describe(on_pg)

    for fmt in ("text", "md", "csv", "html", "svg"):
        out = pg.report(fmt=fmt)
        assert out.strip(), fmt
    csv = pg.report(fmt="csv").splitlines()
    assert csv[0].startswith("step,epoch,t,rss,pss,uss,swap,cgroup,gpu") and csv[0] == lite_csv[0], (csv[0], lite_csv[0])
    assert len(csv) == 61

    runs = pg.ls(fmt="json")
    assert [run["id"] for run in runs] == [1]
    assert "steps.py" in pg.ls()


def test_a_password_is_never_printed(pg):
    store = pg.server.uri("no_such_db", password="hunter2-secret")
    r = pg.cmd(["ls", "--store", store])
    assert r.rc != 0
    assert "hunter2" not in r.err and "leakproof:***@" in r.err, r.err
    r = pg.cmd(["run", "--store", store, "-q", "--", "true"])
    assert "hunter2" not in r.err, r.err


def test_a_database_of_something_else_is_refused(pg):
    pg.server.psql("CREATE TABLE customers (id int)", db=pg.db)
    r = pg.run(["true"], "-q")
    assert r.rc != 0 and "not a leakproof store" in r.err, r


def test_a_newer_schema_is_refused(pg):
    pg.run(["true"], "-q")
    pg.server.psql("UPDATE leakproof_schema SET version = 999", db=pg.db)
    r = pg.cmd(["ls", "--store", pg.store])
    assert r.rc != 0 and "newer leakproof" in r.err, r


def test_a_small_local_sweep(pg):
    f = pg.dir / "tiny.yaml"
    f.write_text(f"""
command: [{pg.py}, -c, "import sys, leakproof; leakproof.result(n=len(sys.argv[1]))", "${{args}}"]
method: grid
metric: {{name: n}}
parameters:
  name: {{values: ["a", "bbb", "cc"]}}
""")
    r = pg.cmd(["sweep", str(f), "--store", pg.store], timeout=300)
    assert r.rc == 0, r
    rep = pg.cmd(["report", "--format", "json", "--store", pg.store])
    assert rep.rc == 0, rep
    trials = json.loads(rep.stdout)["trials"]
    assert sorted(t["metric"] for t in trials) == [8, 9, 10], trials   # "--name=" + value
    assert all(t["status"] == "ok" for t in trials), trials


def test_an_optuna_sweep_keeps_its_study_in_the_same_server(pg):
    f = pg.dir / "opt.yaml"
    f.write_text(f"""
command: [{pg.py}, -c, "import sys; print('loss=' + sys.argv[1])", "{{x}}"]
method: optuna
metric: {{name: loss}}
result_regex: '^loss=(\\S+)'
parameters:
  x: {{min: 0.0, max: 1.0}}
run_cap: 4
""")
    r = pg.cmd(["sweep", str(f), "--store", pg.store], timeout=300)
    assert r.rc == 0, r
    assert "s3cret" not in r.out + r.err
    rep = json.loads(pg.cmd(["report", "--format", "json", "--store", pg.store]).stdout)
    storage = rep["sweep"]["optuna_storage"]
    assert storage.startswith("postgresql+psycopg2://leakproof@127.0.0.1:") and "s3cret" not in storage
    assert storage.endswith("/" + pg.db + "?options=-csearch_path%3Doptuna")
    # Optuna's own tables, in the same database (schema optuna: the store
    # has a trials table of its own), with every trial told
    states = pg.server.psql("SELECT state FROM optuna.trials ORDER BY number", db=pg.db).split()
    assert states == ["COMPLETE"] * 4, states
    # and `optuna trials` reads them through the stored URL (the server
    # trusts local clients; else PGPASSWORD or ~/.pgpass give the password)
    out = subprocess.run(["optuna", "trials", "--storage", storage, "--study-name", rep["sweep"]["optuna_study"],
                          "-f", "json"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)) == 4
    assert all(t["status"] == "ok" for t in rep["trials"]), rep["trials"]


@pytest.mark.slow
def test_a_traced_run(pg):
    r = pg.run([pg.py, pg.workload("torch_keep_loss.py"), "--steps", "80"], "--trace", timeout=240)
    assert r.rc == 0, r
    out = pg.cmd(["report", "--trace", "--format", "json", "--store", pg.store])
    assert out.rc == 0, out
    assert json.loads(out.stdout), out


def test_eight_first_runs_at_once_on_an_empty_database(pg):
    procs = [pg.start(["sh", "-c", 'echo "$LEAKPROOF_RUN"'], "-q") for _ in range(8)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [o[1][-500:] for o in outs]
    ids = sorted(int(o[0]) for o in outs)
    assert ids == list(range(1, 9)), ids
    assert len(pg.ls(fmt="json")) == 8
    assert pg.server.psql("SELECT version FROM leakproof_schema", db=pg.db) != ""


@pytest.mark.slow
def test_the_server_stopped_for_10_s_mid_run_loses_nothing(pg):
    proc = pg.start([pg.py, pg.workload("steps.py"), "channel", "500", "--step-ms", "50"], "--interval", "50ms")
    time.sleep(5)
    pg.server.pg_ctl("stop", "-m", "fast")
    stopped = time.monotonic()
    time.sleep(10)
    pg.server.pg_ctl("start")
    out, err = proc.communicate(timeout=180)
    down_s = time.monotonic() - stopped
    err = err.decode(errors="replace")
    assert proc.returncode == 0, err
    assert "unreachable" in err and "reachable again" in err, err
    assert "s3cret" not in err, err
    rep = pg.report()
    assert rep["steps"] == 500, pg.describe(rep)
    assert rep["run"]["status"] != "running" and rep["run"].get("ended_at"), rep["run"]
    steps = int(pg.server.psql("SELECT count(*) FROM steps", db=pg.db))
    assert steps == 500
    samples = int(pg.server.psql("SELECT count(*) FROM samples", db=pg.db))
    duration = float(pg.server.psql("SELECT ended_at - started_at FROM runs", db=pg.db))
    assert duration > down_s
    assert samples >= 0.8 * duration / 0.05, (samples, duration)


def test_a_run_started_while_the_server_is_down_waits_for_it(pg):
    """A run (a sweep worker's trial, a job array's task) that opens the store
    while the server restarts waits for it, bounded, instead of refusing the
    job; ls and report, readers, say at once that it cannot be reached."""
    leak_run(pg)   # the schema is made
    pg.server.pg_ctl("stop", "-m", "fast")
    try:
        proc = pg.start(["sh", "-c", "echo job ran"], "-q")
        pg.read_until(proc.stderr, b"trying again for up to 30 s", timeout=60)
        assert proc.poll() is None
    finally:
        pg.server.pg_ctl("start")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"job ran" in out and b"s3cret" not in err, err
    assert len(pg.ls(fmt="json")) == 2
    # with no wait asked for, the job is refused at once, with the reason
    pg.server.pg_ctl("stop", "-m", "fast")
    try:
        r = pg.run(["sh", "-c", "echo job ran"], "-q", env={"LEAKPROOF_PG_CONNECT_WAIT": "0"}, timeout=60)
        assert r.rc == 125 and "job ran" not in r.out, r
    finally:
        pg.server.pg_ctl("start")


@pytest.mark.parametrize("cut_at", [b"client_min_messages", b"leakproof_schema", b"INSERT INTO runs",
                                    b"UPDATE runs SET sweep_id"],
                         ids=["as-it-connects", "in-the-open", "as-the-run-begins", "as-it-is-linked-to-its-trial"])
def test_a_server_lost_between_two_statements_of_a_runs_start_is_waited_for(pg, cut_at):
    """The server goes away after the run connected, in the middle of its
    opening the store or of recording the new run as a sweep's trial (one
    that starts as the server restarts): the run waits for it as when it
    cannot connect, and the job runs, as that trial, instead of being
    refused."""
    with CuttingProxy(pg.server.env["PGPORT"], cut_at, down_s=3) as proxy:
        store = f"postgresql://leakproof:s3cret-pw@127.0.0.1:{proxy.port}/{pg.db}"
        r = pg.cmd(["run", "--store", store, "-q", "--trial", "7:2:0", "--", "sh", "-c", "echo job ran"],
                   timeout=120)
    assert proxy.cut.is_set()
    assert r.rc == 0 and "job ran" in r.out, r
    assert "s3cret" not in r.err, r
    if b"UPDATE" not in cut_at:        # (the link is a write, buffered until the server is back)
        assert "cannot be reached" in r.err and "trying again" in r.err, r
    else:
        assert "is reachable again" in r.err, r
    assert pg.server.psql("SELECT count(*), min(status), min(sweep_id), min(trial_idx), min(trial_attempt) "
                          "FROM runs", db=pg.db) == "1|done|7|2|0"


def test_a_connection_ended_by_a_server_shutting_down_is_waited_for(pg):
    """A run that connects just as the server shuts down (fast): the backend
    answering it is ended mid-handshake. The run waits for the server, as
    for one that refuses connections, and the job runs."""
    with EndingProxy(pg.server.env["PGPORT"], ends=2) as proxy:
        store = f"postgresql://leakproof:s3cret-pw@127.0.0.1:{proxy.port}/{pg.db}"
        r = pg.cmd(["run", "--store", store, "-q", "--", "sh", "-c", "echo job ran"], timeout=120)
    assert proxy.ends == 0
    assert r.rc == 0 and "job ran" in r.out, r
    assert "terminating connection" in r.err and "trying again" in r.err and "s3cret" not in r.err, r
    assert pg.server.psql("SELECT count(*), min(status) FROM runs", db=pg.db) == "1|done"


def test_a_wrong_user_or_database_is_refused_without_waiting(pg):
    """What waiting cannot mend is not waited for: the job is refused at
    once, with the server's reason and without the password. (The test
    server trusts local connections, so a wrong password cannot be shown
    here; its message is of the same kind.)"""
    port = pg.server.env["PGPORT"]
    for uri, why in ((f"postgresql://lp_nobody:s3cret-pw@127.0.0.1:{port}/{pg.db}", 'role "lp_nobody" does not exist'),
                     (f"postgresql://leakproof:s3cret-pw@127.0.0.1:{port}/lp_none", 'database "lp_none" does not exist')):
        r = pg.cmd(["run", "--store", uri, "-q", "--", "sh", "-c", "echo job ran"], timeout=120)
        assert r.rc == 125 and "job ran" not in r.out, r
        assert why in r.err and "trying again" not in r.err, r
        assert "s3cret" not in r.err, r


@pytest.mark.slow
def test_rows_dropped_past_the_outage_buffer_mark_the_run_partial(pg):
    """A tiny outage buffer (LEAKPROOF_PG_BUFFER_BYTES): the rows past it are
    dropped, and the run says so once the server is back (partial, with
    why); while it is down, ls and report say it cannot be reached."""
    proc = pg.start([pg.py, pg.workload("steps.py"), "channel", "300", "--step-ms", "40"], "-q",
                    env={"LEAKPROOF_PG_BUFFER_BYTES": "8192"})
    deadline = time.monotonic() + 120
    def stored_steps():
        try:
            return int(pg.server.psql("SELECT count(*) FROM steps", db=pg.db))
        except AssertionError:   # the schema is not there yet
            return 0
    while stored_steps() < 5:
        assert time.monotonic() < deadline and proc.poll() is None, "no steps stored"
        time.sleep(0.2)
    pg.server.pg_ctl("stop", "-m", "fast")
    try:
        for cmd in (["ls"], ["report"]):
            r = pg.cmd([*cmd, "--store", pg.store])
            assert r.rc == 1 and "the PostgreSQL server cannot be reached" in r.err, r
            assert len(r.err.strip().splitlines()) == 1 and "s3cret" not in r.err, r
        pg.read_until(proc.stderr, b"newer rows are dropped", timeout=120)
    finally:
        pg.server.pg_ctl("start")
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    run = pg.ls(fmt="json")[0]
    assert "rows were dropped" in run.get("lost", ""), run
    assert "exit 0, partial" in pg.ls(), pg.ls()
    assert "PARTIAL: " in pg.report(fmt="text")


def lp_argv(lp):
    """The start of a leakproof command line, as lp.cmd makes it."""
    return [*shlex.split(os.environ.get("LEAKPROOF_TEST_WRAPPER", "")), lp.binary]


def cmdlines_holding(secret):
    """The live processes whose command line holds secret (bytes): pid and
    command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                line = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if secret in line:
                found[int(entry)] = line.replace(b"\0", b" ").decode(errors="replace")
    return found


def test_a_sweeps_trials_never_show_the_password_on_their_command_line(pg):
    """Every command line can be read by every user of the machine (ps,
    /proc/PID/cmdline): the store's password reaches each trial's `leakproof
    run` (and its guard, a fork of it) in its environment, never in its
    argv. Watched while the trials run."""
    secret = "pw-on-no-cmdline-7d1e"
    store = pg.server.uri(pg.db, password=secret)
    f = pg.dir / "slow.yaml"
    f.write_text(f"""
command: [{pg.py}, -c, "import sys, time, leakproof; time.sleep(1.5); leakproof.result(n=len(sys.argv[1]))", "${{args}}"]
method: grid
metric: {{name: n}}
parallel: 2
parameters:
  name: {{values: ["a", "bb", "ccc", "dddd"]}}
""")
    # the sweep's own store string comes from the environment too: the
    # user's command line is theirs to keep clean
    proc = subprocess.Popen([*lp_argv(pg), "sweep", str(f)], cwd=pg.dir,
                            env=pg.env({"LEAKPROOF_STORE": store}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    leaks, trials_seen = {}, set()
    try:
        while proc.poll() is None:
            leaks.update(cmdlines_holding(secret.encode()))
            trials_seen.update(p for p, c in cmdlines_holding(b"\0--trial\0").items() if " run " in c)
            time.sleep(0.05)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            pg.kill_tree(proc)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    assert trials_seen, "no trial's `leakproof run` was seen running"
    assert not leaks, leaks
    assert secret not in (out + err).decode(errors="replace")
    rep = json.loads(pg.cmd(["report", "--format", "json", "--store", store]).stdout)
    assert [t["status"] for t in rep["trials"]] == ["ok"] * 4, rep["trials"]
    assert secret not in json.dumps(rep)


@pytest.mark.slow
def test_an_8_s_server_restart_in_the_middle_of_a_local_sweep_loses_no_trial(pg):
    """The server restarts (8 s down) while a local sweep of 8 trials runs,
    two at a time: the sweep waits for it, as its trials' runs do, instead
    of stopping. Exit 0, every trial ok, each recorded once, none left
    running for a --resume to run again."""
    f = pg.dir / "eight.yaml"
    f.write_text(f"""
command: [{pg.py}, -c, "import sys, time, leakproof; time.sleep(2); leakproof.result(n=len(sys.argv[1]))", "${{args}}"]
method: grid
metric: {{name: n}}
parallel: 2
parameters:
  name: {{values: ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg", "hhhhhhhh"]}}
""")
    proc = subprocess.Popen([*lp_argv(pg), "sweep", str(f), "--store", pg.store], cwd=pg.dir, env=pg.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pg.read_until(proc.stderr, b"]: ok", timeout=120)   # one ended: the others run
        pg.server.pg_ctl("stop", "-m", "fast")
        time.sleep(8)
        pg.server.pg_ctl("start")
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            pg.kill_tree(proc)
    err = err.decode(errors="replace")
    assert proc.returncode == 0, err[-3000:]
    assert "stopped" not in err and "failed;" not in err, err[-3000:]
    rows = pg.server.psql("SELECT idx, attempt, status FROM trials ORDER BY idx, attempt", db=pg.db).split()
    assert rows == [f"{i}|0|ok" for i in range(8)], rows
    assert pg.server.psql("SELECT count(*), count(DISTINCT sweep_id), min(status) FROM runs", db=pg.db) == "8|1|done"
    assert pg.server.psql("SELECT status FROM sweeps", db=pg.db) == "done"


def test_connection_slots_full_for_a_moment_are_waited_for(pg):
    """The server's connection slots are full (SQLSTATE 53300: here the
    database's CONNECTION LIMIT, held by another client for 4 s): a run
    waits for a slot as for a server that is starting, instead of refusing
    the job (exit 125)."""
    pg.run(["true"], "-q")   # the schema is made
    pg.server.psql(f"ALTER DATABASE {pg.db} CONNECTION LIMIT 1")
    env = dict(os.environ, PGHOST=pg.server.env["PGHOST"], PGPORT=pg.server.env["PGPORT"])
    holder = subprocess.Popen(["psql", "-X", "-q", "-U", "leakproof", "-d", pg.db, "-c", "SELECT pg_sleep(4)"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def held():
            n = pg.server.psql(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{pg.db}'")
            return int(n) >= 1
        deadline = time.monotonic() + 30
        while not held():
            assert time.monotonic() < deadline and holder.poll() is None, holder.stderr.read()
            time.sleep(0.05)
        r = pg.run(["sh", "-c", "echo job ran"], "-q", timeout=120)
    finally:
        holder.wait(timeout=60)
    assert r.rc == 0 and "job ran" in r.out, r
    assert "too many connections" in r.err and "trying again" in r.err and "s3cret" not in r.err, r
    assert len(pg.ls(fmt="json")) == 2


LATIN1_JOB = r"""
import os, time
fd = int(os.environ["LEAKPROOF_FD"])
for i in range(1, 41):
    os.write(fd, b"mark caf\xe9 cr\xe8me %d\nstep %d\n" % (i, i))
    time.sleep(0.01)
"""


def test_bytes_that_are_not_utf8_are_stored_as_on_sqlite(pg):
    """A job whose working directory is Latin-1, with such a byte in
    CUDA_VISIBLE_DEVICES and a SLURM_* variable, that marks 40 steps with
    Latin-1 text (as a C client passes it on): the server of encoding UTF8
    refused the run (exit 125: invalid byte sequence) or lost every batch
    holding a mark (0 of 40 steps) and blamed an outage. Stored and read
    back as on SQLite, byte for byte."""
    cwd = os.path.join(os.fsencode(pg.dir), b"caf\xe9")
    os.mkdir(cwd)
    env = pg.env({"CUDA_VISIBLE_DEVICES": None, "SLURM_JOB_ID": None})
    env = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    env[b"CUDA_VISIBLE_DEVICES"] = b"GPU-\xe9t\xe9"
    env[b"SLURM_JOB_ID"] = b"77\xe9"
    sqlite_store = str(pg.dir / "lite.db")
    shown = {}
    for store in (pg.store, sqlite_store):
        argv = [*lp_argv(pg), "run", "--store", store, "-q", "--", pg.py, "-c", LATIN1_JOB]
        r = subprocess.run([os.fsencode(a) for a in argv], cwd=cwd, env=env, capture_output=True, timeout=120)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 0, err
        assert "unreachable" not in err and "invalid byte sequence" not in err and "cannot write" not in err, err
        rep = subprocess.run([pg.binary, "report", "--format", "json", "--store", store], capture_output=True,
                             timeout=120, env=env)
        assert rep.returncode == 0, rep.stderr
        got = json.loads(rep.stdout)
        assert got["steps"] == 40, (store, got["steps"])
        marks = [e["detail"] for e in got["events"] if e["kind"] == "mark"]
        assert len(marks) == 40, (store, got["events"][:5])
        placement = got["run"].get("placement") or got.get("placement")
        shown[store] = (got["run"]["cwd"], placement, marks)
    # the same bytes read back from both (JSON shows a byte that is not
    # UTF-8 as U+FFFD: an escape left in the text would show otherwise)
    assert shown[pg.store] == shown[sqlite_store], shown
    assert "77\ufffd" in json.dumps(shown[pg.store][1], ensure_ascii=False), shown
    assert shown[pg.store][0].endswith("/caf\ufffd") and shown[pg.store][2][0] == "caf\ufffd cr\ufffdme 1", shown
    # what the tool reads back is the job's bytes, not a replacement: the
    # stored mark of step 1 holds the Latin-1 byte itself on both
    db = sqlite3.connect(sqlite_store)
    lite_mark = db.execute("SELECT CAST(detail AS BLOB) FROM events WHERE kind = 'mark' ORDER BY t LIMIT 1").fetchone()[0]
    assert lite_mark == b"caf\xe9 cr\xe8me 1", lite_mark


def test_a_server_disk_full_at_the_end_keeps_the_end_until_it_fits(pg):
    """The server answers the end of the run with disk full (SQLSTATE
    53100, raised by a trigger on runs while a row says the disk is full:
    the server's own error, where filling its disk would stop the server
    first). The end is kept in memory and tried again until it fits, for
    up to 30 s at close; it is stored as the job ended (exit 0, its own
    duration), not as interrupted, and leakproof says what happened."""
    r = pg.run(["true"], "-q")
    assert r.rc == 0, r
    pg.server.psql("CREATE TABLE disk_full (x int); INSERT INTO disk_full VALUES (1);"
                   " CREATE FUNCTION no_room() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                   " IF EXISTS (SELECT 1 FROM disk_full) THEN RAISE EXCEPTION"
                   " 'could not extend file: No space left on device' USING ERRCODE = '53100'; END IF;"
                   " RETURN NEW; END $$;"
                   " CREATE TRIGGER no_room BEFORE UPDATE ON runs FOR EACH ROW"
                   " WHEN (NEW.ended_at IS NOT NULL) EXECUTE FUNCTION no_room()", db=pg.db)
    t0 = time.time()
    proc = pg.start(["sh", "-c", "echo step 0; echo step 1; sleep 0.3"], "-q", "--step-regex", r"step (\d+)")
    pg.read_until(proc.stderr, b"trying for up to 30 s to write the end of run 2", timeout=60)
    time.sleep(2)   # a try or two fail
    assert proc.poll() is None
    pg.server.psql("DELETE FROM disk_full", db=pg.db)
    out, err = proc.communicate(timeout=60)
    err = err.decode()
    assert proc.returncode == 0, err
    assert "the end of run 2 is now stored" in err, err
    run = {row["id"]: row for row in pg.ls(fmt="json")}[2]
    assert (run["status"], run["exit_code"], run["steps"]) == ("done", 0, 2), run
    assert not run.get("lost"), run   # no row was lost: only the end waited
    assert run["ended_at"] - run["started_at"] < time.time() - t0 - 2, run   # when the job ended
    assert "interrupted" not in pg.ls()


def test_top_screen_stays_whole_across_a_server_restart(pg):
    """`leakproof top` on the server's store while the server restarts:
    what the store's layer says ("unreachable", "reachable again") goes
    to top's footer, never over its table (written to the terminal, it
    scrolled the screen and left pieces of itself in rows ncurses did not
    redraw, the likely cause of an ended 7.7 MiB run shown as 716M)."""
    from test_top import Tmux, check_exit, exited_cleanly, row_with
    r = pg.run(["env", "SMALL_RUN=1", "sleep", "1"], "-q")
    assert r.rc == 0, r
    top = Tmux(pg, "-d", "0.3")
    try:
        before = top.wait("the run listed", lambda s: row_with(s, "SMALL_RUN"), timeout=30)
        line = row_with(before, "SMALL_RUN")[2]
        pg.server.pg_ctl("restart", "-m", "fast")
        time.sleep(3)        # several refreshes: the lost connection, then the new one
        screen = top.wait("the list after the restart",
                          lambda s: s.startswith("leakproof top: 0 running, 1 ended lately"), timeout=20)
        assert row_with(screen, "SMALL_RUN") and row_with(screen, "SMALL_RUN")[2] == line, screen
        assert all("postgresql://" not in s for s in screen.splitlines()[:-1]), screen
        top.keys("q")
        check_exit(top.wait("top gone after q", exited_cleanly, timeout=30))
    finally:
        top.kill()

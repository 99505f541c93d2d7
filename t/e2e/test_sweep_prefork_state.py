"""What a trial forked from the prefork template must not share with the
template or with the other forked trials (src/sweep/prefork.c;
docs/internals/prefork.md): the state a fresh interpreter seeds at its
start — random, numpy's global RandomState, torch's CPU generator. Before,
every warm trial drew the template's numbers (the same np.random.randint
in 4 of 4 trials; cold: 4 different).
"""
import importlib.util
import sqlite3

import pytest

DRAW = r"""
import os, random, sys
import numpy as np
with open('/proc/%d/comm' % os.getppid()) as f:
    parent = f.read().strip()
line = 'draw np=%d random=%r warm=%d' % (np.random.randint(1 << 62), random.random(), parent != 'leakproof')
torch = sys.modules.get('torch')
if torch is not None:
    line += ' torch=%d' % torch.initial_seed()
print(line, flush=True)
"""


def trials(lp, sweep_id=1):
    con = sqlite3.connect(f"file:{lp.store}?mode=ro", uri=True)
    try:
        return con.execute("SELECT idx, attempt, status FROM trials WHERE sweep_id = ? ORDER BY idx, attempt",
                           (sweep_id,)).fetchall()
    finally:
        con.close()


def needs_cgroup(lp):
    r = lp.run(["true"], timeout=60)
    assert r.rc == 0, r
    if lp.report()["run"]["cgroup_mode"] == "none":
        pytest.skip("no cgroup for a job here: prefork falls back to cold starts")


def test_warm_trials_draw_different_random_numbers(lp):
    needs_cgroup(lp)
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("no numpy")
    mods = "[numpy, torch]" if importlib.util.find_spec("torch") else "[numpy]"
    job = lp.dir / "draw.py"
    job.write_text(DRAW)
    f = lp.dir / "draw.yaml"
    f.write_text(f"""
command: [{lp.py}, {job}, "{{i}}"]
method: grid
parameters:
  i: {{values: [1, 2, 3, 4]}}
prefork: {mods}
""")
    r = lp.cmd(["sweep", str(f), "--store", lp.store], timeout=600)
    assert r.rc == 0, r
    assert [t[2] for t in trials(lp)] == ["ok"] * 4, trials(lp)
    draws = []
    for idx in range(4):
        text = (lp.dir / "sweeps" / "1" / f"trial-{idx}.0.log").read_text()
        line = [ln for ln in text.splitlines() if ln.startswith("draw ")]
        assert len(line) == 1, text
        draws.append(dict(kv.split("=", 1) for kv in line[0].split()[1:]))
    assert all(d["warm"] == "1" for d in draws), draws          # forked, not cold
    for key in draws[0]:
        if key != "warm":
            assert len({d[key] for d in draws}) == 4, (key, draws)

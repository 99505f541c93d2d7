"""
`leakproof report --format html|svg`: reports to look at, from real runs.

The runs are made once per module (a leaking job that also reports its loss,
a job that marks no steps, a job killed by the kernel and restarted, a
sweep, a run of 100,000 steps), then:
  - the SVG charts are parsed as XML and their series, markers and axes
    checked against what the JSON report says;
  - the HTML page is opened in a real browser (Debian's chromium, headless):
    its scripts ran (the DOM after them), the charts drew (pixels of the
    series' colors inside each chart's drawing area on a screenshot), and
    it made no network request (chromium's proxy points at a socket this
    test listens on, loopback included, and nothing connects; a page that
    does load something over the network connects, so the check can fail).
"""
import html as htmllib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

# One xdist worker for the whole module: its module fixture runs the jobs every page is made from,
# once, not once in each worker that draws one of its tests.
pytestmark = pytest.mark.xdist_group("test_report_html")

SVG = "{http://www.w3.org/2000/svg}"
WINDOW = (1200, 2600)

# 20 ms a step: a step's memory is read when leakproof reads its mark, and
# a supervisor held up for its whole 0.75 s at 5 ms a step (the ASan build,
# two tests a core) read every mark at once: one step change, one bar
METRIC_JOB = ("import time, leakproof\n"
              "kept = []\n"
              "for i in range(150):\n"
              "    kept.append(bytearray(256 << 10))\n"
              "    leakproof.metric(loss=1.0 / (i + 1))\n"
              "    leakproof.step()\n"
              "    time.sleep(0.02)\n")

SWEEP = """
command: [{py}, -c, "import time, leakproof; kept = []; [(kept.append(bytearray({{kib}} << 10)), time.sleep(0.01), leakproof.step()) for _ in range(30)]; leakproof.result(m={{kib}})"]
method: grid
metric: {{name: m}}
parameters:
  kib: {{values: [0, 512]}}
env:
  OMP_NUM_THREADS: {{values: ["1", "2"]}}
"""


class Store:
    """The module's runs, made with the real binary in one scratch store."""

    def __init__(self, binary, workdir, py, workloads):
        self.binary, self.dir, self.py, self.workloads = str(binary), workdir, py, workloads
        self.store = str(workdir / "lp.db")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("LEAKPROOF_") or k in ("LEAKPROOF_BUILD", "LEAKPROOF_BIN")}

    def cmd(self, *args, timeout=120):
        return subprocess.run([self.binary, *map(str, args)], cwd=self.dir, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)

    def run(self, command, *options):
        r = self.cmd("run", "--store", self.store, "-q", *options, "--", *command)
        return r

    def latest_id(self):
        r = self.cmd("report", "--store", self.store, "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["run"]["id"]

    def report(self, which, fmt, *extra):
        r = self.cmd("report", which, "--store", self.store, "--format", fmt, *extra, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return r.stdout.decode()

    def workload(self, name):
        return str(self.workloads / name)


@pytest.fixture(scope="module")
def runs(lp_bin, tmp_path_factory):
    repo = Path(__file__).resolve().parents[2]
    st = Store(lp_bin, tmp_path_factory.mktemp("html"), sys.executable, repo / "t" / "workloads")
    ids = {}
    r = st.run([st.py, "-c", METRIC_JOB])
    assert r.returncode == 0, r.stderr
    ids["metric"] = st.latest_id()
    r = st.run([st.py, st.workload("steps.py"), "none", "3"])
    assert r.returncode == 0, r.stderr
    ids["nosteps"] = st.latest_id()
    r = st.run([st.py, st.workload("ends.py"), "hog", "8"], "--max-mem", "120M", "--restart", "on-oom",
               "--max-restarts", "2")
    assert r.returncode != 0, r.stderr
    ids["restarts"] = st.latest_id()
    r = st.run([st.py, "-c", "import leakproof\nfor i in range(100000): leakproof.step()"])
    assert r.returncode == 0, r.stderr
    ids["big"] = st.latest_id()
    (st.dir / "sweep.yaml").write_text(SWEEP.format(py=st.py))
    r = st.cmd("sweep", st.dir / "sweep.yaml", "--store", st.store, timeout=300)
    assert r.returncode == 0, r.stderr
    st.ids = ids
    return st


def report_json(runs, which):
    return json.loads(runs.report(which, "json"))


# ---- svg ---------------------------------------------------------------


def parse_svg(text):
    root = ET.fromstring(text.encode())   # well-formed XML, or this raises
    assert root.tag == SVG + "svg", root.tag
    assert text.startswith("<?xml")
    return root


def series(root):
    return [p.get("data-series") for p in root.iter(SVG + "path") if p.get("class") == "lp-series"]


def by_class(root, cls):
    return [e for e in root.iter() if e.get("class") == cls]


def ticks(root, axis):
    """The tick labels of an axis: "x", "y" or "y2"."""
    return [t.text for t in by_class(root, f"lp-{axis}tick")]


def is_nice(step):
    """1, 2 or 5 times a power of ten."""
    mant = step / 10 ** math.floor(math.log10(step))
    return any(abs(mant - m) < 1e-6 for m in (1, 2, 5, 10))


def check_ticks(labels, unit_re):
    """Labels like '64 MiB' on a 1-2-5 step (in their unit)."""
    values = []
    for lab in labels:
        m = re.fullmatch(r"(-?[\d.]+)" + unit_re, lab)
        assert m, f"tick label {lab!r} does not match {unit_re}"
        values.append(float(m.group(1)))
    steps = {round(b - a, 6) for a, b in zip(values, values[1:])}
    assert len(steps) == 1, f"uneven ticks {labels}"
    assert is_nice(steps.pop()), f"ticks not on a 1-2-5 step: {labels}"


def test_svg_of_a_run_with_steps(runs):
    rid = runs.ids["metric"]
    rep = report_json(runs, rid)
    root = parse_svg(runs.report(rid, "svg"))
    got = series(root)
    assert got[0] == "pss", got                       # the judged measure first (bold)
    assert {"pss", "rss", "uss"} <= set(got), got
    assert not any(s.startswith("metric-") for s in got)   # one axis: memory only
    assert rep["verdict"] == "leak", rep["reason"]
    assert len(by_class(root, "lp-trend")) == 1
    y, x = ticks(root, "y"), ticks(root, "x")
    check_ticks(y, r" (B|KiB|MiB|GiB)")
    check_ticks(x, r"k?")
    assert float(x[-1]) >= 150                         # the steps, all of them


def test_svg_of_a_run_without_steps(runs):
    rid = runs.ids["nosteps"]
    rep = report_json(runs, rid)
    assert rep["x_unit"] == "s"
    root = parse_svg(runs.report(rid, "svg"))
    assert series(root)[0] == "pss"
    judged = {k: rep.get(k) for k in ("verdict", "reason", "points", "samples")}
    assert len(by_class(root, "lp-trend")) == 1, judged   # it grows 20 MiB/s
    check_ticks(ticks(root, "x"), r" s")
    check_ticks(ticks(root, "y"), r" (B|KiB|MiB|GiB)")
    assert "time since the start" in ET.tostring(root, encoding="unicode")


def test_svg_of_a_run_with_restarts(runs):
    rid = runs.ids["restarts"]
    segs = report_json(runs, rid)["segments"]
    assert len(segs) == 3, segs
    root = parse_svg(runs.report(rid, "svg"))
    markers = by_class(root, "lp-marker")
    restarts = [m for m in markers if m.get("data-kind") == "restart"]
    ends = [m.get("data-cause") for m in markers if m.get("data-kind") == "end"]
    assert len(restarts) == 2
    assert ends == [g["cause"] for g in segs], (ends, segs)
    assert set(ends) <= {"oom-kill", "budget-kill"}
    assert all(m.find(SVG + "title") is not None for m in markers)   # evidence on hover


def test_svg_of_a_sweep(runs):
    rep = report_json(runs, "sweep:1")
    trials = rep["trials"]
    assert len(trials) == 4
    root = parse_svg(runs.report("sweep:1", "svg"))
    paths = [p for p in root.iter(SVG + "path") if p.get("class") == "lp-series"]
    assert sorted(p.get("data-series") for p in paths) == [f"trial {i}" for i in range(1, 5)]
    assert len({p.get("stroke") for p in paths}) == 4   # four configurations, four colors
    legend = " ".join(t.text for t in by_class(root, "lp-legend")[0].iter(SVG + "text"))
    assert "kib=512, OMP_NUM_THREADS=2" in legend, legend


def test_big_run_is_downsampled(runs):
    rid = runs.ids["big"]
    t0 = time.monotonic()
    page = runs.report(rid, "html")
    took = time.monotonic() - t0
    assert took < 10, took
    assert len(page) < 2_000_000, len(page)
    notes = re.findall(r"Downsampled for drawing: ([\d,]+) points drawn as ([\d,]+)", page)
    assert notes, "the page does not say it downsampled"
    given, drawn = (int(v.replace(",", "")) for v in notes[0])   # the steps chart: 3 or 4 measures
    assert given >= 300_000 and drawn < given / 50, notes
    root = parse_svg(runs.report(rid, "svg"))
    for p in root.iter(SVG + "path"):
        if p.get("class") == "lp-series":
            points = p.get("d").count("L") + 1
            assert points <= 2 * 900, points          # two per pixel column at most


# ---- html in a browser -------------------------------------------------


# Chromium's own services, which it calls whatever the page: network time,
# the component updater, sign-in. Exact names: a page's load from any other
# host (fonts.googleapis.com included) still counts.
BROWSER_HOSTS = {"clients2.google.com", "update.googleapis.com", "redirector.gvt1.com", "accounts.google.com"}


def request_host(head):
    """The host a proxied request is for: CONNECT host:443 or GET http://host/..."""
    m = re.match(rb"[A-Z]+ (?:https?://)?([^/:\s]+)", head)
    return m.group(1).decode(errors="replace") if m else "?"


class Listener:
    """A TCP socket on loopback that records who connects (the proxy)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = []
        self.stop = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(10)   # a browser on a busy machine may be slow to send its request
            head = b""
            try:
                while b"\r\n" not in head and len(head) < 200:
                    chunk = conn.recv(200)
                    if not chunk:
                        break
                    head += chunk
            except OSError:
                pass
            self.connections.append(head)
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()

    def page_requests(self):
        """The requests made through the proxy, but the browser's own. A
        connection that ended or stayed silent without a byte asked for
        nothing (a browser may open one ahead of need); the request line of
        one that asks comes within seconds, and
        test_the_proxy_check_sees_a_page_that_loads_something keeps this
        check able to see one."""
        return [c for c in self.connections if c and request_host(c) not in BROWSER_HOSTS]


def chromium():
    path = shutil.which("chromium")
    if not path:
        pytest.fail("chromium not found: install it with scripts/install-deps", pytrace=False)
    return path


def browse(path, proxy_port, *what, url_suffix=""):
    """Run headless chromium on a local file with its proxy at proxy_port
    (loopback not bypassed); what: --dump-dom or --screenshot=FILE."""
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--window-size={WINDOW[0]},{WINDOW[1]}", "--force-device-scale-factor=1",
            f"--proxy-server=http://127.0.0.1:{proxy_port}", "--proxy-bypass-list=<-loopback>",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--no-first-run", "--no-default-browser-check",
            f"--user-data-dir={path.parent / 'chromium-profile'}",
            "--virtual-time-budget=3000", *what, f"file://{path}{url_suffix}"]
    r = subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    return r.stdout.decode(errors="replace")


@pytest.fixture(scope="module")
def page(runs):
    """The run's page, opened once: its DOM after the scripts, a screenshot,
    and the connections the proxy saw meanwhile."""
    path = runs.dir / "run.html"
    r = runs.cmd("report", runs.ids["metric"], "--store", runs.store, "--format", "html", "-o", path)
    assert r.returncode == 0, r.stderr
    proxy = Listener()
    try:
        dom = browse(path, proxy.port, "--dump-dom")
        shot = runs.dir / "run.png"
        browse(path, proxy.port, f"--screenshot={shot}")
        time.sleep(0.3)
    finally:
        proxy.close()
    return {"path": path, "html": path.read_text(), "dom": dom, "shot": shot,
            "connections": proxy.page_requests()}


def test_the_page_is_self_contained(page):
    html = page["html"]
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp and "default-src 'none'" in csp.group(1), csp
    assert "connect-src" not in csp.group(1) and "http" not in csp.group(1)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html)
    assert not re.search(r"<script[^>]*\bsrc=", html)
    assert not re.search(r"\b(src|href)=\"(https?:)?//", html)
    assert page["connections"] == [], page["connections"]


def test_the_proxy_check_sees_a_page_that_loads_something(runs):
    # the same browser, a page that fetches from the network: it connects
    path = runs.dir / "leaky.html"
    path.write_text('<!DOCTYPE html><img src="http://example.invalid/x.png">'
                    '<script>fetch("http://example.invalid/y")</script>')
    proxy = Listener()
    try:
        browse(path, proxy.port, "--dump-dom")
        time.sleep(0.3)
    finally:
        proxy.close()
    hosts = [request_host(c) for c in proxy.page_requests()]
    assert "example.invalid" in hosts, f"the proxy saw {hosts}: the network check would not catch a load"


def svgs_in(dom):
    """Each chart in the DOM: (data-plot, data-box, its series keys)."""
    out = []
    for m in re.finditer(r'<svg\b[^>]*data-plot="([^"]+)"[^>]*>(.*?)</svg>', dom, re.S):
        tag = dom[m.start():dom.index(">", m.start())]
        box = re.search(r'data-box="([\d.,-]+)"', tag)
        keys = re.findall(r'<path class="lp-series" data-series="([^"]+)"', m.group(2))
        bars = len(re.findall(r'class="lp-bar"', m.group(2)))
        hover = 'class="lp-hover"' in m.group(2)
        out.append({"id": m.group(1), "box": box and [int(v) for v in box.group(1).split(",")],
                    "series": keys, "bars": bars, "hover": hover})
    return out


def test_scripts_ran_and_every_series_is_there(runs, page):
    dom = page["dom"]
    assert 'data-lp-ready="1"' in dom                  # the page's script ran to its end
    charts = {c["id"]: c for c in svgs_in(dom)}
    kinds = report_json(runs, runs.ids["metric"])["growth_kinds"]
    assert set(charts) == {"run-steps", "run-time", "run-change"} | ({"run-kinds"} if kinds else set()), \
        list(charts)
    if kinds:                                          # memory by kind (growth-kinds.md)
        assert charts["run-kinds"]["series"][0] == "kind-anonymous", charts["run-kinds"]
    csv = runs.report(runs.ids["metric"], "csv").splitlines()
    head = csv[0].split(",")
    has_cgroup = any(row.split(",")[head.index("cgroup")] for row in csv[1:])
    want = ["pss", "rss", "uss"] + (["cgroup"] if has_cgroup else []) + ["metric-loss"]
    assert charts["run-steps"]["series"] == want
    assert charts["run-time"]["series"] == want
    assert charts["run-change"]["bars"] >= 5
    for c in charts.values():
        assert c["hover"], c["id"]                     # hover layer added by the script
        assert c["box"] and c["box"][2] > 300 and c["box"][3] > 100, c
    assert dom.count('class="lp-trend"') == 1          # the judgment's trend, on the steps chart
    # the verdict, and the numbers of the text report, on top
    rep = report_json(runs, runs.ids["metric"])
    assert f'<b>{rep["verdict"]}</b>' in dom
    text = runs.report(runs.ids["metric"], "text")
    assert text.splitlines()[1].strip() in htmllib.unescape(dom)   # the verdict line, verbatim
    lines = text.splitlines()
    at = next(i for i, l in enumerate(lines) if re.search(r"\bmin\s+q1\s+median\s+q3\s+max$", l))
    values = re.findall(r"-?[\d.]+ (?:B|KiB|MiB|GiB)", lines[at + 1])
    assert len(values) == 5, lines[at + 1]
    table = re.search(r'<table class="lp-quantiles">(.*?)</table>', dom, re.S).group(1)
    assert re.findall(r'<td class="n">([^<]+)</td>', table) == values


def colored_pixels(img, box):
    """Pixels of a saturated color (the series, not the grey grid or text)."""
    from PIL import Image  # noqa: F401  (python3-pil)
    x, y, w, h = box
    crop = img.crop((x + 2, y + 2, x + w - 2, y + h - 2)).convert("RGB")
    n = 0
    for r, g, b in crop.getdata():
        if max(r, g, b) - min(r, g, b) > 60:
            n += 1
    return n


def test_the_charts_drew(page):
    from PIL import Image
    img = Image.open(page["shot"])
    assert img.size == WINDOW, img.size
    charts = svgs_in(page["dom"])
    for c in charts:
        x, y, w, h = c["box"]
        assert y + h <= WINDOW[1], f"chart {c['id']} is below the screenshot: {c['box']}"
        n = colored_pixels(img, c["box"])
        # memory by kind may be one line (a single process's anonymous memory)
        share = 0.003 if c["id"].endswith("-kinds") else 0.01
        assert n > share * w * h, f"chart {c['id']}: only {n} colored pixels in {w}x{h}"
    # below the last chart, as wide, the page has none: the count can tell
    x, y, w, h = charts[-1]["box"]
    below = y + h + 150
    assert below + 200 <= WINDOW[1]
    assert colored_pixels(img, (x, below, w, 200)) < 0.001 * w * 200


@pytest.fixture(scope="module")
def sweep_page(runs):
    path = runs.dir / "sweep.html"
    r = runs.cmd("report", "sweep:1", "--store", runs.store, "--format", "html", "-o", path)
    assert r.returncode == 0, r.stderr
    proxy = Listener()
    try:
        dom = browse(path, proxy.port, "--dump-dom", url_suffix="#sort=-peak")
    finally:
        proxy.close()
    return {"dom": dom, "connections": proxy.page_requests()}


def test_sweep_page_series_and_sorting(runs, sweep_page):
    dom = sweep_page["dom"]
    assert sweep_page["connections"] == []
    charts = {c["id"]: c for c in svgs_in(dom)}
    assert sorted(charts["sweep-memory"]["series"]) == [f"trial {i}" for i in range(1, 5)]
    assert sorted(charts["sweep-change"]["series"]) == [f"trial {i}" for i in range(1, 5)]
    # sorted by the script, on the peak column, largest first
    table = re.search(r'<table class="lp-sortable" id="trials">(.*?)</table>', dom, re.S).group(1)
    assert re.search(r'<th data-key="peak" data-type="num"[^>]*aria-sort="descending"', table), table[:600]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
    peaks = []
    for row in rows:
        values = re.findall(r'<td class="n" data-v="([^"]*)"', row)   # ..., steps/s, peak, run
        peaks.append(float(values[-2]))
    assert len(peaks) == 4 and peaks == sorted(peaks, reverse=True), peaks
    rep = report_json(runs, "sweep:1")
    assert max(peaks) == max(t["peak_bytes"] for t in rep["trials"])


def test_usage_errors(runs):
    r = runs.cmd("report", "--store", runs.store, "--format", "png")
    assert r.returncode == 124 and b"html or svg" in r.stderr
    r = runs.cmd("report", "sweep:1", "--store", runs.store, "--format", "html", "--by", "kib")
    assert r.returncode == 124 and b"--by" in r.stderr
    r = runs.cmd("report", "sweep:9", "--store", runs.store, "--format", "svg")
    assert r.returncode == 1 and b"no sweep 9" in r.stderr
    r = runs.cmd("report", "999", "--store", runs.store, "--format", "html")
    assert r.returncode == 1 and b"no run 999" in r.stderr

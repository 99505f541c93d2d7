"""
benchlib.py — what the scripts in bench/ share: finding the leakproof binary
and building the small C helpers, describing the machine, reading a
process's CPU time and memory from /proc, medians, and printing a table or
writing the results as JSON.

Units: CPU time in nanoseconds as read, shown in milliseconds; memory in
bytes as read (kB fields of /proc converted), shown in MiB; wall time in
seconds.
"""
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
HELPER_DIR = os.path.join(REPO_DIR, "build", "bench")
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow",
          "-Wstrict-prototypes", "-Wmissing-prototypes", "-Wformat=2", "-Wvla"]

# The interpreter the Python jobs run under: one with numpy, when there is one.
JOB_PYTHON = os.environ.get("LP_BENCH_PYTHON") or (
    "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable)


def leakproof_bin():
    """The binary under test: $LEAKPROOF_BIN, else build/leakproof (built by make)."""
    path = os.environ.get("LEAKPROOF_BIN") or os.path.join(REPO_DIR, "build", "leakproof")
    if not os.access(path, os.X_OK):
        sys.exit("bench: '%s' not found; run make first" % path)
    return path


def helper(name):
    """Build bench/NAME.c into build/bench/NAME when it is missing or stale; return its path."""
    src = os.path.join(BENCH_DIR, name + ".c")
    out = os.path.join(HELPER_DIR, name)
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        os.makedirs(HELPER_DIR, exist_ok=True)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc] + CFLAGS + ["-I" + os.path.join(REPO_DIR, "include"), "-o", out, src],
                       check=True)
    return out


def machine():
    """What the numbers were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "date": datetime.date.today().isoformat(),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "kernel": platform.release(),
        "mem_total_bytes": mem_kb * 1024,
    }


def cpu_ns(pid):
    """CPU time of every thread of pid so far, ns (schedstat's first field); None when gone."""
    total = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
    except (FileNotFoundError, ProcessLookupError):
        return None
    return total


def status_kb(pid, fields):
    """The named kB fields of /proc/PID/status (VmRSS, VmHWM, ...) in bytes; {} when gone."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in fields:
                    out[key] = int(rest.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return out


def smaps_rollup_kb(pid, fields):
    """The named kB fields of /proc/PID/smaps_rollup (Pss, Rss, ...) in bytes; {} when gone."""
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in fields:
                    out[key] = int(rest.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return out


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    """'min–max' of xs as text, for the tables."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return "%s–%s" % (fmt(min(xs)), fmt(max(xs)))


def fmt(x, digits=None):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if digits is None:
        digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 1 else 3
    return "%.*f" % (digits, x)


def print_table(headers, rows, file=sys.stdout):
    """A plain-text table; rows are lists of cells already formatted as text."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip(),
              file=file)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=file)
    file.flush()


def build_id():
    """Which leakproof was measured: the binary's SHA-256 and the source tree's commit."""
    import hashlib
    path = leakproof_bin()
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    try:
        head = subprocess.run(["git", "-C", REPO_DIR, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = None
    return {"binary": path, "sha256": digest, "source": head}


def write_json(path, name, params, results):
    """Write {benchmark, machine, leakproof, params, results} to path ('-' for stdout)."""
    doc = {"benchmark": name, "machine": machine(), "leakproof": build_id(), "params": params,
           "results": results}
    text = json.dumps(doc, indent=2, sort_keys=False) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def which_mprof():
    """mprof from memory_profiler (Debian names it python3-mprof), or None."""
    return shutil.which("mprof") or shutil.which("python3-mprof")

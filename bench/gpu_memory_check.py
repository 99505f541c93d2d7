#!/usr/bin/env python3
"""
gpu_memory_check.py — on a machine with an NVIDIA GPU and PyTorch built for
CUDA: three real CUDA workloads under `leakproof run --census`, and what the
report says of each (docs/internals/census.md):

  leak       a training loop that keeps its loss tensor on the GPU
             (history.append(loss)): allocated grows; the census names
             Tensor (cuda:0, float32) with grad_fn and the list `history`
  fragment   allocated stays flat while each step asks the caching
             allocator for a block a little larger than any it has cached
             (and frees it): reserved grows, reserved minus allocated is
             judged `leak` with the advice expandable_segments:True
  clean      the same training loop keeping loss.item(): nothing grows

usage: bench/gpu_memory_check.py [--steps N] [--record DIR] [--keep DIR]
                                  [--job-timeout S] [--leakproof PATH]

Prints each report's gpu_memory and census sections and one line per check
(PASS/FAIL); exits 1 when a check fails, 2 when there is no CUDA device.
--record DIR also writes each job's per-step torch.cuda.memory_stats()
(with NVML's figure for the job) to DIR/cuda_NAME.json, a series that
t/workloads/cuda_stats_replay.py replays on machines without a GPU.
--keep DIR keeps the store there, with each job's report as DIR/NAME.json;
a job that runs past --job-timeout seconds (default 300) is stopped and
its checks fail. Run it with the Python that has PyTorch: the jobs use
the same interpreter (sys.executable).
Internally the script is also the job: `gpu_memory_check.py --job NAME`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MIB = 1 << 20


def nvml_bytes_of_self():
    """This process's GPU memory as NVML sees it (nvidia-smi), or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(os.getpid()):
            try:
                return int(parts[1]) * MIB
            except ValueError:
                return None
    return None


# name: (steps, seconds a step sleeps, census option). The leak job runs
# ~30 s of steps under the default census (its schedule front-loads), the
# time a user gives a short debugging run: the census must name its holder
# in that; the others are short.
JOBS = {
    "leak": (150, 0.2, "--census"),
    "fragment": (200, 0.02, "--census=1s"),
    "clean": (200, 0.02, "--census=1s"),
}


def job(name, steps, record, sleep_s=0.02):
    import torch
    import torch.nn as nn
    import leakproof
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    history = []
    series = []
    hold = torch.empty(64 * MIB // 4, device=dev)      # a flat base for `fragment`
    for step in range(steps):
        if name in ("leak", "clean"):
            x = torch.randn(4096, 1024, device=dev)
            y = x.sum(dim=1, keepdim=True)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            model.eval()
            xv = torch.randn(4096, 1024, device=dev)
            val = nn.functional.mse_loss(model(xv), xv.sum(dim=1, keepdim=True))   # no torch.no_grad()
            model.train()
            history.append(val if name == "leak" else val.item())
        else:
            # a block a little larger than any cached one: the allocator
            # cannot reuse its free blocks and reserves a new segment
            torch.empty((8 + step) * MIB // 4 + 1, device=dev)   # freed at once
        torch.cuda.synchronize()
        leakproof.step()
        if record:
            stats = dict(torch.cuda.memory_stats(dev))
            stats["nvml_bytes"] = nvml_bytes_of_self() if step % 5 == 0 or step == steps - 1 else None
            series.append({k: v for k, v in stats.items()
                           if k in ("allocated_bytes.all.current", "reserved_bytes.all.current",
                                    "inactive_split_bytes.all.current", "num_alloc_retries", "num_ooms",
                                    "nvml_bytes")})
        time.sleep(sleep_s)
    del hold
    if record:
        with open(record, "w") as f:
            json.dump(series, f)
    print("done %d" % len(history), flush=True)


def check(ok, what, failures):
    print("%s  %s" % ("PASS" if ok else "FAIL", what), flush=True)
    if not ok:
        failures.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job")
    ap.add_argument("--steps", type=int, help="each job's steps (default: its own, JOBS)")
    ap.add_argument("--sleep", type=float, default=0.02, help="seconds a step sleeps (--job)")
    ap.add_argument("--record")
    ap.add_argument("--keep", help="keep the store here")
    ap.add_argument("--leakproof", default=os.path.join(REPO, "build", "leakproof"))
    ap.add_argument("--job-timeout", type=float, default=300)
    a = ap.parse_args()
    if a.job:
        return job(a.job, a.steps or JOBS[a.job][0], a.record, a.sleep)
    try:
        import torch
        if not torch.cuda.is_available():
            print("no CUDA device: nothing to check", file=sys.stderr)
            return 2
        print("torch %s, CUDA %s, %s" % (torch.__version__, torch.version.cuda,
                                         torch.cuda.get_device_name(0)), flush=True)
    except ImportError:
        print("no PyTorch here: nothing to check", file=sys.stderr)
        return 2
    tmp = a.keep or tempfile.mkdtemp(prefix="lp-gpu-")
    os.makedirs(tmp, exist_ok=True)
    store = os.path.join(tmp, "gpu.db")
    failures = []
    reports = {}
    for name in ("leak", "fragment", "clean"):
        record = os.path.join(a.record, "cuda_%s.json" % name) if a.record else None
        if record:
            os.makedirs(a.record, exist_ok=True)
        t0 = time.monotonic()
        steps, sleep_s, census = JOBS[name]
        cmd = [a.leakproof, "run", "-q", "--store", store, census, "--",
               sys.executable, os.path.abspath(__file__), "--job", name, "--steps", str(a.steps or steps),
               "--sleep", str(sleep_s)]
        if record:
            cmd += ["--record", record]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.job_timeout)
        except subprocess.TimeoutExpired as e:
            print("== %s: stopped after %.0f s" % (name, a.job_timeout), flush=True)
            print((e.stderr or b"")[-3000:].decode(errors="replace") if isinstance(e.stderr, bytes)
                  else (e.stderr or "")[-3000:])
            failures.append("%s ran" % name)
            continue
        print("== %s: exit %d in %.1f s" % (name, p.returncode, time.monotonic() - t0), flush=True)
        if p.returncode != 0:
            print(p.stderr[-3000:])
            failures.append("%s ran" % name)
            continue
        try:
            rep = json.loads(subprocess.run([a.leakproof, "report", "--store", store, "--format", "json"],
                                            capture_output=True, text=True, check=True, timeout=60).stdout)
        except (subprocess.SubprocessError, ValueError) as e:
            print("== %s: no report: %s" % (name, e), flush=True)
            failures.append("%s reported" % name)
            continue
        if a.keep:
            with open(os.path.join(tmp, "%s.json" % name), "w") as f:
                json.dump(rep, f)
        text = subprocess.run([a.leakproof, "report", "--store", store], capture_output=True, text=True,
                              timeout=60).stdout
        print(text)
        print(json.dumps({"gpu_memory": rep.get("gpu_memory"), "census": rep.get("census")}, indent=1))
        reports[name] = rep

    def series(name):
        g = (reports.get(name) or {}).get("gpu_memory") or {}
        return {s["name"]: s for s in g.get("series", [])}, g

    s, g = series("leak")
    check(s.get("allocated", {}).get("verdict") == "leak", "leak: allocated judged leak", failures)
    # a type of its own, or what a container holds ("held#1/list/torch.Tensor/...")
    grad = [x for x in ((reports.get("leak") or {}).get("census") or {}).get("growing", [])
            if "torch.Tensor/cuda:0/float32/grad_fn" in x["type"]]
    check(bool(grad) and 0.8 <= grad[0]["growth_per_step"] <= 1.2,
          "leak: census +1 Tensor (cuda:0, float32) with grad_fn per step", failures)
    check(bool(grad) and "history" in (grad[0]["holder"] or ""), "leak: holder names history", failures)
    s, g = series("fragment")
    check(s.get("cached", {}).get("verdict") == "leak", "fragment: reserved - allocated judged leak", failures)
    check(s.get("allocated", {}).get("verdict") != "leak", "fragment: allocated not a leak", failures)
    check("expandable_segments" in (g.get("diagnosis") or ""), "fragment: advice expandable_segments", failures)
    s, g = series("clean")
    check(all(x.get("verdict") != "leak" for x in s.values()) and s, "clean: no series leaks", failures)
    growing = ((reports.get("clean") or {}).get("census") or {}).get("growing", [])
    check(not [x for x in growing if x["type"].startswith("torch.Tensor")], "clean: no tensor type grows", failures)
    print("store: %s" % store)
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

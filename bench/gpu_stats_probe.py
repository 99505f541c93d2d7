#!/usr/bin/env python3
"""
gpu_stats_probe.py — on a machine with an NVIDIA GPU and PyTorch built for
CUDA: three views of one process's GPU memory set side by side, step by
step, while it allocates known amounts: PyTorch's (memory_allocated,
memory_reserved, torch.cuda.memory_stats()), the driver's (nvidia-smi's
used_memory for the pid, cudaMemGetInfo for the whole card) and
leakproof's (the gpu column of `leakproof report --format csv`, read
through NVML).

usage: bench/gpu_stats_probe.py --leakproof PATH --out FILE.json [--timeout S]

Prints one line per stage; writes every stage's figures, the full
memory_stats() of the largest stage and leakproof's CSV to FILE.json.
Exits 2 when there is no CUDA device. The difference between reserved and
nvidia-smi's figure is the CUDA context (a few hundred MiB) that PyTorch
does not count. Internally the script is also the job: `--job FILE`.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
STAGES_MIB = [0, 256, 1024, 4096, 4096 + 64, -1, -2]   # -1: all freed, -2: empty_cache()


def smi_used_of(pid):
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid):
            try:
                return int(parts[1]) * MIB
            except ValueError:
                return None
    return None


def job(path):
    import torch
    import leakproof
    dev = torch.device("cuda:0")
    torch.cuda.init()
    held, rows, full = [], [], None
    for stage, mib in enumerate(STAGES_MIB):
        if mib >= 0:
            want = mib * MIB - sum(t.numel() * 4 for t in held)
            if want > 0:
                held.append(torch.ones(want // 4, device=dev))
        elif mib == -1:
            held.clear()
        else:
            torch.cuda.empty_cache()
        torch.cuda.synchronize()
        time.sleep(0.6)                       # a few of leakproof's samples at 50 ms
        free, total = torch.cuda.mem_get_info(dev)
        stats = torch.cuda.memory_stats(dev)
        if mib == 4096:
            full = dict(stats)
        rows.append({"step": stage + 1, "held_mib": mib, "allocated": torch.cuda.memory_allocated(dev),
                     "reserved": torch.cuda.memory_reserved(dev),
                     "inactive_split": stats.get("inactive_split_bytes.all.current"),
                     "segments": stats.get("segment.all.current"),
                     "smi_used_pid": smi_used_of(os.getpid()), "card_used": total - free})
        leakproof.step()
    with open(path, "w") as f:
        json.dump({"pid": os.getpid(), "torch": torch.__version__, "cuda": torch.version.cuda,
                   "device": torch.cuda.get_device_name(0), "stages": rows, "memory_stats_at_4gib": full}, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job")
    ap.add_argument("--leakproof", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "build", "leakproof"))
    ap.add_argument("--out", default="gpu_stats_probe.json")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    if a.job:
        return job(a.job)
    try:
        import torch
        if not torch.cuda.is_available():
            print("no CUDA device: nothing to probe", file=sys.stderr)
            return 2
    except ImportError:
        print("no PyTorch here: nothing to probe", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="lp-probe-")
    store, raw = os.path.join(tmp, "probe.db"), os.path.join(tmp, "job.json")
    cmd = [a.leakproof, "run", "-q", "--store", store, "--measure", "gpu", "--interval", "50ms", "--",
           sys.executable, os.path.abspath(__file__), "--job", raw]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        print("probe: stopped after %.0f s" % a.timeout)
        return 1
    if p.returncode != 0 or not os.path.exists(raw):
        print("probe: exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
        return 1
    res = json.load(open(raw))
    text = subprocess.run([a.leakproof, "report", "--store", store, "--format", "csv"],
                          capture_output=True, text=True, timeout=60).stdout
    by_step = {}
    for r in csv.DictReader(io.StringIO(text)):
        try:
            by_step[int(r["step"])] = int(float(r["gpu"])) if r.get("gpu") not in (None, "") else None
        except (KeyError, ValueError):
            pass
    res["leakproof_csv"] = text
    print("probe: %s, torch %s, CUDA %s; MiB per stage" % (res["device"], res["torch"], res["cuda"]))
    print("%5s %9s %9s %9s %9s %9s %9s" % ("step", "held", "alloc", "reserved", "smi(pid)", "leakproof",
                                           "card"))

    def m(v):
        return "-" if v is None else "%.0f" % (v / MIB)
    for r in res["stages"]:
        r["leakproof_gpu"] = by_step.get(r["step"])
        held = {-1: "freed", -2: "emptied"}.get(r["held_mib"], str(r["held_mib"]))
        print("%5d %9s %9s %9s %9s %9s %9s" % (r["step"], held, m(r["allocated"]), m(r["reserved"]),
                                               m(r["smi_used_pid"]), m(r["leakproof_gpu"]), m(r["card_used"])))
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

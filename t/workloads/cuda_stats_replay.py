#!/usr/bin/env python3
"""
cuda_stats_replay.py — PyTorch's CUDA allocator figures without a GPU: real
torch (CPU build) with torch.cuda.is_available(), is_initialized() and
memory_stats() monkeypatched to replay a series, step by step, so that the
client's step() reads and sends them exactly as on a GPU. With the fake NVML
(t/fake-nvml, $FAKE_NVML_FILE) the job's "NVML" usage is reserved plus the
memory of other libraries, written before each step.

    cuda_stats_replay.py SCENARIO [STEPS]

SCENARIO (bytes per step in MiB, over a base of 512 MiB allocated):
    tensor-leak   allocated +4 MiB a step, reserved follows it
    fragment      allocated flat, reserved +8 MiB a step, allocation retries
    other         allocated and reserved flat, NVML +6 MiB a step (NCCL...)
    clean         everything flat, with noise
    FILE.json     a recorded series: a JSON list of memory_stats() dicts,
                  each with "nvml_bytes" beside the allocator's keys
                  (bench/gpu_memory_check.py --record writes one)
"""
import json
import os
import random
import sys
import time

import torch

import leakproof

MIB = 1 << 20


def synthetic(scenario, steps):
    rnd = random.Random(1)
    series = []
    for i in range(steps):
        noise = rnd.randrange(0, 2) * MIB
        alloc = 512 * MIB + noise
        reserved = 640 * MIB
        other = 300 * MIB
        retries = 0
        if scenario == "tensor-leak":
            alloc += 4 * MIB * i
            reserved += 4 * MIB * i
        elif scenario == "fragment":
            reserved += 8 * MIB * i
            retries = i // 10
        elif scenario == "other":
            other += 6 * MIB * i
        elif scenario != "clean":
            raise SystemExit("unknown scenario %r" % scenario)
        series.append({
            "allocated_bytes.all.current": alloc,
            "reserved_bytes.all.current": reserved,
            "inactive_split_bytes.all.current": reserved - alloc,
            "num_alloc_retries": retries,
            "num_ooms": 0,
            "nvml_bytes": reserved + other,
        })
    return series


def write_nvml(nbytes):
    path = os.environ.get("FAKE_NVML_FILE")
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("device 0 total %d\n" % (80 << 30))
        f.write("process 0 %d %d\n" % (os.getpid(), nbytes))
    os.replace(tmp, path)


def main():
    scenario = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    if scenario.endswith(".json"):
        with open(scenario) as f:
            series = json.load(f)
    else:
        series = synthetic(scenario, steps)
    current = {}
    torch.cuda.is_available = lambda: True
    torch.cuda.is_initialized = lambda: True
    torch.cuda.memory_stats = lambda device=None: dict(current)
    for stats in series:
        current.clear()
        current.update(stats)
        if stats.get("nvml_bytes"):
            write_nvml(int(stats["nvml_bytes"]))
        time.sleep(0.06)      # > the client's 50 ms between two readings
        leakproof.step()
    print("replayed %d" % len(series), flush=True)


if __name__ == "__main__":
    main()

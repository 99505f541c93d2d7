#!/usr/bin/env python3
"""
kinds_jobs.py — jobs whose memory grows by one kind, for the growth kinds
(docs/internals/growth-kinds.md). Standard library only, but `scan` (numpy).

    kinds_jobs.py read FILE MIB     reads FILE through read(), MIB MiB a step
                                    into one reused buffer: the job's page
                                    cache grows, its own memory does not
    kinds_jobs.py mmap FILE MIB     maps FILE and reads one byte of every page,
                                    MIB MiB a step: file-backed pages mapped
                                    into the job grow
    kinds_jobs.py worker-hog MIB    forks a worker that keeps MIB MiB more
                                    (touched) every 20 ms until something
                                    stops it; the parent marks a step every
                                    20 ms and stays flat
    kinds_jobs.py shm-files KIB STEPS
                                    writes a new KIB KiB file in /dev/shm
                                    every step (what a DataLoader whose
                                    workers die leaves behind), never
                                    removes them while it runs, maps none;
                                    removes them at the end, 0.5 s after
                                    its last step
    kinds_jobs.py helpers EVERY MIB STEPS
                                    starts a helper process every EVERY
                                    steps that keeps MIB MiB (touched) and
                                    sleeps until the job ends; the main
                                    process stays flat
    kinds_jobs.py scan FILE MIB STEPS
                                    np.memmap of FILE, MIB MiB read a step
                                    as fast as it goes (no sleep), wrapping
                                    around after STEPS steps at most; then
                                    holds the map 0.5 s (other work), so
                                    that the last steps are measured with
                                    it mapped

Both file modes first drop FILE's pages from the page cache
(posix_fadvise DONTNEED), so that what the job reads is charged to it, and
sleep 20 ms a step. Units: MiB as named.
"""
import mmap
import os
import sys
import time

import leakproof

MIB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")


def drop_cache(fd):
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def read_file(path, mib):
    buf = bytearray(mib * MIB)
    with open(path, "rb", buffering=0) as f:
        drop_cache(f.fileno())
        while f.readinto(buf):
            leakproof.step()
            time.sleep(0.02)


def map_file(path, mib):
    with open(path, "rb") as f:
        drop_cache(f.fileno())
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        total = 0
        for start in range(0, len(m), mib * MIB):
            end = min(len(m), start + mib * MIB)
            total += sum(m[i] for i in range(start, end, PAGE))
            leakproof.step()
            time.sleep(0.02)
        m.close()
    print(f"read {total}")


def worker_hog(mib):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        kept = []
        while True:
            kept.append(bytearray(mib * MIB))
            time.sleep(0.02)
    os.close(w)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            print(f"worker ended: status {status}", file=sys.stderr, flush=True)
            sys.exit(1)
        leakproof.step()
        time.sleep(0.02)


def shm_files(kib, steps):
    paths = []
    chunk = bytes(range(256)) * (kib * 4)
    try:
        for i in range(steps):
            path = f"/dev/shm/lp-kinds-{os.getpid()}-{i}"
            with open(path, "wb") as f:
                f.write(chunk)
            paths.append(path)
            leakproof.step()
            time.sleep(0.02)
        time.sleep(0.5)         # other work: the files stay while the job runs
    finally:
        for path in paths:
            os.unlink(path)


HELPER = """
import sys, time
kept = bytearray(int(sys.argv[1]) << 20)
for i in range(0, len(kept), 4096):
    kept[i] = 1
sys.stdout.write("up\\n")
sys.stdout.flush()
time.sleep(3600)
"""


def helpers(every, mib, steps):
    import subprocess
    procs = []
    try:
        for i in range(steps):
            if i % every == 0:
                p = subprocess.Popen([sys.executable, "-c", HELPER, str(mib)], stdout=subprocess.PIPE)
                p.stdout.readline()
                procs.append(p)
            leakproof.step()
            time.sleep(0.02)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    print(f"{len(procs)} helpers")


def scan(path, mib, steps):
    import numpy as np
    with open(path, "rb") as f:
        drop_cache(f.fileno())
    data = np.memmap(path, dtype=np.uint8, mode="r")
    per_step = mib * MIB
    total = 0
    for i in range(steps):
        start = (i * per_step) % len(data)
        total += int(data[start:start + per_step:PAGE].sum())
        leakproof.step()
    time.sleep(0.5)
    print(f"read {total}")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "read":
        read_file(args[0], int(args[1]))
    elif mode == "mmap":
        map_file(args[0], int(args[1]))
    elif mode == "worker-hog":
        worker_hog(int(args[0]))
    elif mode == "shm-files":
        shm_files(int(args[0]), int(args[1]))
    elif mode == "helpers":
        helpers(int(args[0]), int(args[1]), int(args[2]))
    elif mode == "scan":
        scan(args[0], int(args[1]), int(args[2]))
    else:
        sys.exit(f"kinds_jobs.py: unknown mode {mode!r}")

#!/usr/bin/env python3
"""
shared_workers.py — a parent and its forked data-loading workers sharing one
large buffer, as PyTorch's DataLoader workers share the dataset the parent
loaded before forking.

The parent allocates --buffer-mib (256 by default) as a numpy array and
touches every page, then forks --workers (4) processes with os.fork(). Each
worker reads one byte of every page of the buffer (so every shared page is
resident in it too, never copied) and keeps reading it in a loop for
--seconds (5). The parent waits for them.

RSS summed over the tree counts the buffer once per process (about 5 times);
PSS splits each shared page between its sharers and counts it about once.
Prints, on stderr, the sums over the tree of RSS and PSS (from
/proc/PID/smaps_rollup) measured by the parent while all workers are up:
TREE_RSS_BYTES and TREE_PSS_BYTES, and BUFFER_BYTES.

Units: bytes, MiB where named.
"""
import argparse
import os
import sys
import time

import numpy as np

MIB = 1 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def rollup(pid):
    """(rss, pss) of pid in bytes from smaps_rollup."""
    rss = pss = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    return rss, pss


def worker(buf, seconds, ready_fd):
    pages = buf[::PAGE_BYTES]           # a view: one byte per page, no copy
    total = int(pages.sum())            # reads every page once
    os.write(ready_fd, b"r")
    os.close(ready_fd)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        total += int(pages.sum())
        time.sleep(0.05)
    os._exit(0 if total > 0 else 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--buffer-mib", type=int, default=256)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()

    buf = np.ones(args.buffer_mib * MIB, dtype=np.uint8)   # every page written
    print(f"BUFFER_BYTES={buf.nbytes}", file=sys.stderr, flush=True)
    ready_r, ready_w = os.pipe()
    pids = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            worker(buf, args.seconds, ready_w)
        pids.append(pid)
    os.close(ready_w)
    for _ in pids:
        os.read(ready_r, 1)
    os.close(ready_r)

    time.sleep(0.5)
    sums = [rollup(p) for p in [os.getpid()] + pids]
    print(f"TREE_RSS_BYTES={sum(r for r, _ in sums)}", file=sys.stderr)
    print(f"TREE_PSS_BYTES={sum(p for _, p in sums)}", file=sys.stderr, flush=True)

    status = 0
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(st) != 0:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""
channel_abuse.py — a job that misuses the client channel ($LEAKPROOF_FD),
writing raw lines the way a buggy or hostile client would. None of it may
stop the run.

    channel_abuse.py bad      5 steps, 3 malformed lines, 2 lines over the
                              4096-byte cap, 5 more steps: 10 steps, 3 bad,
                              2 long. The first long line is built so that
                              its bytes after the cap read "step 77": a
                              supervisor that resumed parsing mid-line would
                              count an extra step. A line is also split
                              across two writes, with a pause between.
    channel_abuse.py close    3 steps, then closes the channel and goes on
                              working (and printing) for a second; exit 0
    channel_abuse.py flood N  N lines "step I" (I = 1..N) as fast as the pipe
                              takes them, in 64 KiB writes that cut lines

Prints what it wrote, as counts, on stdout.
"""
import os
import sys
import time

CAP = 4096


def channel_fd():
    return int(os.environ["LEAKPROOF_FD"])


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def bad(fd):
    steps = 0
    for _ in range(5):
        write_all(fd, b"step\n")
        steps += 1
        time.sleep(0.02)
    malformed = [b"bogus 1\n", b"hello\n", b"florp=3\n"]
    for line in malformed:
        write_all(fd, line)
    head = b"mark " + b"a" * (CAP - 5)           # exactly CAP bytes
    long_lines = [head + b"step 77\n",
                  b"metric loss=" + b"9" * 100000 + b"\n"]
    for line in long_lines:
        write_all(fd, line)
    write_all(fd, b"st")                          # one line in two writes
    time.sleep(0.05)
    write_all(fd, b"ep\n")
    steps += 1
    for _ in range(4):
        time.sleep(0.02)
        write_all(fd, b"step\n")
        steps += 1
    print(f"steps={steps} bad={len(malformed)} long={len(long_lines)}", flush=True)


def close(fd):
    for _ in range(3):
        write_all(fd, b"step\n")
        time.sleep(0.02)
    os.close(fd)
    kept = []
    for i in range(10):
        kept.append(bytearray(b"\x01" * (1 << 20)))
        print(f"working after close {i}", flush=True)
        time.sleep(0.1)
    print("steps=3", flush=True)


def flood(fd, n):
    data = b"".join(b"step %d\n" % i for i in range(1, n + 1))
    chunk = 64 << 10
    for off in range(0, len(data), chunk):
        write_all(fd, data[off:off + chunk])
    print(f"steps={n} bytes={len(data)}", flush=True)


def main():
    mode = sys.argv[1]
    fd = channel_fd()
    if mode == "bad":
        bad(fd)
    elif mode == "close":
        close(fd)
    elif mode == "flood":
        flood(fd, int(sys.argv[2]))
    else:
        print(f"channel_abuse: unknown mode '{mode}'", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

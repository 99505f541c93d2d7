#!/usr/bin/env python3
"""
steps.py — the three ways a job's steps are known.

    steps.py channel N      N steps marked with the client, leakproof.step(),
                            one every --step-ms, keeping 64 KiB per step
    steps.py regex N        no client: N epochs printed as "Epoch E/T" lines
                            (E from --first, 5 by default), each followed by a
                            tqdm-like progress bar redrawn with "\\r" on one
                            line; every third bar is cleared the way tqdm's
                            leave=False does ("\\r   \\r", no newline), so the
                            next "Epoch" line starts after a carriage return,
                            not after a newline. Lines that mention "Epoch"
                            elsewhere than at their start are printed too.
    steps.py none SECONDS   no steps at all: keeps 1 MiB (touched) every
                            50 ms for SECONDS, i.e. grows 20 MiB/s; with
                            --release-ms M, then gives it all back and
                            lives M ms more (memory freed as a job ends)

Units: bytes, MiB where named.
"""
import argparse
import mmap
import os
import sys
import time

MIB = 1 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def touched(nbytes):
    m = mmap.mmap(-1, nbytes)
    for off in range(0, nbytes, PAGE_BYTES):
        m[off] = 1
    return m


def channel(n, step_s):
    import leakproof            # on PYTHONPATH under leakproof run; fails loudly otherwise
    kept = []
    for i in range(n):
        kept.append(touched(64 << 10))
        time.sleep(step_s)
        leakproof.step()
    print(f"marked {n} steps", flush=True)


def regex(n, first, step_s):
    out = sys.stdout
    total = first + n - 1
    cleared = False
    for i, epoch in enumerate(range(first, first + n)):
        # After a cleared bar the cursor is at column 0 of the same line.
        out.write(f"Epoch {epoch}/{total}\n")
        for pct in range(0, 101, 10):
            bar = "#" * (pct // 10)
            out.write(f"\r{pct:3d}%|{bar:<10}| {pct}/100 [loss=0.{pct:02d}]")
            out.flush()
            time.sleep(step_s / 11)
        cleared = i % 3 == 2
        if cleared:
            out.write("\r" + " " * 40 + "\r")      # tqdm leave=False
        else:
            out.write(f"  - val after Epoch {epoch}: ok\n")
        out.flush()
    if cleared:
        out.write("\n")
    out.write(f"trained {n} epochs\n")
    out.flush()


def none(seconds, release_s=0.0):
    kept = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        kept.append(touched(MIB))
        time.sleep(0.05)
    print(f"kept {len(kept)} MiB", flush=True)
    if release_s:
        kept.clear()             # all of it given back, then a moment before the end
        time.sleep(release_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["channel", "regex", "none"])
    ap.add_argument("count", type=float)
    ap.add_argument("--first", type=int, default=5)
    ap.add_argument("--step-ms", type=float, default=30)
    ap.add_argument("--release-ms", type=float, default=0,
                    help="none: give everything back, then live this long")
    args = ap.parse_args()
    if args.mode == "channel":
        channel(int(args.count), args.step_ms / 1000)
    elif args.mode == "regex":
        regex(int(args.count), args.first, args.step_ms / 1000)
    else:
        none(args.count, args.release_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())

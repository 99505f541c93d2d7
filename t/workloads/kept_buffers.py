#!/usr/bin/env python3
"""
kept_buffers.py — a leak from the first step: every step keeps a buffer of
--kib KiB (256 by default, every page touched) in a list, and allocates
and drops a few temporaries. Nothing warms up: the growth is linear from
step 0 (the list's own reallocations move the level by a few MiB now and
then). With --accelerate, the first half of the run keeps --kib a step
and the second half eight times as much: a leak that speeds up. With
--start-at F, nothing is kept before the fraction F of the run: a leak
that starts late. Each step
then pauses --step-ms (a step's own work): the memory of a step is read
when leakproof reads its mark, and at 3,700 steps a second (no pause) a
supervisor held up for 0.1 s on a busy machine read some 400 marks at
once, at the memory of the last, a stair of 100 MiB in a straight line
(warm-up 696 of 1500 once); at 5 ms a step such a hold-up is 20 steps.

    --steps N        steps (default 1500)
    --kib K          kept per step (default 256)
    --accelerate     8·K per step over the second half
    --start-at F     keep nothing before step F·N (default 0)
    --step-ms MS     pause after each step (default 5)

Prints EXPECTED_GROWTH_BYTES_PER_STEP=<K KiB in bytes> on stderr at the
start (the first half's rate with --accelerate). Marks steps with
leakproof.step().
"""
import argparse
import sys
import time
import types

try:
    import leakproof
except ImportError:  # not under leakproof: its client is not on the path
    leakproof = types.SimpleNamespace(step=lambda *a, **k: None)

KIB = 1 << 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--kib", type=int, default=256)
    ap.add_argument("--accelerate", action="store_true")
    ap.add_argument("--start-at", type=float, default=0)
    ap.add_argument("--step-ms", type=float, default=5)
    args = ap.parse_args()
    print(f"EXPECTED_GROWTH_BYTES_PER_STEP={args.kib * KIB}", file=sys.stderr, flush=True)
    kept = []
    for step in range(args.steps):
        size = args.kib * KIB
        if args.accelerate and step >= args.steps // 2:
            size *= 8
        if step >= args.start_at * args.steps:
            kept.append(bytearray(b"\x01" * size))
        temporaries = [bytearray(b"\x02" * (64 * KIB)) for _ in range(4)]
        del temporaries
        time.sleep(args.step_ms / 1000)
        leakproof.step()


if __name__ == "__main__":
    main()

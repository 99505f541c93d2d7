#!/usr/bin/env python3
"""
torch_keep_loss.py — a real PyTorch training loop with a real leak: every
step it also scores a held-out batch (forgetting torch.no_grad()) and keeps
the loss tensor in a list, `history.append(loss)`. A loss that keeps its
autograd history keeps the whole graph of its forward pass alive, with every
activation saved for a backward pass that never comes.

The model is chosen so that what stays alive is known exactly:
    Linear(D, H) -> ReLU -> Linear(H, 1) -> mse_loss
saves, per scored batch of B rows (float32):
    the input x             B*D*4   (for the first Linear's weight gradient)
    the ReLU output         B*H*4   (ReLU's result, also the second Linear's input)
    the model output        B*4     (mse_loss's input)
    the target              B*4     (mse_loss's target)
The weights are saved too, but as views of the parameters: no new memory.
The script also walks the graph of the first kept loss, sums the storage
of every tensor saved for backward (parameters excluded), checks that it
matches the formula, and prints it on stderr as
    EXPECTED_GROWTH_BYTES_PER_STEP=<n>
At the end it prints the growth of its own RSS (from /proc/self/statm) per
step after the warm-up, MEASURED_GROWTH_BYTES_PER_STEP=<n>; with --check it
exits 1 unless that is within 10% of the expectation (0 with --item).

    --item         keep loss.item() instead: no leak
    --steps N      training steps (default 200)
    --check        validate the measured growth standalone

Units: bytes. Marks each step with leakproof.step() when run under
leakproof; runs anywhere else too.
"""
import argparse
import ctypes
import os
import sys
import time
import types

import torch
import torch.nn as nn

try:
    import leakproof
except ImportError:  # not under leakproof: its client is not on the path
    leakproof = types.SimpleNamespace(step=lambda *a, **k: None,
                                      metric=lambda **k: None)

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
BATCH = 4096
IN_FEATURES = 128
HIDDEN = 8
WARMUP_STEPS = 10


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_BYTES


def saved_tensor_bytes(loss, param_ptrs):
    """Bytes of the distinct storages saved for backward in loss's graph,
    parameters excluded."""
    seen_ptrs, seen_nodes, total = set(), set(), 0
    stack, keep = [loss.grad_fn], []
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen_nodes:
            continue
        seen_nodes.add(id(fn))
        keep.append(fn)          # ids stay unique while the node lives
        for name in dir(fn):
            if not name.startswith("_saved_"):
                continue
            value = getattr(fn, name)
            values = value if isinstance(value, (tuple, list)) else (value,)
            for t in values:
                if not isinstance(t, torch.Tensor):
                    continue
                storage = t.storage()
                ptr = storage.data_ptr()
                if ptr in param_ptrs or ptr in seen_ptrs:
                    continue
                seen_ptrs.add(ptr)
                total += storage.nbytes()
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--item", action="store_true", help="keep loss.item(): no leak")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    # Pin glibc's mmap threshold at its 128 KiB default. Left dynamic, it rises
    # to 2 MiB once a 2 MiB tensor is freed, the kept inputs then land on the
    # heap between freed temporaries, and fragmentation adds some 40% to the
    # leak: real, but not what the formula counts. With it pinned, every
    # tensor of the formula (all >= 128 KiB but the two B-row ones) is its own
    # mapping and the process grows by the formula plus a page per mapping.
    M_MMAP_THRESHOLD = -3
    ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    param_ptrs = {p.storage().data_ptr() for p in model.parameters()}
    true_w = torch.randn(IN_FEATURES, 1) / IN_FEATURES ** 0.5

    def batch():
        x = torch.randn(BATCH, IN_FEATURES)
        return x, x @ true_w + 0.1 * torch.randn(BATCH, 1)

    formula = BATCH * IN_FEATURES * 4 + BATCH * HIDDEN * 4 + BATCH * 4 + BATCH * 4
    expected = 0 if args.item else formula
    history = []
    rss = []
    t0 = time.monotonic()
    for step in range(args.steps):
        model.train()
        x, y = batch()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

        # Score a held-out batch to follow generalization, step by step.
        model.eval()
        xv, yv = batch()                                   # held-out batch: kept by the bug below
        val_loss = nn.functional.mse_loss(model(xv), yv)   # BUG: no torch.no_grad()
        if args.item:
            history.append(val_loss.item())
        else:
            history.append(val_loss)                        # BUG: keeps the graph
        if step == 0 and not args.item:
            walked = saved_tensor_bytes(val_loss, param_ptrs)
            if walked != formula:
                print(f"torch_keep_loss: graph holds {walked} bytes, formula says {formula}",
                      file=sys.stderr)
                return 2
        if step == 0:
            print(f"EXPECTED_GROWTH_BYTES_PER_STEP={expected}", file=sys.stderr, flush=True)
        leakproof.metric(loss=loss.item())
        leakproof.step()
        rss.append(rss_bytes())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    elapsed = time.monotonic() - t0
    n = len(rss) - 1 - WARMUP_STEPS
    measured = (rss[-1] - rss[WARMUP_STEPS]) / n if n > 0 else 0.0
    print(f"MEASURED_GROWTH_BYTES_PER_STEP={measured:.0f}", file=sys.stderr)
    print(f"steps={args.steps} seconds={elapsed:.1f} rss_end={rss[-1]}", file=sys.stderr)
    if args.check:
        tolerance = 0.10 * formula   # 10% of the leak; an absolute bound for --item
        if abs(measured - expected) > tolerance:
            print(f"torch_keep_loss: measured {measured:.0f} B/step, expected {expected}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

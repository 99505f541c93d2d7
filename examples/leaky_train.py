#!/usr/bin/env python3
"""
leaky_train.py — the bundled leakproof demo: a short PyTorch training loop
with a classic leak, and the same loop fixed.

    leakproof run -- python3 examples/leaky_train.py           # leaks
    leakproof run -- python3 examples/leaky_train.py --fixed   # does not

It trains a small network on synthetic data for about 20 seconds on one CPU
thread. After each training step it scores a held-out batch to follow the
validation loss, and keeps that loss in a list:

    val_loss = loss_fn(model(x_val), y_val)
    history.append(val_loss)            # <-- the bug

A loss tensor is not a number: it carries its autograd graph, and a graph
no backward() has run through still holds every activation the forward pass
saved for it (here the whole input batch, 1 MiB). Keeping the tensor keeps
all of it, one graph per step, so memory grows by over 1 MiB a step until the
job dies. The fix (--fixed) keeps the number instead, and scores under
torch.no_grad() so no graph is built at all:

    with torch.no_grad():
        val_loss = loss_fn(model(x_val), y_val)
    history.append(val_loss.item())

The same mistake hides in `total_loss += loss`, in lists of outputs kept
for metrics, and in anything else that keeps a tensor with a grad_fn.

Needs torch. Marks each step for leakproof when run under it (the client is
put on PYTHONPATH by `leakproof run`); prints "Epoch N/M" lines too, for
--step-regex.
"""
import argparse
import sys
import time

import torch
import torch.nn as nn

try:
    import leakproof            # present under `leakproof run`; optional
except ImportError:
    leakproof = None

BATCH = 1024
FEATURES = 256
HIDDEN = 16


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixed", action="store_true", help="keep numbers, not tensors")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--steps-per-epoch", type=int, default=80)
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()
    w_true = torch.randn(FEATURES, 1) / FEATURES ** 0.5

    def batch():
        x = torch.randn(BATCH, FEATURES)
        return x, torch.relu(x @ w_true) + 0.05 * torch.randn(BATCH, 1)

    history = []
    t0 = time.monotonic()
    for epoch in range(1, args.epochs + 1):
        print(f"Epoch {epoch}/{args.epochs}", flush=True)
        for _ in range(args.steps_per_epoch):
            model.train()
            x, y = batch()
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

            model.eval()
            x_val, y_val = batch()
            if args.fixed:
                with torch.no_grad():                       # FIX: no graph at all
                    val_loss = loss_fn(model(x_val), y_val)
                history.append(val_loss.item())             # FIX: a float, not a tensor
            else:
                val_loss = loss_fn(model(x_val), y_val)
                history.append(val_loss)                    # BUG: keeps graph + activations
            if leakproof:
                leakproof.step()
                leakproof.metric(loss=loss.item(), val_loss=float(val_loss))
        recent = history[-args.steps_per_epoch:]
        mean = sum(float(v) for v in recent) / len(recent)
        print(f"  train loss {loss.item():.4f}  val loss {mean:.4f}  "
              f"({time.monotonic() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

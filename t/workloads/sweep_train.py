"""
sweep_train.py — a small PyTorch training job for sweeps: a few dozen steps
of a two-layer network on synthetic data, reporting its validation loss.

    sweep_train.py [--keep loss|item] [--width N] [--steps N] [--lr X]
                   [--extra-mib M]

--keep loss keeps every step's held-out loss tensor, graph and all (the
classic leak, about 1 MiB a step); --keep item keeps the number. --width
sets the hidden layer; --extra-mib holds M MiB more (touched) for the whole
job, a stand-in for a larger model or batch. Prints
"val_loss=<x>" at the end and reports it with leakproof.result().

objective(params) is the same job as a function, for the in-process Optuna
study that the sweep replaces (t/workloads/optuna_inprocess.py): with
leak_across_calls, every call keeps its model in a module-level cache, as
Keras sessions and cached graphs do across trials.
"""
import argparse
import sys

import torch
import torch.nn as nn

try:
    import leakproof
except ImportError:
    leakproof = None

FEATURES = 256
BATCH = 1024
_cache = []


def objective(width, lr=0.05, steps=40, keep="item", leak_across_calls=False, step=None, extra_mib=0):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    extra = torch.ones(int(extra_mib * (1 << 20)) // 4)
    model = nn.Sequential(nn.Linear(FEATURES, width), nn.ReLU(), nn.Linear(width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    w_true = torch.randn(FEATURES, 1) / FEATURES ** 0.5
    history = []
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES)
        y = x @ w_true
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xv = torch.randn(BATCH, FEATURES)
        val = loss_fn(model(xv), xv @ w_true)
        history.append(val if keep == "loss" else val.item())
        if step:
            step()
    if leak_across_calls:
        _cache.append((model, opt, history, extra))
    return float(history[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", choices=["loss", "item"], default="item")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--extra-mib", type=float, default=0)
    args = ap.parse_args()
    v = objective(args.width, args.lr, args.steps, args.keep,
                  step=leakproof.step if leakproof else None, extra_mib=args.extra_mib)
    print("val_loss=%.6f" % v, flush=True)
    if leakproof:
        leakproof.result(val_loss=v)


if __name__ == "__main__":
    sys.exit(main())

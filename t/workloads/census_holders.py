#!/usr/bin/env python3
"""
census_holders.py — jobs that keep something each step in a different kind
of holder, for the object census's containers (docs/internals/census.md).
None imports leakproof unless --client: the census comes from the startup
hook.

    torch      a small LSTM trained on random batches, keeping each step's
               loss (the tensor, with its graph) in the module global
               `history` (with --item: loss.item(), nothing grows)
    arrays     a module-level list `frames` of numpy arrays (8 KiB each)
    classlog   a class attribute `Recorder.log`, a list of per-step dicts
    attr       an instance attribute `Trainer.seen` of a Trainer that is a
               local of main()
    closure    a list held only by a closure cell of `remember`
    cache      an unbounded functools.cache `features(i)` of numpy arrays
    bounded    functools.lru_cache(maxsize=32) `features(i)`: full after 32
               steps, never growing after
    odd        as arrays, with classes that trouble a census: one whose
               metaclass makes it unhashable, one whose __module__ is no
               string, many instances of each
    --steps N, --sleep S (seconds after each step), --client (mark steps),
    --batch B (torch: the batch; each kept loss keeps its graph, ~B KiB)

Prints "done N" at the end.
"""
import argparse
import functools
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("kind", choices=("torch", "arrays", "classlog", "attr", "closure", "cache", "bounded", "odd"))
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--sleep", type=float, default=0.02)
ap.add_argument("--item", action="store_true")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--client", action="store_true")
args = ap.parse_args()

if args.client:
    import leakproof
    mark_step = leakproof.step
else:
    def mark_step():
        pass

import numpy as np  # noqa: E402

history = []
frames = []


class Recorder:
    log = []


class Trainer:
    def __init__(self):
        self.seen = []

    def see(self, x):
        self.seen.append(x)


class Unhashable(type):
    def __eq__(cls, other):             # and so no __hash__: its classes are unhashable
        return cls is other


class Odd(metaclass=Unhashable):
    pass


class NoModule:
    __module__ = property(lambda self: 1 / 0)


odd = []


def make_remember():
    kept = []

    def remember(x):
        kept.append(x)
    return remember


remember = make_remember()


@functools.cache
def features(i):
    return np.full(1024, float(i))


@functools.lru_cache(maxsize=32)
def bounded_features(i):
    return np.full(1024, float(i))


def torch_job():
    import torch
    import torch.nn as nn
    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 16, batch_first=True)
            self.out = nn.Linear(16, 1)

        def forward(self, x):
            h, _ = self.lstm(x)
            return self.out(h[:, -1])

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(args.steps):
        x = torch.randn(args.batch, 6, 8)
        loss = nn.functional.mse_loss(model(x), x.sum(dim=(1, 2)).unsqueeze(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item() if args.item else loss)
        mark_step()
        time.sleep(args.sleep)
    return len(history)


def main():
    trainer = Trainer()
    if args.kind == "torch":
        print("done %d" % torch_job(), flush=True)
        return
    for i in range(args.steps):
        if args.kind in ("arrays", "odd"):
            frames.append(np.full(1024, float(i)))
            if args.kind == "odd" and i < 200:
                odd.extend((Odd(), NoModule()))
        elif args.kind == "classlog":
            Recorder.log.append({"step": i, "loss": 1.0 / (i + 1), "lr": 0.1})
        elif args.kind == "attr":
            trainer.see({"step": i, "x": [i, i + 1]})
        elif args.kind == "closure":
            remember([i, float(i), str(i)])
        elif args.kind == "cache":
            features(i)
        elif args.kind == "bounded":
            bounded_features(i)
        mark_step()
        time.sleep(args.sleep)
    print("done %d" % args.steps, flush=True)


main()
sys.exit(0)

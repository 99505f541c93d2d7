#!/usr/bin/env python3
"""
census_train.py — a small real PyTorch training loop for the object census
(docs/internals/census.md): each step trains on a batch and keeps its loss
in `history`, either the tensor itself (the classic leak: every kept loss
holds its autograd graph) or loss.item() (a float: nothing grows).

    --item          keep loss.item(): no leak
    --scope global  history is a module global (default)
    --scope local   history is a local of main()
    --scope attr    history is an attribute of a Trainer object
    --steps N       training steps (default 400)
    --sleep S       seconds to pause after each step (default 0.01)
    --no-client     never import leakproof (the census must come from the
                    startup hook of `run --census`); no steps are marked

Units: seconds. Prints "done N" at the end.
"""
import argparse
import sys
import time

import torch
import torch.nn as nn

ap = argparse.ArgumentParser()
ap.add_argument("--item", action="store_true")
ap.add_argument("--scope", choices=("global", "local", "attr"), default="global")
ap.add_argument("--steps", type=int, default=400)
ap.add_argument("--sleep", type=float, default=0.01)
ap.add_argument("--no-client", action="store_true")
args = ap.parse_args()

if args.no_client:
    def mark_step():
        pass
else:
    import leakproof

    def mark_step():
        leakproof.step()

torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)


def train_step():
    x = torch.randn(32, 16)
    y = x.sum(dim=1, keepdim=True)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


class Trainer:
    def __init__(self):
        self.history = []


def keep(store, loss):
    store.append(loss.item() if args.item else loss)


history = []


def main():
    history_local = []
    trainer = Trainer()
    store = {"global": history, "local": history_local, "attr": trainer.history}[args.scope]
    for _ in range(args.steps):
        keep(store, train_step())
        mark_step()
        time.sleep(args.sleep)
    print("done %d" % len(store), flush=True)


main()
sys.exit(0)

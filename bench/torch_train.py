#!/usr/bin/python3
"""
torch_train.py — the PyTorch training loops of bench/trace_torch, on random
data, SGD with momentum, one intra-op thread, no leak:
    cnn   two conv layers and two linear ones on 32x32 images (CIFAR-sized),
          batch 64: some 10 steps/s, tens of MiB allocated per step
    mlp   784-256-10 on batch 128 (MNIST-sized): hundreds of steps/s, where
          the Python and allocation overhead per step weighs the most It marks every step with
leakproof.step() when run under leakproof, and at the end prints on stderr
    STEPS_PER_S=<steps per second of the loop, the first WARMUP steps excluded>

    --model M     cnn or mlp (default cnn)
    --seconds S   train for S seconds (default 20)
    --heap N      also keep N small Python objects alive (a large heap, for
                  the census's cost: bench/census_cost)
"""
import argparse
import sys
import time
import types

import torch
import torch.nn as nn

try:
    import leakproof
except ImportError:  # not under leakproof
    leakproof = types.SimpleNamespace(step=lambda *a, **k: None)

WARMUP = 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--heap", type=int, default=0)
    args = ap.parse_args()
    heap = [[i] for i in range(args.heap)]  # noqa: F841  lists: tracked by the collector
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.model == "cnn":
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10))
        shape, batch = (3, 32, 32), 64
    else:
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        shape, batch = (1, 28, 28), 128
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    step, t_warm = 0, None
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.seconds:
        x = torch.randn(batch, *shape)
        y = torch.randint(0, 10, (batch,))
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        leakproof.step()
        step += 1
        if step == WARMUP:
            t_warm = time.monotonic()
    t_end = time.monotonic()
    rate = (step - WARMUP) / (t_end - t_warm) if t_warm and t_end > t_warm else 0.0
    print("STEPS_PER_S=%.3f" % rate, file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

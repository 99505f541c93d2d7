#!/usr/bin/env python3
"""
resume_train.py — a PyTorch training loop that survives being stopped and
started again: the pattern to copy for jobs run with `leakproof run --restart`.

    python3 examples/resume_train.py                  # runs to the end
    python3 examples/resume_train.py --leak-mib 2     # leaks 2 MiB a step
    leakproof run --restart ... -- python3 examples/resume_train.py --leak-mib 2

Stopped and resumed any number of times, at any point, by any means (asked
with the stop signal, or SIGKILLed by a hard limit or the kernel's OOM
killer), it ends with exactly the same weights as a run never interrupted,
and prints them as its last line:

    final weights sha256 <64 hex digits>

How leakproof restarts a job: when a soft memory limit is reached or a
restart schedule says so, it sends the job's main process the stop signal
named in LEAKPROOF_STOP_SIGNAL (SIGTERM unless told otherwise), waits for
the job to end, and runs the same command again with LEAKPROOF_RESTART one
higher. A hard limit (or the kernel) kills with SIGKILL, which no program can
catch. The job's part:

1. Resume. On start, load the checkpoint if there is one: model, optimizer
   (momentum, Adam's moments and step count: the optimizer is part of the
   training state) and the global step. Nothing else comes from the run
   that was stopped, so whatever it leaked is gone: that is the point of
   restarting a leaking job.

2. Be deterministic from the step number alone. Every batch is drawn from
   its own generator, seeded from the seed and the global step
   (torch.Generator().manual_seed(f(seed, step))), never from one global
   stream, whose position a restart would lose. A real job does the same
   with its sampler (shuffle each epoch with a seed derived from the epoch,
   skip the batches of the epoch already done) and its augmentations.

3. Checkpoint atomically, every --checkpoint-every steps and at the end:
   write a temporary file in the checkpoint's directory, flush and fsync
   it, os.replace() it over the old one, fsync the directory. A SIGKILL at
   any moment then leaves either the old checkpoint or the new one, never
   half of one; the steps after the last checkpoint are simply done again,
   identically.

4. Stop when asked. Poll leakproof.stop_requested() at a step boundary (the
   first call installs the handler for the stop signal; before that the
   signal kills as usual). When it turns True: save a checkpoint and exit
   with status 0. Exit 0 tells leakproof "stopped as asked" (it knows it
   asked); another status, or death by the signal, says the job did not
   stop cleanly. Do not save from a signal handler
   or an on_stop() callback: those run in the middle of a step, between two
   bytecodes, with the model half updated. on_stop() is for short cleanup.

5. Report steps by their global number, leakproof.step(global_step), and
   epochs by theirs, leakproof.epoch(n), so the numbers continue across
   restarts instead of starting again at 1. The "Epoch N/M" lines serve
   --step-regex.

A checkpoint of the finished run is kept: run again, the script prints the
same final line without training (a stop request that raced with the end of
training costs nothing). Delete the checkpoint to start over. A checkpoint
made with another --seed, --lr, --batch or model size is refused.

--leak-mib X leaks about X MiB a step the way real jobs do: each step scores
a held-out batch of X MiB without torch.no_grad() and keeps the loss tensor,
whose autograd graph holds the whole batch (see leaky_train.py). The leak
changes no weight and is not in the checkpoint, so a restart gives its
memory back.

Needs torch. Uses the leakproof client when it is importable (`leakproof
run` puts it on PYTHONPATH) and runs the same without it. Exit status: 0
when finished or stopped on request, 2 for a bad command line or an
incompatible checkpoint.
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.nn as nn

try:
    import leakproof            # present under `leakproof run`; optional
except ImportError:
    leakproof = None

FEATURES = 256
HIDDEN = 16
MIB = 1 << 20
FORMAT = 1                      # of the checkpoint dictionary


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Checkpoint-and-resume training that survives leakproof restarts.")
    ap.add_argument("--checkpoint", default="checkpoint.pt", metavar="PATH",
                    help="checkpoint to resume from and save to (default: %(default)s)")
    ap.add_argument("--checkpoint-every", type=int, default=10, metavar="N",
                    help="save every N steps; 0: only when stopped and at the end "
                         "(default: %(default)s)")
    ap.add_argument("--epochs", type=int, default=5, metavar="M",
                    help="epochs in all (default: %(default)s)")
    ap.add_argument("--steps-per-epoch", type=int, default=60, metavar="S",
                    help="steps in an epoch (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=128, help="batch size (default: %(default)s)")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the model and data (default: %(default)s)")
    ap.add_argument("--leak-mib", type=float, default=0.0, metavar="X",
                    help="keep about X MiB a step alive, as an autograd graph (default: 0)")
    ap.add_argument("--step-time", type=float, default=0.0, metavar="SECONDS",
                    help="sleep this long in each step, to slow the loop down (default: 0)")
    args = ap.parse_args(argv)
    if args.steps_per_epoch < 1 or args.batch < 1:
        ap.error("--steps-per-epoch and --batch must be at least 1")
    if min(args.checkpoint_every, args.epochs, args.leak_mib, args.step_time) < 0:
        ap.error("--checkpoint-every, --epochs, --leak-mib and --step-time must not be negative")
    return args


def config(args):
    """What a checkpoint must match to be resumed: what changes the weights.
    --epochs may change (train longer), --steps-per-epoch too (the batches
    depend on the global step only)."""
    return {"format": FORMAT, "seed": args.seed, "lr": args.lr, "batch": args.batch,
            "features": FEATURES, "hidden": HIDDEN}


def make_model(seed):
    torch.manual_seed(seed)     # the initial weights; nothing else uses the global RNG
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))


class Data:
    """Synthetic regression data. Batch number `step` is a function of
    (seed, step) alone, whichever process draws it."""

    def __init__(self, seed):
        self.seed = seed
        g = torch.Generator().manual_seed(seed)
        self.w_true = torch.randn(FEATURES, 1, generator=g) / FEATURES ** 0.5

    def batch(self, step, rows, stream=0):
        # One generator per (stream, step): 0 training, 1 held-out, 2 final score.
        g = torch.Generator().manual_seed((self.seed * 3 + stream) * 1_000_003 + step)
        x = torch.randn(rows, FEATURES, generator=g)
        y = torch.relu(x @ self.w_true) + 0.05 * torch.randn(rows, 1, generator=g)
        return x, y


def fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass                    # some filesystems refuse fsync on a directory
    finally:
        os.close(fd)


def save_checkpoint(path, state):
    """Write state to path atomically: a reader (or the next start, after a
    SIGKILL at any moment) sees the old checkpoint or the new one, whole."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    tmp = path + ".tmp"         # same directory, so os.replace() is a rename
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)        # make the rename itself durable


def load_checkpoint(path):
    if not os.path.exists(path):
        return None
    # This script's own file, hence trusted. (weights_only=True reads it on
    # torch 2.x, but older versions refuse the optimizer's float settings.)
    return torch.load(path, map_location="cpu", weights_only=False)


def weights_sha256(model):
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():     # the model's fixed order
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    steps_per_epoch = args.steps_per_epoch
    total = args.epochs * steps_per_epoch

    model = make_model(args.seed)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.MSELoss()
    data = Data(args.seed)

    step = 0                    # steps done, and the number of the next batch
    state = load_checkpoint(args.checkpoint)
    if state is not None:
        if state.get("config") != config(args):
            print("resume_train: %s was made with %s, not %s; delete it to start over"
                  % (args.checkpoint, state.get("config"), config(args)), file=sys.stderr)
            return 2
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
        print("resumed from %s at step %d (epoch %d), restart %d"
              % (args.checkpoint, step, state["epoch"],
                 leakproof.restart() if leakproof else 0), flush=True)

    first_step = step

    def checkpoint():
        save_checkpoint(args.checkpoint, {
            "config": config(args), "step": step,
            "epoch": step // steps_per_epoch,
            "model": model.state_dict(), "optimizer": opt.state_dict()})

    # The leak: held-out losses kept as tensors, graphs and batches with them.
    leak_rows = int(args.leak_mib * MIB / (4 * FEATURES) + 0.5)
    kept = []
    # Install the stop handler now, before the first step: from here on the
    # stop signal no longer kills, it sets the flag polled below.
    stop_requested = leakproof.stop_requested if leakproof else (lambda: False)
    stop_requested()
    saved_at = step if state is not None else None
    t0 = time.monotonic()

    while step < total:
        if stop_requested():            # at a step boundary: a consistent state
            if saved_at != step:
                checkpoint()
            print("stopped at step %d of %d, as asked: checkpoint in %s"
                  % (step, total, args.checkpoint), flush=True)
            return 0                    # stopped as asked: not a failure
        if step % steps_per_epoch == 0 or step == first_step:
            print("Epoch %d/%d" % (step // steps_per_epoch + 1, args.epochs), flush=True)

        x, y = data.batch(step, args.batch)
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if leak_rows:
            x_val, y_val = data.batch(step, leak_rows, stream=1)
            kept.append(loss_fn(model(x_val), y_val))   # BUG on purpose: keeps the graph
        if args.step_time:
            time.sleep(args.step_time)
        step += 1

        if leakproof:
            leakproof.step(step)
            leakproof.metric(loss=loss.item())
        if step % steps_per_epoch == 0:
            if leakproof:
                leakproof.epoch(step // steps_per_epoch)
            print("  step %d  loss %.4f  (%.1f s)" % (step, loss.item(), time.monotonic() - t0),
                  flush=True)
        if args.checkpoint_every and step % args.checkpoint_every == 0:
            checkpoint()
            saved_at = step

    if saved_at != step:
        checkpoint()            # the finished run, so that running again costs nothing
    with torch.no_grad():
        x, y = data.batch(0, 1024, stream=2)
        final_loss = loss_fn(model(x), y).item()
    if leakproof:
        leakproof.result(loss=final_loss)
    print("final loss %.6f" % final_loss)
    print("final weights sha256 %s" % weights_sha256(model), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

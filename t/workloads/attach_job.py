"""
A job started without leakproof, for `leakproof attach`: a main process and
a pool of worker processes; at each step every worker does its work and the
main process writes "step N" to a log file (flushed). Modes:

  leak     each worker keeps 256 KiB more at every step (touched pages)
  bounded  each worker keeps a cache of at most 8 entries of 256 KiB: it
           grows for 8 steps, then stays level
  rotate   as leak, and the log is rotated (renamed, a new file at the path)
           at step 20, then truncated in place at step 40

usage: attach_job.py MODE LOG STEPS [WORKERS] [STEP_SECONDS]

It writes "ready" to LOG before its first step, then waits for a file
LOG.go to exist (so that a test can attach first), and prints
EXPECTED_GROWTH_BYTES_PER_STEP=N on stdout (the whole job's, while it
grows). STEPS 0: forever. A SIGURG to any of its processes is written to LOG.urg
(leakproof wakes its census hook with SIGURG in the jobs it starts, never in
one it attached to).
"""
import multiprocessing as mp
import os
import signal
import sys
import time

CHUNK = 256 * 1024


def worker(conn, mode):
    kept = []
    while True:
        msg = conn.recv()
        if msg is None:
            return
        b = bytearray(CHUNK)
        for i in range(0, CHUNK, 4096):   # touched: resident, private
            b[i] = 1
        kept.append(b)
        if mode == "bounded" and len(kept) > 8:
            kept.pop(0)
        conn.send(len(kept))


def main():
    mode, log, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    nworkers = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    step_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0.05

    def urgent(signum, frame):
        with open(log + ".urg", "a") as u:
            u.write(f"SIGURG to {os.getpid()}\n")
    signal.signal(signal.SIGURG, urgent)     # inherited by the forked workers
    ctx = mp.get_context("fork")
    pipes, procs = [], []
    for _ in range(nworkers):
        a, b = ctx.Pipe()
        p = ctx.Process(target=worker, args=(b, "bounded" if mode == "bounded" else "leak"))
        p.start()
        pipes.append(a)
        procs.append(p)
    print(f"EXPECTED_GROWTH_BYTES_PER_STEP={nworkers * CHUNK}", flush=True)
    f = open(log, "a")
    f.write("ready\n")
    f.flush()
    while not os.path.exists(log + ".go"):
        time.sleep(0.02)
    n = 0
    while steps == 0 or n < steps:
        n += 1
        for c in pipes:
            c.send(1)
        for c, p in zip(pipes, procs):
            while not c.poll(0.1):
                if not p.is_alive():   # killed (the OOM killer): the job fails
                    print(f"worker {p.pid} died: {p.exitcode}", file=sys.stderr, flush=True)
                    os._exit(1)   # not sys.exit: its atexit would wait for the other workers
            c.recv()
        if mode == "rotate" and n == 20:
            f.close()
            os.rename(log, log + ".1")
            f = open(log, "a")
        if mode == "rotate" and n == 40:
            f.truncate(0)
            f.seek(0)
        f.write(f"step {n}\n")
        f.flush()
        time.sleep(step_s)
    for c in pipes:
        c.send(None)
    for p in procs:
        p.join()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:   # a worker killed (the OOM killer): the job fails, at once
        print(f"attach_job: {e!r}", file=sys.stderr, flush=True)
        os._exit(1)   # not sys.exit: its atexit would wait for the other workers

"""
workers_job.py — the job that bench/sampler_cost runs under each monitor.

A parent that forks WORKERS worker processes; each fills MIB MiB (numpy when
it can be imported, bytes otherwise, touched either way) and then sleeps,
so the tree has a fixed shape and steady memory: what differs between runs
is the monitor. The parent also measures the monitor: it is the parent of
this process (leakproof, timer_loop and mprof all fork the job directly),
and its CPU time is read from /proc/PPID/task/*/schedstat (first field: ns
on CPU, summed over its threads) at the job's start, when every worker is
ready, and just before the job ends SECONDS after it started.

    workers_job.py OUT_JSON [--workers 4] [--mib 128] [--seconds 11]
                   [--steps-hz 0] [--step-kib 64] [--monitor-file FILE]

With --monitor-file, the monitor is not the parent but the process whose pid
is written to FILE (`leakproof attach`, started after the job): the job
waits for it before it starts its clock and forks its workers.

With --steps-hz N, once the workers are ready the parent marks N steps a
second through leakproof's channel (a "step" line on $LEAKPROOF_FD, when
there is one) and keeps --step-kib KiB more (touched) at each: a training
loop that grows slowly, for the sampler's reads at step boundaries.

OUT_JSON receives the readings; nothing is printed (the monitors pass the
job's output through).
"""
import argparse
import json
import os
import signal
import time


def monitor_cpu_ns(pid):
    """CPU time of every thread of pid, ns, from schedstat; and thread count."""
    total, nthreads = 0, 0
    task_dir = "/proc/%d/task" % pid
    for tid in os.listdir(task_dir):
        try:
            with open("%s/%s/schedstat" % (task_dir, tid)) as f:
                total += int(f.read().split()[0])
                nthreads += 1
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended since the listing
    return total, nthreads


def wait_for_monitor(path, timeout=30.0):
    """The pid written to path, once it is there (and the process is)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(path) as f:
                pid = int(f.read().strip() or "0")
            if pid > 0 and os.path.exists("/proc/%d/task" % pid):
                return pid
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.01)
    raise SystemExit("workers_job: no monitor pid in %s after %g s" % (path, timeout))


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def worker(nbytes, ready_fd):
    try:
        import numpy
        block = numpy.ones(nbytes // 8, dtype=numpy.float64)
    except ImportError:
        block = b"\x01" * nbytes
    os.write(ready_fd, b"r")
    os.close(ready_fd)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while block is not None:   # held until SIGTERM
        signal.pause()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=11.0)
    ap.add_argument("--steps-hz", type=float, default=0.0)
    ap.add_argument("--step-kib", type=int, default=64)
    ap.add_argument("--monitor-file")
    a = ap.parse_args()

    monitor = os.getppid()
    if a.monitor_file:
        monitor = wait_for_monitor(a.monitor_file)
    t_start = time.monotonic()
    cpu_start, _ = monitor_cpu_ns(monitor)
    try:
        import numpy  # noqa: F401  (loaded before the fork, shared by the workers)
        have_numpy = True
    except ImportError:
        have_numpy = False

    rfd, wfd = os.pipe()
    pids = []
    for _ in range(a.workers):
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            worker(a.mib << 20, wfd)
        pids.append(pid)
    os.close(wfd)
    got = 0
    while got < a.workers:
        chunk = os.read(rfd, a.workers)
        if not chunk:
            break
        got += len(chunk)
    t_ready = time.monotonic()
    cpu_ready, _ = monitor_cpu_ns(monitor)

    steps = 0
    if a.steps_hz > 0:
        try:
            fd = int(os.environ.get("LEAKPROOF_FD", "-1"))
        except ValueError:
            fd = -1
        kept = []
        period = 1.0 / a.steps_hz
        while time.monotonic() + period < t_start + a.seconds:
            kept.append(b"\x01" * (a.step_kib << 10))
            if fd >= 0:
                os.write(fd, b"step\n")
            steps += 1
            time.sleep(max(0.0, t_ready + steps * period - time.monotonic()))
    time.sleep(max(0.0, t_start + a.seconds - time.monotonic()))
    t_end = time.monotonic()
    cpu_end, nthreads = monitor_cpu_ns(monitor)

    with open(a.out, "w") as f:
        json.dump({
            "monitor_pid": monitor, "monitor_comm": comm(monitor), "monitor_threads": nthreads,
            "numpy": have_numpy, "workers_ready": got, "steps": steps,
            "t_start": t_start, "t_ready": t_ready, "t_end": t_end,
            "cpu_start_ns": cpu_start, "cpu_ready_ns": cpu_ready, "cpu_end_ns": cpu_end,
        }, f)
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    for pid in pids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""
lifecycle.py — jobs that end in the ways a supervisor must get right.

    lifecycle.py exit N          prints, then exits with status N
    lifecycle.py kill            kills itself with SIGKILL (as the OOM killer would)
    lifecycle.py segv            dereferences NULL through ctypes: a real SIGSEGV
                                 (core dumps off)
    lifecycle.py trap [SECONDS]  prints "ready", then waits up to SECONDS (30)
                                 for SIGTERM or SIGINT; then waits half a
                                 second more, prints "got SIGTERM xN" (or
                                 SIGINT) with N the times a signal was
                                 delivered, and exits 0; exits 3 if no signal
                                 came
    lifecycle.py orphan MARKER [--setsid] [--crash]
                                 forks a worker that ignores SIGTERM and
                                 sleeps 600 s with MARKER in its command line
                                 (stdout and stderr still inherited, as
                                 DataLoader workers have them), waits until it
                                 is up, prints its pid and dies: exits 0, or
                                 with --crash SIGKILLs itself. --setsid puts
                                 the worker in a session (and process group)
                                 of its own, out of reach of a signal to the
                                 job's process group.
"""
import ctypes
import os
import resource
import signal
import sys
import time


def trap(seconds):
    # Count deliveries, not just the first: the wake-up fd gets one byte per
    # signal the process receives, even when Python runs the handler once.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    got = []

    def on_signal(signum, frame):
        got.append(signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not got:
        time.sleep(0.05)
    if not got:
        print("no signal came", flush=True)
        return 3
    time.sleep(0.5)                  # any duplicate arrives meanwhile
    os.set_blocking(wake_r, False)
    try:
        deliveries = len(os.read(wake_r, 4096))
    except BlockingIOError:
        deliveries = 0
    print(f"got {signal.Signals(got[0]).name} x{deliveries}", flush=True)
    return 0


def orphan(marker, setsid, crash):
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        if setsid:
            os.setsid()
        os.set_inheritable(ready_w, True)
        code = ("import os, signal, sys, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "fd = int(sys.argv[1])\n"
                "os.write(fd, b'u'); os.close(fd)\n"
                "time.sleep(600)\n")
        os.execv(sys.executable, [sys.executable, "-c", code, str(ready_w), marker])
    os.close(ready_w)
    os.read(ready_r, 1)
    print(f"worker {pid} up", flush=True)
    if crash:
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)


def main():
    mode = sys.argv[1]
    if mode == "exit":
        print(f"exiting with {sys.argv[2]}", flush=True)
        return int(sys.argv[2])
    if mode == "kill":
        print("killing myself", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)
        return 0
    if mode == "segv":
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        print("crashing", flush=True)
        ctypes.string_at(0)
        return 0
    if mode == "trap":
        return trap(float(sys.argv[2]) if len(sys.argv) > 2 else 30)
    if mode == "orphan":
        return orphan(sys.argv[2], "--setsid" in sys.argv[3:], "--crash" in sys.argv[3:])
    print(f"lifecycle: unknown mode '{mode}'", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

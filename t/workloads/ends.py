"""
ends.py — jobs that end in the ways `leakproof run` must name (the cause
vocabulary of docs/internals/causes.md). Standard library only.

    ends.py say CODE LINE...   prints each LINE on stderr (as a framework
                               prints its error), marks a step, exits CODE
    ends.py segv               marks a step, works half a second (so there are
                               samples, even under valgrind), then dereferences
                               NULL (SIGSEGV)
    ends.py hog MIB            marks a step per MIB MiB it keeps (touched),
                               every 20 ms, until something stops it
"""
import ctypes
import sys
import time

import leakproof


def say(code, lines):
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    leakproof.step()
    sys.exit(int(code))


def segv():
    leakproof.step()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        pass
    ctypes.string_at(0)


def hog(mib):
    kept = []
    while True:
        kept.append(bytearray(int(mib) << 20))   # zero-filled: every page touched
        leakproof.step()
        time.sleep(0.02)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "say":
        say(args[0], args[1:])
    elif mode == "segv":
        segv()
    elif mode == "hog":
        hog(args[0])
    else:
        sys.exit(f"ends.py: unknown mode {mode!r}")

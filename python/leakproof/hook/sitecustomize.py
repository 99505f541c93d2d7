"""sitecustomize.py — the object census's startup hook: in a Python job
that never imports leakproof, starts the census (`leakproof run --census`)
or waits for the supervisor to wake it (without --census: dormant), then
runs the user's own sitecustomize, if there is one, as if this file were
not there (docs/internals/census.md).

The supervisor puts this file's directory first on the job's PYTHONPATH
unless --no-census. Python's site module imports the first sitecustomize
it finds on sys.path: this one. With LEAKPROOF_CENSUS_WAKE=SIGURG (no
--census) it installs a handler for that signal, when the program's is the
default, and does nothing else (not even import leakproof): the supervisor
sends the signal to the job's processes when their memory turns to growth,
and the handler starts the census's thread. With --census it says its pid
on the channel (`census 0 * hook=PID`) and starts the census. Then it
looks for the next sitecustomize on the rest of sys.path and executes it
under the name sitecustomize, so the user's hook still runs, with its own
__file__, and its errors surface the way site reports them. Nothing here
raises: a failed census start is silent.
"""

import os
import sys


def _start_census():
    try:
        import leakproof
        leakproof._census_start(thread=True)
    except Exception:
        pass


def _woken(signum, frame):
    # in the main thread, between two bytecodes of whatever it ran: take no
    # lock it may hold; the census starts in a thread of its own
    try:
        import _thread
        _thread.start_new_thread(_start_census, ())
    except Exception:
        pass


def _hook():
    try:
        wake = os.environ.get("LEAKPROOF_CENSUS_WAKE", "")
        if wake:
            # dormant: no import, no thread, nothing but a signal handler
            if not os.environ.get("LEAKPROOF_FD"):
                return
            import signal
            sig = getattr(signal, wake, None)
            if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _woken)  # else the program's own: not ours to take
                # system calls the signal falls in are restarted, not failed
                # with EINTR in C code that does not expect it
                signal.siginterrupt(sig, False)
            return
        import leakproof
        if not leakproof.enabled() or leakproof._census_interval() is None:
            return
        leakproof._send("census 0 * hook=%d" % os.getpid())
        leakproof._census_start(thread=True)
    except Exception:
        pass


def _chain():
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = []
    for entry in sys.path:
        try:
            same = os.path.abspath(entry or os.curdir) == here
        except (TypeError, ValueError):
            same = False
        if not same:
            rest.append(entry)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)      # the user's errors go to site's report


_hook()
_chain()

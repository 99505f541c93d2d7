"""leakproof — the job-side client of the leakproof supervisor.

Under ``leakproof run``, a training script can say where its steps and
epochs end, report numbers to plot beside memory, report a sweep trial's
result and put named events on the timeline::

    import leakproof

    for epoch in range(epochs):
        for batch in loader:
            loss = train_step(batch)
            leakproof.step()
            leakproof.metric(loss=loss, lr=opt.param_groups[0]["lr"])
            leakproof.gpu_from_torch()
        leakproof.epoch()
    leakproof.result(accuracy=acc)

Stopping on request: leakproof may ask a job to stop (a soft memory limit, a
restart schedule) by sending its main process the signal named in
LEAKPROOF_STOP_SIGNAL (SIGTERM by default), then start it again with
LEAKPROOF_RESTART one higher. A job that wants to survive that polls at a
step boundary, saves a checkpoint and exits 0 (examples/resume_train.py)::

    start = load_checkpoint()                # steps done; 0 on the first start
    for step in range(start, total):
        train_step(step)
        leakproof.step(step + 1)
        if leakproof.stop_requested():
            save_checkpoint(step + 1)        # atomically: temp file, fsync, os.replace
            sys.exit(0)                      # "stopped as asked", not a failure

    leakproof.on_stop(lambda: leakproof.mark("stopping"))   # short cleanup only

The handler for that signal is installed by the first stop_requested() or
on_stop() called in the main thread, never on import: a job that never asks
keeps the signal's usual effect (SIGTERM kills it). It chains to a handler
the program installed earlier; forked children get the previous handling
back. Without leakproof, or without LEAKPROOF_STOP_SIGNAL, stop_requested()
is always False and on_stop() registers nothing.

Who holds it: under a supervisor that sets LEAKPROOF_CENSUS, importing this
module starts the object census (leakproof/census.py,
docs/internals/census.md): step() counts the live objects by type when one
is due (every 30 s by default, at most 1 % of the job's time) and names what
holds a type that keeps growing; `leakproof run --census` starts it without
an import, through a startup hook (leakproof/hook/sitecustomize.py). step()
also sends PyTorch's CUDA allocator figures when CUDA is initialised.

Pure Python, standard library only: the supervisor puts this package on the
job's PYTHONPATH, nothing needs installing. Without the supervisor
(LEAKPROOF_FD unset or not a usable pipe) every call does nothing, and no call
ever raises into the caller's code.

Protocol (docs/internals/clients.md): one UTF-8 text line per message, at most
4096 bytes with its newline, written with a single os.write() to the file
descriptor named by LEAKPROOF_FD. Lines that short are written atomically to
a pipe (PIPE_BUF), so messages from threads and from forked processes never
interleave.

Threads: calls are serialised by a lock. Processes: children made with
fork() (DataLoader workers, multiprocessing's "fork" method) inherit the
descriptor and their messages count like the parent's: a step() in each of
four workers is four steps. Children started fresh ("spawn", "forkserver")
do not inherit it and stay silent: the client checks that the descriptor is
still the pipe it first saw (LEAKPROOF_FD_INODE) before writing anything.
"""

import collections
import operator
import os
import re
import select
import signal
import stat
import sys
import threading

__all__ = [
    "step", "epoch", "metric", "result", "gpu", "gpu_from_torch", "mark",
    "enabled", "run_id", "restart", "stop_requested", "on_stop",
]
__version__ = "0.1.0"

MAX_LINE_BYTES = 4096           # a whole line, newline included
MAX_PAIRS = 32                  # NAME=VALUE pairs per line
MAX_NAME_BYTES = 63
MAX_COUNTER = 2 ** 63 - 1       # step and epoch numbers are int64

_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*\Z")
_NAME_FIRST_BAD = re.compile(r"[^A-Za-z_]")
_NAME_REST_BAD = re.compile(r"[^A-Za-z0-9_.:/-]")

# Reentrant: an on_stop() callback runs in the main thread between two
# bytecodes, possibly inside this thread's own _send(); it may send too.
_lock = threading.RLock()
_fd = None          # None: not looked at yet; -1: disabled; else the descriptor
_fd_id = None       # (st_dev, st_ino) of the pipe, checked before each write


def _reset_after_fork():
    # A lock held by another thread at fork() time stays held in the child.
    global _lock
    _lock = threading.RLock()
    _stop_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _pin_key():
    return "%s:%s" % (os.environ.get("LEAKPROOF_RUN", ""), os.environ.get("LEAKPROOF_FD", ""))


def _open_channel():
    """Return the descriptor to write to, or -1. Called once, under _lock."""
    global _fd_id
    value = os.environ.get("LEAKPROOF_FD", "").strip()
    if not (value.isascii() and value.isdigit()):
        return -1
    fd = int(value)
    try:
        st = os.fstat(fd)
        if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
            return -1
        import fcntl
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            return -1
    except (OSError, ValueError, ImportError):
        return -1
    ident = "%d:%d" % (st.st_dev, st.st_ino)
    # The first process of a run pins the pipe's identity in the environment;
    # processes started later (spawn, forkserver, exec) whose descriptor of
    # that number is something else stay silent instead of writing into it.
    key = _pin_key()
    pin = os.environ.get("LEAKPROOF_FD_INODE", "")
    if pin.rpartition("=")[0] == key:
        if pin.rpartition("=")[2] != ident:
            return -1
    else:
        os.environ["LEAKPROOF_FD_INODE"] = "%s=%s" % (key, ident)
    _fd_id = (st.st_dev, st.st_ino)
    return fd


def _channel():
    global _fd
    if _fd is None:
        _fd = _open_channel()
    return _fd


def _write_all(fd, data):
    """Write data whole; False when the channel is gone for good."""
    started = False
    while data:
        try:
            n = os.write(fd, data)
        except InterruptedError:
            continue
        except BlockingIOError:
            if not started:
                return True     # a full non-blocking pipe: drop this line
            # Half a line is out (a socket): finish it, or the next line
            # would be glued to it.
            try:
                if not select.select([], [fd], [], 1.0)[1]:
                    return False
            except (OSError, ValueError):
                return False
            continue
        except OSError:
            return False        # EPIPE, EBADF, EIO, ...
        started = True
        data = data[n:]
    return True


def _write_no_sigpipe(fd, data):
    # Python ignores SIGPIPE by default, so EPIPE comes back as an error.
    # A program that restored the default action would be killed by it:
    # block it in this thread around the write and discard it if raised.
    try:
        ignored = signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    except (AttributeError, ValueError):
        ignored = True
    if ignored or not hasattr(signal, "pthread_sigmask"):
        return _write_all(fd, data)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    try:
        ok = _write_all(fd, data)
        if not ok and hasattr(signal, "sigtimedwait"):
            signal.sigtimedwait({signal.SIGPIPE}, 0)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return ok


def _send(line):
    """Send one line (str, without its newline). Never raises."""
    global _fd
    try:
        data = line.encode("utf-8", "replace") + b"\n"
        if len(data) > MAX_LINE_BYTES:
            return
        with _lock:
            fd = _channel()
            if fd < 0:
                return
            try:
                st = os.fstat(fd)
            except OSError:
                _fd = -1
                return
            if (st.st_dev, st.st_ino) != _fd_id:
                _fd = -1        # closed and reused for something else
                return
            if not _write_no_sigpipe(fd, data):
                _fd = -1
    except Exception:           # never into the user's code
        pass


def _sanitize_name(name):
    name = str(name)[:MAX_NAME_BYTES]
    if _NAME_OK.match(name):
        return name
    if not name:
        return "_"
    return _NAME_FIRST_BAD.sub("_", name[0]) + _NAME_REST_BAD.sub("_", name[1:])


def _format_number(value):
    """repr() of the value as a float ('nan', 'inf', '-inf' included), or None."""
    try:
        return repr(float(value))
    except Exception:
        return None


def _pairs_lines(kind, values):
    """['kind a=1.0 b=2.0', ...]: the values that are numbers, in order, at
    most MAX_PAIRS to a line and lines of at most MAX_LINE_BYTES."""
    lines = []
    line, size, npairs = kind, len(kind) + 1, 0     # size counts the newline
    for name, value in values.items():
        number = _format_number(value)
        if number is None:
            continue
        # The supervisor refuses a line with an infinite value, or a NaN
        # outside `result` (a diverged trial's NaN result is kept): leave
        # such values out rather than lose the others on the line.
        if number in ("inf", "-inf") or (number == "nan" and kind != "result"):
            continue
        pair = " %s=%s" % (_sanitize_name(name), number)   # ASCII, < 100 bytes
        if npairs == MAX_PAIRS or size + len(pair) > MAX_LINE_BYTES:
            lines.append(line)
            line, size, npairs = kind, len(kind) + 1, 0
        line += pair
        size += len(pair)
        npairs += 1
    if npairs:
        lines.append(line)
    return lines


def _counter_line(kind, n):
    if n is None:
        return kind
    try:
        try:
            value = operator.index(n)
        except TypeError:
            f = float(n)
            value = int(f) if f.is_integer() else None
    except Exception:
        value = None
    if value is None or not 0 <= value <= MAX_COUNTER:
        return kind                         # still a step; let the supervisor number it
    return "%s %d" % (kind, value)


def enabled():
    """True when running under leakproof with a usable channel."""
    try:
        with _lock:
            return _channel() >= 0
    except Exception:
        return False


def run_id():
    """The supervisor's run id (LEAKPROOF_RUN), or None outside leakproof."""
    return os.environ.get("LEAKPROOF_RUN") or None


def restart():
    """How many times the supervisor restarted this job (LEAKPROOF_RESTART): 0
    on the first start, and outside leakproof."""
    try:
        return max(0, int(os.environ.get("LEAKPROOF_RESTART", "0")))
    except ValueError:
        return 0


# ---- stopping on request ----
#
# State, all touched from the main thread's signal handler too: only simple
# assignments and deque operations, which are atomic, and no lock that the
# interrupted code could be holding.
_stop_flag = False              # the stop signal has arrived
_stop_callbacks = collections.deque()
_stop_state = None              # None: to try; "on": handler installed; "off": not here
_stop_signum = None
_stop_prev = None               # the handler ours replaced (getsignal's value)
_stop_pid = None                # the process that installed it


def _parse_signal(text):
    """A signal number from "SIGTERM", "TERM", "sigterm", "15", "SIGRTMIN+2"
    or "RTMAX-1"; None when it names none."""
    text = str(text).strip().upper()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        n = int(text)
        return n if 0 < n < getattr(signal, "NSIG", 65) else None
    name = text if text.startswith("SIG") else "SIG" + text
    m = re.match(r"SIGRT(MIN|MAX)(?:([+-])([0-9]{1,2}))?\Z", name)
    if m:
        try:
            lo, hi = int(signal.SIGRTMIN), int(signal.SIGRTMAX)
        except AttributeError:
            return None
        n = lo if m.group(1) == "MIN" else hi
        if m.group(2):
            n += int(m.group(3)) if m.group(2) == "+" else -int(m.group(3))
        return n if lo <= n <= hi else None
    try:
        return int(signal.Signals[name])
    except (KeyError, AttributeError):
        return None


def _report_callback_error(callback):
    try:
        import traceback
        sys.stderr.write("leakproof: on_stop callback %r raised:\n%s"
                         % (callback, traceback.format_exc()))
        sys.stderr.flush()
    except Exception:           # e.g. stderr busy in the interrupted code
        pass


def _run_stop_callbacks():
    """Run each pending callback once, in order. Exceptions are reported on
    stderr and go no further; the first BaseException that is not an
    Exception (SystemExit from sys.exit(), KeyboardInterrupt) is returned,
    to be raised once every callback has run."""
    deferred = None
    while True:
        try:
            callback = _stop_callbacks.popleft()     # each one taken once
        except IndexError:
            return deferred
        try:
            callback()
        except Exception:
            _report_callback_error(callback)
        except BaseException as e:
            if deferred is None:
                deferred = e


def _act_as_previous(signum, frame):
    """What the signal did before our handler: in a forked child that
    could not get the previous handler back."""
    prev = _stop_prev
    if callable(prev):
        return prev(signum, frame)
    if prev == signal.SIG_IGN:
        return None
    signal.signal(signum, signal.SIG_DFL)   # default, or a handler outside Python
    os.kill(os.getpid(), signum)
    return None


def _stop_handler(signum, frame):
    global _stop_flag
    if os.getpid() != _stop_pid:
        return _act_as_previous(signum, frame)
    _stop_flag = True
    deferred = _run_stop_callbacks()
    prev = _stop_prev
    # Chain to a handler the program installed; not to Python's own SIGINT
    # handler, whose KeyboardInterrupt would defeat the graceful stop.
    if callable(prev) and prev is not getattr(signal, "default_int_handler", None):
        prev(signum, frame)
    if deferred is not None:
        raise deferred
    return None


def _stop_setup():
    """Install the stop handler the first time it can be: under leakproof,
    with LEAKPROOF_STOP_SIGNAL naming a signal, in the main thread."""
    global _stop_state, _stop_signum, _stop_prev, _stop_pid
    if _stop_state is not None:
        return
    if not enabled():
        _stop_state = "off"
        return
    signum = _parse_signal(os.environ.get("LEAKPROOF_STOP_SIGNAL", ""))
    if signum is None:
        _stop_state = "off"
        return
    if threading.current_thread() is not threading.main_thread():
        return                  # only the main thread may set handlers: later
    try:
        prev = signal.getsignal(signum)
        _stop_signum, _stop_prev, _stop_pid = signum, prev, os.getpid()
        signal.signal(signum, _stop_handler)
    except (ValueError, OSError, RuntimeError, TypeError):
        _stop_state = "off"     # SIGKILL, SIGSTOP, an unknown number
        return
    _stop_state = "on"


def _stop_after_fork():
    # A forked child (a DataLoader or Pool worker) gets the signal's previous
    # handling back: it must still die of the SIGTERM that ends leftover
    # processes. If it calls stop_requested() itself, it gets its own.
    global _stop_state, _stop_flag
    if _stop_state == "on":
        try:
            prev = _stop_prev
            signal.signal(_stop_signum, prev if prev is not None else signal.SIG_DFL)
        except Exception:
            pass                # the handler checks the pid and acts as before
    _stop_state = None
    _stop_flag = False
    _stop_callbacks.clear()


def stop_requested():
    """True once leakproof has asked the job to stop (a soft memory limit,
    a restart schedule): it sent the stop signal named by
    LEAKPROOF_STOP_SIGNAL. Poll it at a step boundary, then save a checkpoint
    and exit 0.

    The first call (or on_stop()) made in the main thread installs a handler
    for that signal, chaining to a handler the program installed before;
    until then the signal keeps its usual effect (SIGTERM kills). Always
    False without leakproof, or when LEAKPROOF_STOP_SIGNAL is unset."""
    try:
        _stop_setup()
    except Exception:
        pass
    return _stop_flag


def on_stop(callback):
    """Call callback() once when leakproof asks the job to stop (see
    stop_requested()), and return it, so this works as a decorator.

    Callbacks run in registration order, in the main thread, from the
    signal handler: between two bytecodes of whatever the main thread was
    doing, in the middle of a training step. Keep them short (flush a log,
    leakproof.mark(), set a flag) and save checkpoints at a step boundary
    after stop_requested() instead. An exception from one is printed on
    stderr and goes no further; sys.exit() in one ends the job once every
    callback has run. A callback registered after the stop request runs at
    once. Without leakproof nothing is registered; a non-callable is
    ignored."""
    try:
        _stop_setup()
        if _stop_state == "off" or not callable(callback):
            return callback
        _stop_callbacks.append(callback)
        if _stop_flag:
            deferred = _run_stop_callbacks()
            if deferred is not None:
                raise deferred
    except Exception:
        pass
    return callback


def step(n=None):
    """The end of training step n (numbered by the supervisor when None).
    Under a supervisor that asks for them (LEAKPROOF_CENSUS), a step also
    sends PyTorch's CUDA allocator figures when CUDA is initialised, and
    takes the object census when one is due (leakproof/census.py)."""
    if _fd != -1:
        _send(_counter_line("step", n))
        if _step_extras and _fd != -1:
            _at_step()


# ---- the object census and the allocator's figures at each step ----
#
# LEAKPROOF_CENSUS, set by a supervisor that reads census lines: "off", or
# the seconds between two censuses. Old supervisors never set it, and then
# nothing here sends anything they would not understand.
_step_extras = "LEAKPROOF_CENSUS" in os.environ   # step() sends the allocator's figures
_census = None                  # a census.Census, or None
_gpu_every_s = 0.05             # allocator figures at most this often
_gpu_last = 0.0


def _census_interval():
    value = os.environ.get("LEAKPROOF_CENSUS", "").strip()
    try:
        interval = float(value)
    except ValueError:
        return None
    return interval if interval > 0 and interval == interval else None


def _census_start(thread=False):
    """Start the census when the supervisor asked for one (import does it;
    the startup hook of `run --census` does it with thread=True, so a job
    that never calls step() is counted too). Never raises."""
    global _census
    try:
        interval = _census_interval()
        if interval is None or not enabled():
            return
        with _lock:
            if _census is None or _census.pid != os.getpid():
                from leakproof import census
                _census = census.Census(_send, interval)
        if thread:
            _census.start_thread()
    except Exception:
        pass


def _at_step():
    global _gpu_last
    try:
        import time
        now = time.monotonic()
        if now - _gpu_last >= _gpu_every_s and sys.modules.get("torch") is not None:
            _gpu_last = now
            gpu_from_torch()
        census = _census
        if census is not None:
            census.at_step()
    except Exception:
        pass


def epoch(n=None):
    """The end of epoch n (numbered by the supervisor when None)."""
    if _fd != -1:
        _send(_counter_line("epoch", n))


def metric(**values):
    """Numbers to plot beside memory: metric(loss=0.31, lr=1e-4). Names outside
    [A-Za-z_][A-Za-z0-9_.:/-]* have other characters replaced by '_' and are
    cut to 63 characters; values that float() does not take, NaN and
    infinities are left out. More than 32 values go out as several lines.

    In a sweep with method optuna and a pruner, the values of the sweep's
    metric (its `metric: {name: ...}`) are the trial's intermediate values,
    at the last step() reported: the pruner may end the trial on them
    (status `pruned`). The final value is still result()'s."""
    if _fd != -1:
        for line in _pairs_lines("metric", values):
            _send(line)


def result(**values):
    """A trial's outcome, for sweeps: result(accuracy=0.93, loss=0.2)."""
    if _fd != -1:
        for line in _pairs_lines("result", values):
            _send(line)


def gpu(allocated=None, reserved=None, **more):
    """The framework allocator's own view, in bytes: allocated by tensors,
    reserved by the caching allocator; more figures by name (inactive_split,
    alloc_retries, ooms: what gpu_from_torch() sends)."""
    if _fd == -1:
        return
    parts = ["gpu"]
    values = [("allocated", allocated), ("reserved", reserved)]
    values += [(_sanitize_name(k), v) for k, v in more.items()]
    for name, value in values:
        if value is None:
            continue
        try:
            parts.append("%s=%d" % (name, max(0, int(value))))
        except Exception:
            pass
    if len(parts) > 1:
        _send(" ".join(parts))


# torch.cuda.memory_stats() keys sent beside allocated and reserved
_TORCH_STATS = (("inactive_split", "inactive_split_bytes.all.current"),
                ("alloc_retries", "num_alloc_retries"),
                ("ooms", "num_ooms"))


def gpu_from_torch(device=None):
    """Send PyTorch's view of device (the current one when None) and return
    (allocated, reserved), or None when PyTorch is not imported or CUDA is
    not initialised (this never imports torch nor creates a CUDA context).
    From torch.cuda.memory_stats(): allocated_bytes.all.current,
    reserved_bytes.all.current, and as inactive_split, alloc_retries and
    ooms the inactive split bytes, the allocation retries and the
    out-of-memory errors so far; from memory_allocated() and
    memory_reserved() when memory_stats() is missing or empty."""
    try:
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return None
        stats = {}
        try:
            stats = torch.cuda.memory_stats(device) or {}
        except Exception:
            stats = {}
        if "allocated_bytes.all.current" in stats and "reserved_bytes.all.current" in stats:
            allocated = int(stats["allocated_bytes.all.current"])
            reserved = int(stats["reserved_bytes.all.current"])
        else:
            allocated = int(torch.cuda.memory_allocated(device))
            reserved = int(torch.cuda.memory_reserved(device))
        more = {}
        for name, key in _TORCH_STATS:
            if key in stats:
                more[name] = int(stats[key])
    except Exception:
        return None
    gpu(allocated=allocated, reserved=reserved, **more)
    return allocated, reserved


def mark(text):
    """A named event on the timeline: mark("eval start"). Newlines (and NUL)
    become spaces; the line is cut to 4096 bytes at a character boundary."""
    if _fd == -1:
        return
    try:
        text = str(text)
        for c in ("\r\n", "\n", "\r", "\0"):
            text = text.replace(c, " ")
        data = ("mark " + text).encode("utf-8", "replace")
        if len(data) > MAX_LINE_BYTES - 1:
            data = data[:MAX_LINE_BYTES - 1]
        _send(data.decode("utf-8", "ignore"))
    except Exception:
        pass


_census_start()

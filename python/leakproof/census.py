"""census.py — counts the job's live Python objects by type, at a low rate,
and names what holds a type that keeps growing. Part of the leakproof client
(docs/internals/census.md); started by leakproof/__init__.py when the
supervisor asks for it in LEAKPROOF_CENSUS, never by the user's code.

What one census counts (gc.get_objects(): the objects the cyclic garbage
collector tracks, which is every container, instance and tensor):
  - torch tensors, by class, device, dtype and whether they carry a grad_fn,
    with the bytes of their elements (a view counts its elements again);
  - numpy arrays (not tracked by the collector: found among the referents of
    the tracked objects), by dtype, with the bytes they own (views: 0);
  - the TOP_TYPES most numerous other types, without bytes.
For a type that rose at each of its last censuses the client remembers the
ids of its objects; at the next census it takes a new one and walks
gc.get_referrers() up to a container with a name: a module's global, an
object's attribute or a local of a running frame.

Cost: a census takes time while holding the GIL (about 20 ms for 100,000
objects on the development VM). The interval stretches so that the time
spent stays under COST_FRACTION of the wall time however large the heap:
interval = max(asked, last cost / COST_FRACTION). Holders are looked for
only while the census is within HOLDER_BUDGET_S.

Messages (docs/internals/clients.md), one line each, sent through the
client's channel:
  census SEQ TYPE COUNT BYTES [HOLDER]     BYTES "-" when unknown
  census SEQ * objects=N cost_us=N interval_s=X
Everything here swallows its exceptions: a census never raises into the job.
"""

import collections
import gc
import itertools
import operator
import os
import sys
import threading
import time
import types

COST_FRACTION = 0.01        # of the wall time, at most, spent in censuses
TOP_TYPES = 30              # plain Python types reported per census
HOLDER_BUDGET_S = 0.25      # no holder search once a census took this long
HOLDER_CANDIDATES = 3       # types searched for a holder per census
MAX_TRACKED_IDS = 200000    # a type with more objects gets no holder search
RISES_TO_TRACK = 2          # censuses in a row a type must rise to be tracked
TYPE_MAX_BYTES = 127
# The census's cost is its own thread's CPU time: what it takes from the job
# (a census in a thread waits for the GIL too; that wait is not its cost).
_clock = getattr(time, "thread_time", time.perf_counter)


def _budget():
    """COST_FRACTION, or LEAKPROOF_CENSUS_BUDGET (a fraction, for tests)."""
    try:
        value = float(os.environ.get("LEAKPROOF_CENSUS_BUDGET", ""))
    except ValueError:
        return COST_FRACTION
    return value if 0 < value <= 1 else COST_FRACTION
HOLDER_MAX_BYTES = 400


# Types whose referents are never arrays a job keeps: left out of the
# search for numpy arrays, which is the census's dearest part.
_NO_ARRAYS = {types.FunctionType, type, types.CodeType, types.ModuleType, types.BuiltinFunctionType,
              types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType,
              types.MemberDescriptorType, staticmethod, classmethod, property, types.MethodWrapperType,
              types.MappingProxyType, types.ClassMethodDescriptorType}


def _of_types(objs, kinds):
    """The objects of objs whose type is in kinds (a set or dict), filtered
    at C speed: no Python code runs per object."""
    return itertools.compress(objs, map(kinds.__contains__, map(type, objs)))


def _subclasses(tp):
    """tp and every subclass of it defined so far, as a set."""
    found, todo = {tp}, [tp]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _type_name(tp):
    module = getattr(tp, "__module__", "") or ""
    name = getattr(tp, "__qualname__", None) or getattr(tp, "__name__", "?")
    if module in ("builtins", ""):
        return name
    return module + "." + name


def _clean(text, limit):
    text = "".join("_" if c.isspace() else c for c in str(text))
    return text.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore") or "_"


def _tensor_key(t, names):
    tp = type(t)
    base = names.get(tp)
    if base is None:
        base = names[tp] = _type_name(tp)
    key = "%s/%s/%s" % (base, t.device, str(t.dtype).replace("torch.", ""))
    if t.grad_fn is not None:
        key += "/grad_fn"
    return key


class Census:
    """The census of one process: run() takes one, due() says when."""

    def __init__(self, send, interval_s):
        self.send = send                    # send(line): the client's _send
        self.asked_s = max(0.05, float(interval_s))
        self.interval_s = self.asked_s
        self.budget = _budget()
        self.pid = os.getpid()
        self.seq = 0
        self.next_at = time.monotonic() + self.asked_s
        self.last_step_at = None            # monotonic time of the last step()
        self.history = {}                   # key -> counts of the last censuses
        self.tracked = {}                   # key -> set of ids seen last time
        self.holders = {}                   # key -> holder text, last found
        self.lock = threading.Lock()
        self.thread = None
        self.total_cost_s = 0.0
        self.plain_types = {}               # key -> the type it names, last census
        self._objects = 0

    # ---- scheduling ----

    def due(self, now):
        return now >= self.next_at and os.getpid() == self.pid

    def at_step(self):
        """Called by leakproof.step(): a census at a step boundary when due."""
        now = time.monotonic()
        self.last_step_at = now
        if self.due(now):
            self.run()

    def start_thread(self):
        """A daemon thread takes the census in jobs that mark no steps (the
        startup hook); a job that calls step() has it taken there, at a
        step boundary, where the counts do not depend on where in the step
        the census fell."""
        if self.thread is not None:
            return
        self.thread = threading.Thread(target=self._loop, name="leakproof-census", daemon=True)
        self.thread.start()

    def _loop(self):
        while os.getpid() == self.pid:
            now = time.monotonic()
            wait = self.next_at - now
            if wait > 0:
                time.sleep(min(wait, 1.0))
                continue
            stepping = self.last_step_at is not None and now - self.last_step_at < 2 * self.interval_s
            if stepping:
                time.sleep(min(self.interval_s, 1.0))   # step() takes it
                continue
            self.run()

    # ---- one census ----

    def run(self):
        if not self.lock.acquire(blocking=False):
            return
        try:
            started = _clock()
            try:
                lines = self._take(started)
            except Exception:
                lines = []
                if os.environ.get("LEAKPROOF_CENSUS_DEBUG"):
                    import traceback
                    traceback.print_exc()
            cost = _clock() - started
            self.total_cost_s += cost
            self.interval_s = max(self.asked_s, cost / self.budget)
            self.next_at = time.monotonic() + self.interval_s
            lines.append("census %d * objects=%d cost_us=%d interval_s=%r"
                         % (self.seq, self._objects, int(cost * 1e6), round(self.interval_s, 3)))
            for line in lines:
                self.send(line)
            self.seq += 1
        finally:
            self.lock.release()

    def _take(self, started):
        counts = collections.Counter()
        nbytes = collections.Counter()
        members = {}                         # key -> objects, for tracked keys only
        objs = gc.get_objects()
        self._objects = len(objs)
        try:
            by_type = collections.Counter(map(type, objs))
            torch = sys.modules.get("torch")
            tensor_base = getattr(torch, "Tensor", None) if torch is not None else None
            tensor_types = set()
            if isinstance(tensor_base, type):
                tensor_types = {tp for tp in by_type if issubclass(tp, tensor_base)}
            want = set(self.tracked) | {k for k, h in self.history.items() if self._rising(h)}
            if tensor_types:
                names = {}
                for o in _of_types(objs, tensor_types):
                    try:
                        key = _tensor_key(o, names)
                        counts[key] += 1
                        nbytes[key] += o.element_size() * o.nelement()
                    except Exception:
                        continue
                    if key in want:
                        members.setdefault(key, []).append(o)
            numpy = sys.modules.get("numpy")
            ndarray = getattr(numpy, "ndarray", None) if numpy is not None else None
            if isinstance(ndarray, type) and _clock() - started < HOLDER_BUDGET_S:
                holders = list(itertools.compress(
                    objs, map(operator.not_, map(_NO_ARRAYS.__contains__, map(type, objs)))))
                refs = gc.get_referents(*holders)
                del holders
                arrays = {id(o): o for o in _of_types(refs, _subclasses(ndarray))}
                del refs
                for o in arrays.values():
                    key = "%s/%s" % (_type_name(type(o)), o.dtype)
                    counts[key] += 1
                    if o.base is None:
                        nbytes[key] += int(o.nbytes)
                    if key in want:
                        members.setdefault(key, []).append(o)
                del arrays
            plain = [(n, tp) for tp, n in by_type.items() if tp not in tensor_types]
            plain.sort(key=lambda p: -p[0])
            keys = {_type_name(tp): (n, tp) for n, tp in plain[:TOP_TYPES]}
            for key in want:                 # keep the series of a type under watch
                if key not in counts and key not in keys:
                    tp = self.plain_types.get(key)
                    if tp is not None and tp in by_type:
                        keys[key] = (by_type[tp], tp)
            self.plain_types = {k: tp for k, (n, tp) in keys.items()}
            want_plain = {keys[k][1]: k for k in want if k in keys}
            for o in _of_types(objs, want_plain):
                members.setdefault(want_plain[type(o)], []).append(o)
            for key, (n, tp) in keys.items():
                counts[key] = n
            holders = self._holders(counts, members, objs, started)
            lines = []
            for key in sorted(counts, key=lambda k: -counts[k]):
                h = self.history.setdefault(key, [])
                h.append(counts[key])
                del h[:-(RISES_TO_TRACK + 1)]
                size = "%d" % nbytes[key] if key in nbytes else "-"
                line = "census %d %s %d %s" % (self.seq, _clean(key, TYPE_MAX_BYTES), counts[key], size)
                if holders.get(key):
                    line += " " + holders[key]
                lines.append(line)
            for key in list(self.history):
                if key not in counts:
                    del self.history[key]
            return lines
        finally:
            del objs
            members.clear()

    @staticmethod
    def _rising(h):
        """The count rose at each of the last RISES_TO_TRACK - 1 censuses."""
        if len(h) < RISES_TO_TRACK:
            return False
        tail = h[-RISES_TO_TRACK:]
        return all(a < b for a, b in zip(tail, tail[1:]))

    def _holders(self, counts, members, objs, started):
        """key -> holder text for the keys under watch that rose again."""
        found = {}
        tracked, self.tracked = self.tracked, {}
        searched = 0
        for key, items in members.items():
            h = self.history.get(key, [])
            if len(items) > MAX_TRACKED_IDS or not h or counts.get(key, 0) <= h[-1]:
                continue                     # no longer rising: no longer watched
            before = tracked.get(key)
            self.tracked[key] = {id(o) for o in items}
            if before is None:
                continue
            if searched >= HOLDER_CANDIDATES or _clock() - started > HOLDER_BUDGET_S:
                if key in self.holders:
                    found[key] = self.holders[key]
                continue
            new = [o for o in items if id(o) not in before]
            if not new:
                continue
            searched += 1
            text = None
            try:
                text = _find_holder(new[-1], {id(objs), id(items), id(new), id(members)})
            except Exception:
                text = None
            finally:
                del new
            if text:
                self.holders[key] = found[key] = _clean_holder(text)
            elif key in self.holders:
                found[key] = self.holders[key]
        return found


def _clean_holder(text):
    text = " ".join(str(text).split())
    return text.encode("utf-8", "replace")[:HOLDER_MAX_BYTES].decode("utf-8", "ignore")


_CONTAINERS = (list, dict, set, frozenset, tuple, collections.deque, collections.OrderedDict,
               collections.defaultdict)
_OWN_FILE = os.path.splitext(os.path.abspath(__file__))[0]


def _own_frame(f):
    try:
        return os.path.splitext(os.path.abspath(f.f_code.co_filename))[0] == _OWN_FILE
    except Exception:
        return False


def _module_of_dict(d):
    for name, mod in list(sys.modules.items()):
        if getattr(mod, "__dict__", None) is d:
            return name, mod
    return None, None


def _where(mod, name):
    path = getattr(mod, "__file__", None)
    if path:
        return "%s (module %s)" % (os.path.basename(path), name)
    return "module %s" % name


def _name_of(c, ignore, depth=0):
    """How c (a container) can be reached by name: 'history in train.py
    (module __main__)', 'Trainer.outputs (an attribute, module __main__)',
    'local cache of step() at train.py:42'; None when no name is found."""
    refs = gc.get_referrers(c)
    try:
        for r in refs:
            if id(r) in ignore or type(r).__name__ == "frame":
                continue
            if type(r) is dict:
                modname, mod = _module_of_dict(r)
                for k, v in r.items():
                    if v is c:
                        if mod is not None:
                            return "%s in %s" % (k, _where(mod, modname))
                        owner = _owner_of_dict(r, ignore | {id(refs)})
                        if owner is not None:
                            return "%s.%s (an attribute, module %s)" % (
                                type(owner).__name__, k, type(owner).__module__)
                        if depth < 1:
                            outer = _name_of(r, ignore | {id(refs)}, depth + 1)
                            if outer:
                                return "%r in dict %s" % (k, outer)
                        break
            elif not issubclass(type(r), _CONTAINERS) and getattr(type(r), "__dictoffset__", 0):
                try:
                    attrs = object.__getattribute__(r, "__dict__")
                except Exception:
                    continue
                for k, v in attrs.items():
                    if v is c:
                        return "%s.%s (an attribute, module %s)" % (type(r).__name__, k, type(r).__module__)
            elif issubclass(type(r), _CONTAINERS) and depth < 1:
                outer = _name_of(r, ignore | {id(refs)}, depth + 1)
                if outer:
                    return "%s %s" % (type(r).__name__, outer)
    finally:
        del refs
    return _local_name(c) if depth == 0 else None


def _local_name(c):
    """'local NAME of FUNCTION() at FILE:LINE' for c held by a running frame."""
    for f in list(sys._current_frames().values()):
        while f is not None:
            if not _own_frame(f) and f.f_code.co_name != "<module>":
                try:
                    for k, v in f.f_locals.items():
                        if v is c:
                            return "local %s of %s() at %s:%d" % (
                                k, f.f_code.co_name, os.path.basename(f.f_code.co_filename), f.f_lineno)
                except Exception:
                    pass
            f = f.f_back
    return None


def _owner_of_dict(d, ignore):
    refs = gc.get_referrers(d)
    try:
        for r in refs:
            if id(r) in ignore or not getattr(type(r), "__dictoffset__", 0):
                continue
            try:
                if object.__getattribute__(r, "__dict__") is d:
                    return r
            except Exception:
                continue
    finally:
        del refs
    return None


def _find_holder(x, ignore):
    """'list history in train.py (module __main__)' for an object x that a
    named container holds; None when none is found."""
    refs = gc.get_referrers(x)
    ignore = set(ignore) | {id(refs)}
    try:
        for r in refs:
            if id(r) in ignore or type(r).__name__ == "frame":
                continue
            if issubclass(type(r), _CONTAINERS):
                if type(r) is dict and _module_of_dict(r)[1] is not None:
                    continue          # x itself is a module global: not a container
                name = _name_of(r, ignore)
                if name:
                    return "%s %s" % (type(r).__name__, name)
    finally:
        del refs
    return None

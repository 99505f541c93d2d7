"""census.py — counts the job's live Python objects by type, and the length
of the containers user code holds by name, at a low rate, and names what
holds a type that keeps growing. Part of the leakproof client
(docs/internals/census.md); started by leakproof/__init__.py when the
supervisor asks for it in LEAKPROOF_CENSUS, or by the startup hook
(leakproof/hook/), never by the user's code.

What one census counts (gc.get_objects(): the objects the cyclic garbage
collector tracks, which is every container, instance and tensor):
  - torch tensors, by class, device, dtype and whether they carry a grad_fn,
    with the bytes of their elements (a view counts its elements again);
  - numpy arrays (not tracked by the collector: found among the referents of
    the tracked objects, when the budget pays for it: it is the dearest
    part), by dtype, with the bytes they own (views: 0);
  - the TOP_TYPES most numerous other types, without bytes;
  - containers held by name (module globals of the job's own modules, their
    classes' attributes, attributes of their instances, closure cells,
    functools caches, locals of the job's running frames; a bounded walk,
    WALK_MAX objects): their length, and an estimate of the bytes of what
    they hold. numpy arrays, bytes and strings in a container are not
    tracked by the collector: only the container's length shows them.
For a type that rose at each of its last censuses the client names its
holder: a container above that grows with it, else it remembers the ids of
its objects, takes a new one at the next census and walks
gc.get_referrers() up to a container with a name.

Cost: a census of the heap takes about 25 ms for 100,000 objects without
the numpy search on the development VM. It goes through the heap SLICE
objects at a time, letting other threads run between slices, and is left
out while its list of every object (8 bytes each) would be over LIST_FLOOR
and LIST_FRACTION of the process's memory. The censuses come
early (the first after FIRST_S, the gaps growing with the time since the
start: RAMP of it, at most the interval asked) and each waits until the
time spent in all of them stays under COST_FRACTION of the time since the
census started, the first one included (its cost estimated from the heap's
size: sys.getallocatedblocks()). Holders and numpy arrays are looked for
only within what the budget has left.

Messages (docs/internals/clients.md), one line each, sent through the
client's channel:
  census SEQ TYPE COUNT BYTES [HOLDER]     BYTES "-" when unknown
  census SEQ held#N/CONTAINER/ELEMENT LENGTH BYTES HOLDER
  census SEQ * objects=N cost_us=N interval_s=X
Everything here swallows its exceptions: a census never raises into the job.
"""

import collections
import functools
import gc
import itertools
import operator
import os
import sys
import sysconfig
import threading
import time
import types

COST_FRACTION = 0.01        # of the time since the start, at most, spent in censuses
TOP_TYPES = 30              # plain Python types reported per census
HOLDER_BUDGET_S = 0.25      # a census's holder search takes at most this
HOLDER_CANDIDATES = 3       # types searched for a holder per census
MAX_TRACKED_IDS = 200000    # a type with more objects gets no holder search
RISES_TO_TRACK = 2          # censuses in a row a type must rise to be tracked
TYPE_MAX_BYTES = 127
FIRST_S = 1.0               # the first census, at the earliest, after this
RAMP = 0.1                  # a gap is at least this share of the time since the start
MIN_GAP_S = 0.25
COST_PER_BLOCK_S = 1e-7     # the first census's cost, estimated per allocated block
WALK_MAX = 20000            # objects the walk for containers looks at, per census
WALK_ITEMS = 64             # items of a dict looked into for nested containers
CONTAINERS_SENT = 40        # containers reported per census (those that changed first)
SIZE_SAMPLE = 3             # elements sampled for the bytes a container holds
HELD_MAX = 2000             # containers followed, at most, over the run
SLICE = 50000               # objects of the heap handled per C call; other threads run between
LIST_FLOOR = 8 << 20        # a census of the heap always allowed while its list is under this
LIST_FRACTION = 0.02        # else only while its list is under this share of the process's memory
BLOCKS_PER_OBJECT = 3       # allocated blocks per tracked object, assumed before the first census
_CO_OPTIMIZED = 0x0001      # inspect.CO_OPTIMIZED: a function's frame, its locals in fast slots
_LOCALS_SNAPSHOT = sys.version_info < (3, 13)   # f_locals a dict kept on the frame (PEP 667)
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
_NO_ARRAY_IDS = {id(t) for t in _NO_ARRAYS}


def _of_types(objs, kind_ids, type_of):
    """The objects of objs whose type's id is in kind_ids (type_of: id ->
    type), as a list, filtered at C speed: no Python code runs per object.
    By type when every type hashes, else by the types' ids: a class whose
    metaclass makes it unhashable must not stop the census."""
    try:
        kinds = {type_of[i] for i in kind_ids}
        return list(itertools.compress(objs, map(kinds.__contains__, map(type, objs))))
    except TypeError:
        return list(itertools.compress(objs, map(kind_ids.__contains__, map(id, map(type, objs)))))


def _count_types(objs):
    """{type id: count} and {type id: type} of objs, in C. By type first
    (the fast way); by the types' ids when a class is unhashable (its
    metaclass defines __eq__ without __hash__)."""
    try:
        by_type = collections.Counter(map(type, objs))
        return {id(t): n for t, n in by_type.items()}, {id(t): t for t in by_type}
    except TypeError:
        tps = list(map(type, objs))
        ids = list(map(id, tps))
        return collections.Counter(ids), dict(zip(ids, tps))


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
    """'module.Class' ('list' for builtins); a type whose __module__ or
    __qualname__ raises is named as well as it can be."""
    try:
        module = type.__dict__["__module__"].__get__(tp)
    except Exception:
        module = ""
    try:
        name = type.__dict__["__qualname__"].__get__(tp)
    except Exception:
        try:
            name = type.__dict__["__name__"].__get__(tp)
        except Exception:
            name = "?"
    if not isinstance(module, str) or module in ("builtins", ""):
        return str(name)
    return module + "." + str(name)


def _clean(text, limit):
    text = "".join("_" if c.isspace() else c for c in str(text))
    return text.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore") or "_"


def _tensor_key(t, names):
    tp = type(t)
    base = names.get(id(tp))
    if base is None:
        base = names[id(tp)] = _type_name(tp)
    key = "%s/%s/%s" % (base, t.device, str(t.dtype).replace("torch.", ""))
    if t.grad_fn is not None:
        key += "/grad_fn"
    return key


def _elem_key(o):
    """A kept object's census key: tensors and arrays as the census counts
    them, anything else by its type's name."""
    tp = type(o)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(o, getattr(torch, "Tensor", ())):
        return _tensor_key(o, {})
    name = _type_name(tp)
    dtype = getattr(o, "dtype", None) if name == "numpy.ndarray" else None
    return "%s/%s" % (name, dtype) if dtype is not None else name


def _size(o, depth=0):
    """An estimate of the bytes o keeps: an array's or tensor's data, a
    string's or bytes' size; a dict, list or tuple with one level of what it
    holds."""
    try:
        nbytes = getattr(o, "nbytes", None) if type(o).__module__.startswith("numpy") else None
        if isinstance(nbytes, int):
            return nbytes + 112
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(o, getattr(torch, "Tensor", ())):
            return o.element_size() * o.nelement() + 200
        n = sys.getsizeof(o)
        if depth == 0 and type(o) in (dict, list, tuple):
            items = o.values() if type(o) is dict else o
            n += sum(_size(v, 1) for v in itertools.islice(items, 32))
        return n
    except Exception:
        return 0


# ---- containers held by name ----

_CONTAINER_TYPES = (list, dict, set, collections.deque, collections.OrderedDict, collections.defaultdict)


def _system_dirs():
    dirs = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            dirs.add(os.path.realpath(sysconfig.get_path(name)))
        except Exception:
            pass
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        dirs.add(os.path.realpath(os.path.join(p, "lib")))
    dirs.add(os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p):
            dirs.add(os.path.realpath(p))
            dirs.add(os.path.abspath(p))
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            dirs.add(os.path.abspath(sysconfig.get_path(name)))
        except Exception:
            pass
    return tuple(d.rstrip("/") + "/" for d in dirs if d)


def _frame_locals(f):
    """The (name, value) pairs of a running function's locals, leaving
    nothing behind. Before Python 3.13 (PEP 667), f_locals is a snapshot
    dict stored on the frame: it would keep every local it saw alive until
    the function next calls locals() or returns, so a training loop's
    tensors of one step (megabytes) would live on a step longer, the
    census's memory in the job's. The snapshot is emptied once read, but
    where a tracer (a debugger: f_trace) may write it back to the frame,
    and for frames whose f_locals is their namespace (not optimized: module
    and class bodies, exec), which are not snapshots."""
    local = f.f_locals
    items = list(local.items())
    if (_LOCALS_SNAPSHOT and f.f_code.co_flags & _CO_OPTIMIZED and f.f_trace is None
            and type(local) is dict):
        local.clear()
    return items


class _Walk:
    """One walk for containers held by name, from the job's own modules and
    its running frames: {holder text: container}. Bounded: WALK_MAX objects
    looked at; nothing is kept past the census."""

    def __init__(self, user_mods, frames):
        self.found = {}
        self.left = WALK_MAX
        self.seen = set()
        self.user_mods = user_mods          # module name -> (module, file's base name)
        for modname, (mod, base) in user_mods.items():
            where = "%s (module %s)" % (base, modname)
            try:
                items = list(vars(mod).items())
            except Exception:
                continue
            for name, v in items:
                if self.left <= 0:
                    return
                if isinstance(name, str) and not name.startswith("__"):
                    self.try_visit(v, "%s in %s" % (name, where), modname, 0)
        for f in frames:
            code = f.f_code
            try:
                items = _frame_locals(f) if code.co_name != "<module>" else []
            except Exception:
                continue
            for name, v in items:
                if self.left <= 0:
                    return
                self.try_visit(v, "local %s of %s() in %s" % (name, code.co_name, os.path.basename(code.co_filename)),
                               None, 1)

    def try_visit(self, v, name, modname, depth):
        # an object whose type misbehaves (a __dictoffset__ or __module__
        # that raises) is left out, not the census
        try:
            self.visit(v, name, modname, depth)
        except Exception:
            pass

    def add(self, name, c):
        tp = type(c)
        if tp is collections.deque and c.maxlen is not None:
            return                           # bounded: never grows past maxlen
        self.found.setdefault("%s %s" % (_type_name(tp), name), c)

    def visit(self, v, name, modname, depth):
        self.left -= 1
        if id(v) in self.seen:
            return
        tp = type(v)
        if isinstance(v, _CONTAINER_TYPES):
            self.seen.add(id(v))
            self.add(name, v)
            if tp is not list and depth < 2 and isinstance(v, dict):
                for k, x in itertools.islice(list(v.items()), WALK_ITEMS):
                    if isinstance(k, str) and isinstance(x, _CONTAINER_TYPES) and self.left > 0:
                        self.left -= 1
                        self.add("%r in %s %s" % (k, _type_name(tp), name), x)
            return
        if tp is functools._lru_cache_wrapper:
            self.seen.add(id(v))
            try:
                if v.cache_info().maxsize is None:      # bounded: never grows past maxsize
                    self.found.setdefault("cache of %s() (%s)" % (getattr(v, "__qualname__", "?"), self.where(v)), v)
            except Exception:
                pass
            return
        if tp is types.FunctionType:
            self.seen.add(id(v))
            cells = v.__closure__ or ()
            for cellname, cell in zip(v.__code__.co_freevars, cells):
                try:
                    x = cell.cell_contents
                except ValueError:
                    continue
                if isinstance(x, _CONTAINER_TYPES) or type(x) is functools._lru_cache_wrapper:
                    self.visit(x, "%s in the closure of %s() (%s)" % (cellname, v.__qualname__, self.where(v)),
                               None, depth + 1)
            return
        if isinstance(v, type):
            self.seen.add(id(v))
            mod = type.__dict__["__module__"].__get__(v) if "__module__" in type.__dict__ else None
            if depth > 0 or mod not in self.user_mods:
                return
            try:
                items = list(type.__dict__["__dict__"].__get__(v).items())
            except Exception:
                return
            for k, x in items:
                if self.left <= 0:
                    return
                if isinstance(x, (staticmethod, classmethod)):
                    x = x.__func__
                if isinstance(x, _CONTAINER_TYPES) or type(x) in (functools._lru_cache_wrapper,
                                                                   types.FunctionType):
                    self.visit(x, "%s.%s (a class attribute, module %s)" % (v.__qualname__, k, mod), mod, depth + 1)
            return
        if depth < 2 and getattr(tp, "__dictoffset__", 0) and not isinstance(v, types.ModuleType):
            try:
                mod = type.__dict__["__module__"].__get__(tp)
            except Exception:
                return
            if mod not in self.user_mods:
                return
            self.seen.add(id(v))
            try:
                attrs = list(object.__getattribute__(v, "__dict__").items())
            except Exception:
                return
            for k, x in attrs:
                if self.left <= 0:
                    return
                if isinstance(k, str):
                    self.visit(x, "%s.%s (an attribute, module %s)" % (tp.__qualname__, k, mod), mod, depth + 1)

    def where(self, fn):
        mod = getattr(fn, "__module__", None)
        info = self.user_mods.get(mod)
        return "%s, module %s" % (info[1], mod) if info else "module %s" % mod


def _cache_values(wrapper):
    """The values an unbounded functools cache holds (its dict's values)."""
    for r in gc.get_referents(wrapper):
        if type(r) is dict and r is not getattr(wrapper, "__dict__", None):
            return r.values()
    return ()


def _length(c):
    if type(c) is functools._lru_cache_wrapper:
        return c.cache_info().currsize
    return len(c)


def _last_items(c, k):
    """Up to k of the most recently added items of c."""
    if type(c) is functools._lru_cache_wrapper:
        vals = list(_cache_values(c))
        return vals[-k:]
    if isinstance(c, dict):
        return list(itertools.islice(reversed(c.values()), k))
    if isinstance(c, (list, collections.deque)):
        return [c[i] for i in range(-1, -min(k, len(c)) - 1, -1)]
    return list(itertools.islice(c, k))


def _slices(objs):
    """objs SLICE at a time, letting the job's other threads run between
    slices: a C call over the whole heap would hold the GIL for it all."""
    for start in range(0, len(objs), SLICE):
        yield objs[start:start + SLICE]
        time.sleep(0)


_SIZED = (list, tuple, dict, collections.deque, collections.OrderedDict, collections.defaultdict)


def _big(objs):
    """The lists, tuples, dicts and deques of objs with more than SLICE
    items: their referents, asked for all at once, would be one list of
    millions (and one C call)."""
    try:
        sized = _of_types(objs, {id(t) for t in _SIZED}, {id(t): t for t in _SIZED})
        return list(itertools.compress(sized, map(SLICE.__lt__, map(len, sized))))
    except Exception:
        return []


def _items(c):
    """What a big dict or deque holds that may be an array: a copy of its
    values (a dict's keys are hashable, never arrays); [] when it changed
    size while being read."""
    try:
        return list(c.values()) if isinstance(c, dict) else list(c)
    except Exception:
        return []


def _blocks():
    try:
        return sys.getallocatedblocks()
    except Exception:
        return 0


def _rss():
    """The process's resident memory in bytes; None when unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        return None


class _Held:
    """One container held by name, across censuses."""
    __slots__ = ("num", "lengths", "elem", "changed")

    def __init__(self, num):
        self.num = num
        self.lengths = []
        self.elem = None
        self.changed = False


_SYSTEM_DIRS = None
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + "/"
_USER_FILES = {}                # path -> whether it is the job's own code


def _user_file(path):
    """Whether path is a file of the job's own code: not the standard
    library's, not an installed package's, not ours. Remembered."""
    global _SYSTEM_DIRS
    known = _USER_FILES.get(path)
    if known is not None:
        return known
    if not isinstance(path, str) or not path or path.startswith("<"):
        return False
    if _SYSTEM_DIRS is None:
        _SYSTEM_DIRS = _system_dirs()
    try:
        full = os.path.abspath(path)
    except Exception:
        return False
    mine = not full.startswith(_SYSTEM_DIRS) and not full.startswith(_OWN_DIR)
    if len(_USER_FILES) < 100000:
        _USER_FILES[path] = mine
    return mine


class Census:
    """The census of one process: run() takes one, due() says when."""

    def __init__(self, send, interval_s):
        self.send = send                    # send(line): the client's _send
        self.asked_s = max(0.05, float(interval_s))
        self.interval_s = self.asked_s
        self.budget = _budget()
        self.pid = os.getpid()
        self.seq = 0
        self.started_at = time.monotonic()
        self.ramp_from = self.started_at      # the gaps grow from here
        self.next_at = self.started_at + min(FIRST_S, self.asked_s)
        self.last_step_at = None            # monotonic time of the last step()
        self.history = {}                   # key -> counts of the last censuses
        self.tracked = {}                   # key -> set of ids seen last time
        self.holders = {}                   # key -> holder text, last found
        self.held = {}                      # container's holder text -> _Held
        self.user_mods = {}                 # module name -> (module, file's base name)
        self.nmodules = -1
        self.lock = threading.Lock()
        self.thread = None
        self.total_cost_s = 0.0
        self.last_cost_s = None
        self.full_cost_s = None             # the last census of the whole heap
        self.fulls = 0
        self.lights = 0                     # censuses of containers only since the last full one
        self.nmodules_seen = -1
        self.plain_types = {}               # key -> the type it names, last census
        self._objects = 0
        self._blocks = 0                    # sys.getallocatedblocks() at the last census of the heap
        self.big_heap = False               # this census's heap left out for its list's size

    # ---- scheduling ----

    def due(self, now):
        if now < self.next_at or os.getpid() != self.pid:
            return False
        if self.room(now) <= 0:
            self.next_at = self.started_at + self.total_cost_s / self.budget
            return False
        return True

    def _full_due(self):
        """Whether this census counts the whole heap: when what the budget
        has left pays for it (the last one's cost; for the first, an
        estimate from the heap's size). The others only read the lengths
        of the containers held by name, which costs little."""
        self.big_heap = False
        cost = self.full_cost_s
        if cost is None:
            try:
                cost = sys.getallocatedblocks() * COST_PER_BLOCK_S
            except Exception:
                cost = 0.0
        if self.room() < cost:
            return False
        if self._list_too_big():
            self.big_heap = True
            return False
        # not while modules are being imported (the heap is being built,
        # and counting it then costs most), unless that goes on
        stable = len(sys.modules) == self.nmodules_seen or self.lights >= 4
        self.nmodules_seen = len(sys.modules)
        return stable

    def _list_too_big(self):
        """Whether the list of every tracked object (8 bytes each) that a
        census of the heap builds would add more than LIST_FLOOR and more
        than LIST_FRACTION of the process's memory to it. Its length is the
        last census's, scaled by the allocated blocks since; before the
        first, a share of the blocks (BLOCKS_PER_OBJECT: untracked ints,
        floats and strings count there too)."""
        blocks = _blocks()
        if self._objects and self._blocks:
            n = self._objects * blocks / self._blocks
        else:
            n = blocks / BLOCKS_PER_OBJECT
        size = 8 * n
        if size <= LIST_FLOOR:
            return False
        rss = _rss()
        return rss is not None and size > LIST_FRACTION * rss

    def room(self, now=None):
        """CPU seconds the budget has left now, beyond what censuses took."""
        now = time.monotonic() if now is None else now
        return self.budget * (now - self.started_at) - self.total_cost_s

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
        # the first censuses come early from now: woken by the supervisor
        # when memory turned to growth, or at the job's start
        self.ramp_from = time.monotonic()
        self.next_at = min(self.next_at, self.ramp_from + MIN_GAP_S)
        self.thread = threading.Thread(target=self._loop, name="leakproof-census", daemon=True)
        self.thread.start()

    def _loop(self):
        while os.getpid() == self.pid:
            now = time.monotonic()
            if not self.due(now):
                time.sleep(min(max(self.next_at - now, 0.01), 1.0))
                continue
            stepping = self.last_step_at is not None and now - self.last_step_at < 2 * self.interval_s
            if stepping:
                time.sleep(min(self.interval_s, 1.0))   # step() takes it
                continue
            self.run()

    def _schedule(self, cost):
        """The next census: a gap that grows with the time since the start
        (at most the interval asked), and no sooner than the budget allows
        for all the censuses so far."""
        now = time.monotonic()
        gap = min(self.asked_s, max(MIN_GAP_S, RAMP * (now - self.ramp_from)))
        self.next_at = max(now + gap, self.started_at + self.total_cost_s / self.budget)
        self.interval_s = max(gap, (self.full_cost_s or cost) / self.budget)

    # ---- one census ----

    def run(self):
        if not self.lock.acquire(blocking=False):
            return
        try:
            started = _clock()
            full = self._full_due()
            try:
                if full:
                    lines = self._take(started)
                else:
                    lines = self._containers()[0]
            except Exception:
                lines = []
                if os.environ.get("LEAKPROOF_CENSUS_DEBUG"):
                    import traceback
                    traceback.print_exc()
            cost = _clock() - started
            self.total_cost_s += cost
            self.last_cost_s = cost
            if full:
                self.full_cost_s = cost
                self.fulls += 1
                self.lights = 0
            else:
                self.lights += 1
            self._schedule(cost)
            lines.append("census %d * objects=%d cost_us=%d interval_s=%r%s%s"
                         % (self.seq, self._objects, int(cost * 1e6), round(self.interval_s, 3),
                            "" if full else " containers=1", " big_heap=1" if self.big_heap else ""))
            for line in lines:
                self.send(line)
            self.seq += 1
        finally:
            self.lock.release()

    def _left(self, started):
        """What this census may still spend, in CPU seconds."""
        return self.room() - (_clock() - started)

    def _take(self, started):
        counts = collections.Counter()
        nbytes = collections.Counter()
        members = {}                         # key -> objects, for tracked keys only
        objs = gc.get_objects()
        self._objects = len(objs)
        self._blocks = _blocks()
        picked = []                          # objects of the types looked into
        try:
            by_id, type_of = collections.Counter(), {}
            for part in _slices(objs):
                ids, tps = _count_types(part)
                by_id.update(ids)
                type_of.update(tps)
            part = None
            torch = sys.modules.get("torch")
            tensor_base = getattr(torch, "Tensor", None) if torch is not None else None
            tensor_ids = set()
            if isinstance(tensor_base, type):
                for i, tp in type_of.items():
                    try:
                        if issubclass(tp, tensor_base):
                            tensor_ids.add(i)
                    except Exception:
                        continue
            want = set(self.tracked) | {k for k, h in self.history.items() if self._rising(h)}
            # one pass over the heap for the tensors and the plain types under watch
            want_ids = {i for k, i in self.plain_types.items() if k in want and i in by_id}
            picked = []
            if tensor_ids or want_ids:
                for part in _slices(objs):
                    picked += _of_types(part, tensor_ids | want_ids, type_of)
                part = None
            if tensor_ids:
                names = {}
                for o in picked:
                    if id(type(o)) not in tensor_ids:
                        continue
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
            cost_so_far = _clock() - started
            if isinstance(ndarray, type) and self._left(started) > 3 * cost_so_far:
                subs = _subclasses(ndarray)
                sub_ids, sub_of = {id(t) for t in subs}, {id(t): t for t in subs}
                arrays = {}
                for part in _slices(objs):
                    holders = list(itertools.compress(
                        part, map(operator.not_, map(_NO_ARRAY_IDS.__contains__, map(id, map(type, part))))))
                    big = _big(holders)
                    if big:
                        big_ids = {id(o) for o in big}
                        holders = list(itertools.compress(
                            holders, map(operator.not_, map(big_ids.__contains__, map(id, holders)))))
                    refs = gc.get_referents(*holders)
                    del holders
                    arrays.update((id(o), o) for o in _of_types(refs, sub_ids, sub_of))
                    del refs
                    for c in big:            # a list of millions: its items a slice at a time
                        for items in _slices(c if type(c) in (list, tuple) else _items(c)):
                            arrays.update((id(o), o) for o in _of_types(items, sub_ids, sub_of))
                        items = c = None
                    big = None
                part = None
                for o in arrays.values():
                    key = "%s/%s" % (_type_name(type(o)), o.dtype)
                    counts[key] += 1
                    if o.base is None:
                        nbytes[key] += int(o.nbytes)
                    if key in want:
                        members.setdefault(key, []).append(o)
                del arrays
            plain = [(n, i) for i, n in by_id.items() if i not in tensor_ids]
            plain.sort(key=lambda p: -p[0])
            keys = {}
            for n, i in plain[:TOP_TYPES]:
                keys.setdefault(_type_name(type_of[i]), (n, i))
            for key in want:                 # keep the series of a type under watch
                if key not in counts and key not in keys:
                    i = self.plain_types.get(key)
                    if i is not None and i in by_id:
                        keys[key] = (by_id[i], i)
            self.plain_types = {k: i for k, (n, i) in keys.items()}
            want_plain = {keys[k][1]: k for k in want if k in keys}
            for o in picked:
                key = want_plain.get(id(type(o)))
                if key is not None:
                    members.setdefault(key, []).append(o)
            picked.clear()
            for key, (n, i) in keys.items():
                counts[key] = n
            del type_of
            lines, growing = self._containers()
            holders = self._holders(counts, members, objs, started, growing)
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
            picked.clear()
            members.clear()
            while objs:                      # dropped a slice at a time too
                del objs[-SLICE:]
                time.sleep(0)

    def _user_modules(self):
        """The job's own modules (not the standard library's, not installed
        packages', not ours): {name: (module, file's base name)}; looked for
        again when a module was imported."""
        mods = sys.modules
        if len(mods) != self.nmodules:
            self.nmodules = len(mods)
            found = {}
            for name, mod in list(mods.items()):
                try:
                    path = mod.__dict__.get("__file__") if isinstance(mod, types.ModuleType) else None
                except Exception:
                    continue
                if name == "__main__" or _user_file(path):
                    found[name] = (mod, os.path.basename(path) if isinstance(path, str) else name)
            self.user_mods = found
        return self.user_mods

    def _frames(self):
        """The running frames of the job's own code, in every thread."""
        out = []
        for f in list(sys._current_frames().values()):
            while f is not None:
                code = f.f_code
                if code.co_name != "<module>" and _user_file(code.co_filename):
                    out.append(f)
                f = f.f_back
        return out

    def _containers(self):
        """The lines of the containers held by name, and {element key: holder
        text} for those that grew since the last census."""
        walk = _Walk(self._user_modules(), self._frames())
        found, growing, rows = walk.found, {}, []
        try:
            for name, c in found.items():
                try:
                    n = _length(c)
                    items = _last_items(c, SIZE_SAMPLE) if n else []
                except Exception:
                    continue
                h = self.held.get(name)
                if h is None:
                    if (n == 0 and len(self.held) > 4 * CONTAINERS_SENT) or len(self.held) >= HELD_MAX:
                        continue
                    h = self.held[name] = _Held(len(self.held))
                grew = bool(h.lengths) and n > h.lengths[-1]
                if h.lengths and n != h.lengths[-1]:
                    h.changed = True
                h.lengths.append(n)
                del h.lengths[:-(RISES_TO_TRACK + 1)]
                if n == 0:
                    continue
                try:
                    elem = _elem_key(items[0]) if items else None
                except Exception:
                    elem = None
                if h.elem is None and elem:
                    h.elem = _clean(elem, TYPE_MAX_BYTES - 24)
                size = int(n * (sum(map(_size, items)) / len(items))) if items else 0
                if grew and elem:
                    growing.setdefault(elem, name)
                rows.append((not h.changed, -n, h, size, name))
                del items
            rows.sort(key=lambda r: r[:2])
            lines = ["census %d held#%d/%s/%s %d %d %s" % (
                self.seq, h.num, _clean(_type_name(type(found[name])), 40), h.elem or "?",
                h.lengths[-1], size, _clean_holder(name)) for _, _, h, size, name in rows[:CONTAINERS_SENT]]
            return lines, growing
        finally:
            found.clear()

    @staticmethod
    def _rising(h):
        """The count rose at each of the last RISES_TO_TRACK - 1 censuses."""
        if len(h) < RISES_TO_TRACK:
            return False
        tail = h[-RISES_TO_TRACK:]
        return all(a < b for a, b in zip(tail, tail[1:]))

    def _holders(self, counts, members, objs, started, growing):
        """key -> holder text for the keys under watch that rose again: a
        container held by name that grew with it by one of its kind (cheap),
        else a walk up from one of its new objects (a full walk of the heap,
        within the budget)."""
        found = {}
        tracked, self.tracked = self.tracked, {}
        searched = 0
        for key in list(counts):
            h = self.history.get(key, [])
            if key in growing and h and counts[key] > h[-1]:
                self.holders[key] = found[key] = _clean_holder(growing[key])
        for key, items in members.items():
            h = self.history.get(key, [])
            if key in found:
                continue
            if len(items) > MAX_TRACKED_IDS or not h or counts.get(key, 0) <= h[-1]:
                continue                     # no longer rising: no longer watched
            before = tracked.get(key)
            self.tracked[key] = {id(o) for o in items}
            if before is None:
                continue
            spent = _clock() - started
            if (searched >= HOLDER_CANDIDATES or spent > HOLDER_BUDGET_S
                    or self._left(started) < spent):
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
    'local cache of step() in train.py'; None when no name is found."""
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
                        if isinstance(owner, type):
                            return "%s.%s (a class attribute, module %s)" % (
                                owner.__qualname__, k, _type_name(owner).rpartition(".")[0] or "builtins")
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
    """'local NAME of FUNCTION() in FILE' for c held by a running frame (no
    line: the name stays the same from one census to the next)."""
    for f in list(sys._current_frames().values()):
        while f is not None:
            if not _own_frame(f) and f.f_code.co_name != "<module>":
                try:
                    for k, v in f.f_locals.items():
                        if v is c:
                            return "local %s of %s() in %s" % (
                                k, f.f_code.co_name, os.path.basename(f.f_code.co_filename))
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
            if isinstance(r, type):          # a class: its __dict__ is a proxy of d
                try:
                    proxy = type.__dict__["__dict__"].__get__(r)
                    if any(x is d for x in gc.get_referents(proxy)):
                        return r
                except Exception:
                    pass
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

"""
keep_ctypes.py LIBTRACEKEEP [CALLS] — a Python job whose kept memory is allocated
while the GIL is released, as PyTorch's operators allocate theirs: ctypes
releases the GIL around every foreign call. grow_step() calls the tracer's
test helper keep_some() (which keeps one block in 50); a thread of its own
does the same from grow_in_thread(); grow_by_realloc() keeps blocks made by
libc's realloc. CALLS: keep_some() calls per thread (default 100000).
Needs only the standard library, so any CPython runs it.

Prints, for the test to check the sites against:
    KEPT_BYTES=<bytes keep_some kept, both threads>
    KEEP_LINE=<line of the call in grow_step>
    THREAD_LINE=<line of the call in grow_in_thread>
    REALLOC_LINE=<line of the realloc call>, REALLOC_BYTES=<bytes it kept>
"""
import ctypes
import sys
import threading

lib = ctypes.CDLL(sys.argv[1])
lib.keep_some.restype = ctypes.c_size_t
lib.keep_some.argtypes = [ctypes.c_size_t]
lib.keep_some_kept_bytes.restype = ctypes.c_size_t
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.realloc.restype = ctypes.c_void_p
libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
BLOCK = 8192
held = []


def grow_step(n):
    for _ in range(n):
        lib.keep_some(BLOCK)  # KEEP


def grow_in_thread(n):
    for _ in range(n):
        lib.keep_some(BLOCK)  # THREAD


def grow_by_realloc(n, size):
    for _ in range(n):
        p = libc.malloc(16)
        held.append(libc.realloc(p, size))  # REALLOC


def line_of(mark):
    with open(__file__) as f:
        return next(n for n, text in enumerate(f, 1) if text.rstrip().endswith("# " + mark))


def main():
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    t = threading.Thread(target=grow_in_thread, args=(calls,))
    t.start()
    grow_step(calls)
    t.join()
    grow_by_realloc(64, 256 * 1024)
    print("KEPT_BYTES=%d" % lib.keep_some_kept_bytes())
    print("KEEP_LINE=%d" % line_of("KEEP"))
    print("THREAD_LINE=%d" % line_of("THREAD"))
    print("REALLOC_LINE=%d" % line_of("REALLOC"))
    print("REALLOC_BYTES=%d" % (64 * 256 * 1024))
    sys.stdout.flush()


main()

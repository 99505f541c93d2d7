"""A native extension's leak, seen through ctypes: each step allocates a
work buffer with libc malloc, fills it, and never frees it (3 MiB a step,
every page touched). No Python object grows. Steps printed."""
import ctypes
import time
import corpus_truth as truth

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
size = 3 << 20
for i in range(truth.scale(60)):
    p = libc.malloc(size)
    libc.memset(p, 1, size)
    time.sleep(0.12)
    print("step %d" % (i + 1), flush=True)
    truth.step((i + 1) * size)

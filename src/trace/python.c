/*
 * python.c — the Python stack at a sampled allocation, for the tracer
 * (preload.c). Two ways to read it:
 *
 *  - In place: the interpreter's own frames, thread state and code objects
 *    read as memory, with the layout of the running version from the table
 *    below (CPython 3.10 - 3.13). No GIL needed, nothing allocated, nothing
 *    of Python's changed, so it also serves realloc and mmap, and the many
 *    allocations made while the GIL is released: PyTorch releases it around
 *    every operator, ctypes around every foreign call, NumPy around its
 *    loops. A thread reads only its own frames, which do not change while
 *    it runs C code; the code objects and names they point to are immutable
 *    and kept alive by those frames.
 *  - Through the C API (PyThreadState_GetFrame, PyFrame_GetBack, ...): any
 *    CPython 3.10+, but only in a thread that holds the GIL, and it
 *    allocates, so never from realloc or mmap.
 *
 * The table is not trusted on its version number alone: the first samples
 * taken with the GIL held are read both ways, the in-place read going
 * through process_vm_readv so that a wrong offset is an error and not a
 * crash, and the table is used once both give the same text. Until then,
 * or after RAW_TRIES disagreements (an unknown build, a debugger's line
 * tracing), only threads that hold the GIL get a Python stack.
 *
 * Everything here runs outside the tracer's lock and under its guard.
 * docs/internals/tracer.md, "Python", has the rest.
 */
#include "trace/trace.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define PY_RETRY_MAX 4096       /* sampled events between looks for CPython, at most */
#define RAW_TRIES 8             /* disagreements before the table is given up */
#define WALK_MAX 256            /* frames visited, skipped ones included */
#define FILE_MAX 1024
#define NAME_MAX_ 256

/* Offsets in bytes: offsetof() and sizeof() of each version's structures as
 * its headers declare them (the internal ones, with Py_BUILD_CORE), on
 * x86-64 and aarch64 alike (LP64, no packing). -1: no such field. */
struct py_layout {
	int minor;                  /* 3.minor */
	int ts_frame;               /* PyThreadState: frame (3.10), cframe (3.11, 3.12), current_frame */
	int cf_frame;               /* _PyCFrame: current_frame; -1 when ts_frame is the frame */
	int fr_code, fr_back;       /* the frame's code object and its caller's frame */
	int fr_instr;               /* 3.10: f_lasti (int, code units); later: instruction pointer */
	int fr_owner;               /* char; -1 before 3.11 */
	int co_filename, co_name, co_firsttraceable, co_code;
	int str_ascii_size;         /* sizeof(PyASCIIObject): where compact ASCII text starts */
	int str_compact_size;       /* sizeof(PyCompactUnicodeObject): other compact text */
	int str_utf8;               /* PyCompactUnicodeObject.utf8; utf8_length is the word before */
};

static const struct py_layout layouts[] = {
	{ .minor = 10, .ts_frame = 24, .cf_frame = -1, .fr_code = 32, .fr_back = 24, .fr_instr = 96,
	  .fr_owner = -1, .co_filename = 104, .co_name = 112, .co_firsttraceable = -1, .co_code = -1,
	  .str_ascii_size = 48, .str_compact_size = 72, .str_utf8 = 56 },
	{ .minor = 11, .ts_frame = 56, .cf_frame = 8, .fr_code = 32, .fr_back = 48, .fr_instr = 56,
	  .fr_owner = 69, .co_filename = 112, .co_name = 120, .co_firsttraceable = 168, .co_code = 184,
	  .str_ascii_size = 48, .str_compact_size = 72, .str_utf8 = 56 },
	{ .minor = 12, .ts_frame = 56, .cf_frame = 0, .fr_code = 0, .fr_back = 8, .fr_instr = 56,
	  .fr_owner = 70, .co_filename = 112, .co_name = 120, .co_firsttraceable = 176, .co_code = 192,
	  .str_ascii_size = 40, .str_compact_size = 56, .str_utf8 = 48 },
	{ .minor = 13, .ts_frame = 72, .cf_frame = -1, .fr_code = 0, .fr_back = 8, .fr_instr = 56,
	  .fr_owner = 70, .co_filename = 112, .co_name = 120, .co_firsttraceable = 184, .co_code = 200,
	  .str_ascii_size = 40, .str_compact_size = 56, .str_utf8 = 48 },
};

/* The same in every version listed: PyObject's ob_type, and str's fields. */
#define OB_TYPE 8
#define STR_LENGTH 16
#define STR_STATE 32
#define STR_KIND(state) (((state) >> 2) & 7u)
#define STR_COMPACT 0x20u
#define STR_ASCII 0x40u
#define OWNED_BY_GENERATOR 1
#define OWNED_BY_CSTACK 3       /* 3.12+: a shim frame, not the program's */

enum { RAW_UNTRIED, RAW_OK, RAW_BAD };

/* State: 0 not found yet (looked for again after 16, 32, ... up to
 * PY_RETRY_MAX sampled events: an embedding program may load libpython
 * late), 1 ready, -1 found but unusable (< 3.10). */
static struct {
	int state;
	int raw;                        /* RAW_*; atomic */
	int raw_tries;
	const struct py_layout *layout; /* NULL: not a version in the table */
	int (*is_initialized)(void);
	int (*gil_check)(void);
	void *(*this_tstate)(void);
	int (*addr2line)(void *, int);
	const void *code_type, *str_type;
	void *(*get_frame)(void *);
	void *(*frame_back)(void *);
	void *(*frame_code)(void *);
	int (*frame_line)(void *);
	void *(*getattr)(void *, void *);
	const char *(*as_utf8)(void *);
	void *(*from_string)(const char *);
	void (*decref)(void *);
	int (*gc_disable)(void);
	int (*gc_enable)(void);
	void (*err_fetch)(void **, void **, void **);
	void (*err_restore)(void *, void *, void *);
	void *s_filename, *s_name;      /* "co_filename", "co_name": kept for the process's life */
	uint64_t until_look;            /* sampled events before the next look */
	uint64_t look_every;
	bool seen_running;              /* Py_IsInitialized() was true once */
} py;

#define LOOKUP(field, name) (py.field = (__typeof__(py.field))dlsym(RTLD_DEFAULT, name))

/* 3.minor of the running interpreter, or -1. */
static int running_minor(void)
{
	const unsigned long *hex = dlsym(RTLD_DEFAULT, "Py_Version");     /* 3.11+ */
	if (hex)
		return (*hex >> 24) == 3 ? (int)((*hex >> 16) & 0xff) : -1;
	const char *(*get_version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
	const char *v = get_version ? get_version() : NULL;    /* a static buffer: no malloc */
	if (!v || v[0] != '3' || v[1] != '.')
		return -1;
	return atoi(v + 2);
}

void trace_py_resolve(void)
{
	if (__atomic_load_n(&py.state, __ATOMIC_ACQUIRE) != 0)
		return;
	if (py.until_look > 0) {
		py.until_look--;
		return;
	}
	LOOKUP(is_initialized, "Py_IsInitialized");
	if (!py.is_initialized) {
		/* a failed dlsym costs microseconds: look less and less often */
		py.look_every = py.look_every ? py.look_every * 2 : 16;
		if (py.look_every > PY_RETRY_MAX)
			py.look_every = PY_RETRY_MAX;
		py.until_look = py.look_every;
		return;
	}
	LOOKUP(gil_check, "PyGILState_Check");
	LOOKUP(this_tstate, "PyGILState_GetThisThreadState");
	LOOKUP(addr2line, "PyCode_Addr2Line");
	LOOKUP(code_type, "PyCode_Type");
	LOOKUP(str_type, "PyUnicode_Type");
	LOOKUP(get_frame, "PyThreadState_GetFrame");
	LOOKUP(frame_back, "PyFrame_GetBack");
	LOOKUP(frame_code, "PyFrame_GetCode");
	LOOKUP(frame_line, "PyFrame_GetLineNumber");
	LOOKUP(getattr, "PyObject_GetAttr");
	LOOKUP(as_utf8, "PyUnicode_AsUTF8");
	LOOKUP(from_string, "PyUnicode_FromString");
	LOOKUP(decref, "Py_DecRef");
	LOOKUP(gc_disable, "PyGC_Disable");
	LOOKUP(gc_enable, "PyGC_Enable");
	LOOKUP(err_fetch, "PyErr_Fetch");
	LOOKUP(err_restore, "PyErr_Restore");
	bool ok = py.gil_check && py.this_tstate && py.get_frame && py.frame_back && py.frame_code
		  && py.frame_line && py.getattr && py.as_utf8 && py.from_string && py.decref
		  && py.gc_disable && py.gc_enable && py.err_fetch && py.err_restore;
	int minor = running_minor();
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == minor)
			py.layout = &layouts[i];
	if (!py.layout || !py.addr2line || !py.code_type || !py.str_type)
		py.raw = RAW_BAD;
	/* threads may race here: they store the same values, and state last */
	__atomic_store_n(&py.state, ok ? 1 : -1, __ATOMIC_RELEASE);
}

bool trace_py_gone(void)
{
	return py.seen_running && !py.is_initialized();
}

/* ---- in place ------------------------------------------------------------ */

/* n bytes at addr into out. checked: through process_vm_readv, so that an
 * address that is not mapped is a failure and not a crash. */
static bool peek(bool checked, uintptr_t addr, void *out, size_t n)
{
	if (!checked) {
		memcpy(out, (const void *)addr, n);
		return true;
	}
	struct iovec local = { out, n }, remote = { (void *)addr, n };
	return addr && process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n;
}

static bool peek_ptr(bool checked, uintptr_t addr, uintptr_t *out)
{
	return peek(checked, addr, out, sizeof(*out));
}

static bool is_a(bool checked, uintptr_t obj, const void *type)
{
	uintptr_t t;
	return obj && peek_ptr(checked, obj + OB_TYPE, &t) && t == (uintptr_t)type;
}

/* UTF-8 of code point c into out (4 bytes of room); its length. */
static size_t utf8_put(uint32_t c, char *out)
{
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | (c >> 6 & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | c >> 18);
	out[1] = (char)(0x80 | (c >> 12 & 0x3f));
	out[2] = (char)(0x80 | (c >> 6 & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* A str's text as UTF-8 into buf, NUL-terminated, cut at a character to fit
 * cap. false when s is not a compact str (code objects hold no other kind). */
static bool read_str(const struct py_layout *L, bool checked, uintptr_t s, char *buf, size_t cap)
{
	int64_t length;
	uint32_t state;
	if (!is_a(checked, s, py.str_type) || !peek(checked, s + STR_LENGTH, &length, sizeof(length))
	    || !peek(checked, s + STR_STATE, &state, sizeof(state)) || !(state & STR_COMPACT) || length < 0)
		return false;
	size_t len = (size_t)length, n = 0;
	if (state & STR_ASCII) {
		n = len < cap - 1 ? len : cap - 1;
		if (!peek(checked, s + (uintptr_t)L->str_ascii_size, buf, n))
			return false;
		buf[n] = '\0';
		return true;
	}
	unsigned kind = STR_KIND(state);
	if (kind != 1 && kind != 2 && kind != 4)
		return false;
	uintptr_t data = s + (uintptr_t)L->str_compact_size;
	for (size_t i = 0; i < len; i++) {
		uint32_t c = 0;
		if (!peek(checked, data + i * kind, &c, kind))
			return false;
		char u[4];
		size_t k = utf8_put(c, u);
		if (n + k > cap - 1)
			break;
		memcpy(buf + n, u, k);
		n += k;
	}
	buf[n] = '\0';
	return true;
}

/* The thread state's frames into t, innermost first, as the C API would
 * give them; false when the layout does not fit what is in memory. */
static bool walk(const struct py_layout *L, bool checked, uintptr_t ts, struct trace_py_text *t)
{
	uintptr_t f;
	if (!peek_ptr(checked, ts + (uintptr_t)L->ts_frame, &f))
		return false;
	if (L->cf_frame >= 0 && f && !peek_ptr(checked, f + (uintptr_t)L->cf_frame, &f))
		return false;
	for (int depth = 0; f && depth < WALK_MAX && !t->full; depth++) {
		uintptr_t code, back;
		char owner = 0;
		if (!peek_ptr(checked, f + (uintptr_t)L->fr_code, &code)
		    || !peek_ptr(checked, f + (uintptr_t)L->fr_back, &back)
		    || (L->fr_owner >= 0 && !peek(checked, f + (uintptr_t)L->fr_owner, &owner, 1)))
			return false;
		if (owner == OWNED_BY_CSTACK || !is_a(checked, code, py.code_type)) {
			f = back;
			continue;
		}
		int addr;       /* the byte offset of the last instruction begun */
		if (L->co_code < 0) {
			int lasti;
			if (!peek(checked, f + (uintptr_t)L->fr_instr, &lasti, sizeof(lasti)))
				return false;
			addr = lasti * 2;
		} else {
			uintptr_t instr;
			int first;
			if (!peek_ptr(checked, f + (uintptr_t)L->fr_instr, &instr)
			    || !peek(checked, code + (uintptr_t)L->co_firsttraceable, &first, sizeof(first)))
				return false;
			addr = (int)((intptr_t)instr - (intptr_t)(code + (uintptr_t)L->co_code));
			if (owner != OWNED_BY_GENERATOR && addr < first * 2) {
				f = back;       /* not started: the C API skips it too */
				continue;
			}
		}
		uintptr_t file_obj, name_obj;
		char file[FILE_MAX], name[NAME_MAX_];
		if (!peek_ptr(checked, code + (uintptr_t)L->co_filename, &file_obj)
		    || !peek_ptr(checked, code + (uintptr_t)L->co_name, &name_obj))
			return false;
		if (!read_str(L, checked, file_obj, file, sizeof(file)))
			strcpy(file, "?");
		if (!read_str(L, checked, name_obj, name, sizeof(name)))
			strcpy(name, "?");
		trace_py_text_add(t, py.addr2line((void *)code, addr), name, file);
		f = back;
	}
	return true;
}

/* ---- through the C API --------------------------------------------------- */

static void api_walk(void *ts, struct trace_py_text *t)
{
	void *et, *ev, *etb;
	py.err_fetch(&et, &ev, &etb);
	int gc_was_on = py.gc_disable();
	/* made with PyUnicode_FromString, not interned: interning inserts into
	 * the interned dict, and the allocation being sampled may be its resize */
	if (!py.s_filename)
		py.s_filename = py.from_string("co_filename");
	if (!py.s_name)
		py.s_name = py.from_string("co_name");
	void *f = py.s_filename && py.s_name ? py.get_frame(ts) : NULL;
	while (f && !t->full) {
		void *code = py.frame_code(f);
		if (!code)
			break;
		int line = py.frame_line(f);
		void *file = py.getattr(code, py.s_filename);
		void *name = py.getattr(code, py.s_name);
		const char *file_s = file ? py.as_utf8(file) : NULL;
		const char *name_s = name ? py.as_utf8(name) : NULL;
		trace_py_text_add(t, line, name_s ? name_s : "?", file_s ? file_s : "?");
		if (file)
			py.decref(file);
		if (name)
			py.decref(name);
		py.decref(code);
		void *back = py.frame_back(f);
		py.decref(f);
		f = back;
	}
	if (f)
		py.decref(f);
	if (gc_was_on)
		py.gc_enable();
	py.err_restore(et, ev, etb);    /* also drops any error raised above */
}

/* ---- both ------------------------------------------------------------------ */

void trace_py_capture(struct trace_py_text *t, bool may_call_api)
{
	if (__atomic_load_n(&py.state, __ATOMIC_ACQUIRE) != 1 || !py.is_initialized())
		return;
	py.seen_running = true;
	/* the thread's own state, GIL or not; NULL in a thread that never ran
	 * Python (a library's worker pool) */
	void *ts = py.this_tstate();
	if (!ts)
		return;
	int raw = __atomic_load_n(&py.raw, __ATOMIC_ACQUIRE);
	if (raw == RAW_OK) {
		walk(py.layout, false, (uintptr_t)ts, t);
		return;
	}
	if (!may_call_api || !py.gil_check())
		return;
	api_walk(ts, t);
	if (raw != RAW_UNTRIED || t->nframes == 0)
		return;
	/* the GIL is held: no other thread is in here */
	struct trace_py_text mine;
	trace_py_text_init(&mine);
	if (walk(py.layout, true, (uintptr_t)ts, &mine) && mine.len == t->len
	    && memcmp(mine.buf, t->buf, t->len) == 0)
		__atomic_store_n(&py.raw, RAW_OK, __ATOMIC_RELEASE);
	else if (++py.raw_tries >= RAW_TRIES)
		__atomic_store_n(&py.raw, RAW_BAD, __ATOMIC_RELEASE);
}

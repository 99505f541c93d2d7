/*
 * trace.h — the core of the sampled allocation tracer (libleakproof-trace.so,
 * loaded into the job with LD_PRELOAD): byte sampling, the tables of sites
 * and of live sampled pointers, and the encoding of the wire lines. Nothing
 * here interposes anything, takes a lock or touches the process's state; the
 * entry points in preload.c do that around these pieces, which the unit tests
 * (t/unit/test_trace_*.c) drive directly.
 *
 * Nothing in the core calls malloc or stdio: tables live in pages from
 * trace_pages_alloc() (mmap), lines are formatted into caller buffers.
 *
 * Units: bytes; times in nanoseconds of CLOCK_MONOTONIC.
 * See docs/internals/tracer.md for the design and the protocol.
 */
#ifndef LP_TRACE_H
#define LP_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_LINE_MAX 4096        /* bytes of one wire line, newline included */
#define TRACE_FRAMES_MAX 64        /* native frames kept per site */
#define TRACE_PY_FRAMES_MAX 32     /* Python frames kept per site */
#define TRACE_PY_TEXT_MAX 3968     /* the py line's frames part: fits a line with its header */
#define TRACE_SYM_MAX 255          /* longer symbols are left out of the site line */
#define TRACE_FILTER_BITS 20       /* the free() filter: 2^20 one-byte counters ... */
#define TRACE_FILTER_SHIFT 10      /* ... each for 1 KiB of address space */

/* ---- pages ------------------------------------------------------------- */

/* Zeroed pages straight from the kernel (raw mmap syscall), rounded up to the
 * page size; NULL when the kernel refuses. Freed with trace_pages_free() and
 * the same size. */
void *trace_pages_alloc(size_t bytes);
void trace_pages_free(void *p, size_t bytes);

/* ---- sampling ---------------------------------------------------------- */

/* A per-thread xorshift64* generator. A zero state is replaced by a constant. */
struct trace_rng { uint64_t s; };
void trace_rng_seed(struct trace_rng *r, uint64_t seed);
uint64_t trace_rng_next(struct trace_rng *r);

/* Bytes until the next sample: exponential with mean mean_bytes, at least 1. */
int64_t trace_next_countdown(struct trace_rng *r, uint64_t mean_bytes);

/* What a sampled allocation of size bytes stands for: size / (1 - e^(-size/mean)),
 * the inverse of its chance of being sampled; 0 for size 0. */
uint64_t trace_weight(uint64_t size, uint64_t mean_bytes);

/* A 64-bit hash of a site: its kind, native frames and Python text. */
uint64_t trace_site_hash(char kind, const uintptr_t *frames, int nframes,
			 const char *py, size_t py_len);

/* ---- live sampled pointers --------------------------------------------- */

struct trace_ptr {
	uintptr_t ptr;          /* 0: empty slot */
	uint32_t site;          /* index into the site table */
	uint32_t pad;
	uint64_t weight_bytes;
};

/*
 * trace_ptrs — the live sampled pointers, open addressing with linear probing
 * and backward-shift deletion, doubled when more than half full. Beside it
 * sits a fixed filter of 2^TRACE_FILTER_BITS one-byte counters, one for each
 * 1 KiB granule of a 1 GiB window that wraps around the address space:
 * counter 0 means "certainly not sampled", which lets free() skip the table
 * (and its lock) without a lookup. Indexing by address rather than by a hash
 * keeps the filter byte of a block near those of its neighbours, so free()
 * reads a cache line that the heap's own locality keeps warm (a hashed index
 * cost an L1 miss per free). Counters saturate at 255 and then stay there (a
 * false "maybe", never a false "no").
 * Every call but trace_ptrs_maybe() needs the caller's lock.
 */
struct trace_ptrs {
	struct trace_ptr *slots;
	size_t cap;             /* a power of two, or 0 before the first insert */
	size_t count;
	uint8_t *filter;        /* 2^TRACE_FILTER_BITS bytes */
};

/* 0, or -1 when no pages could be had for the filter. */
int trace_ptrs_init(struct trace_ptrs *t);
/* Returns the pages to the kernel; t is zeroed. */
void trace_ptrs_release(struct trace_ptrs *t);

static inline size_t trace_filter_slot(uintptr_t p)
{
	return (size_t)(p >> TRACE_FILTER_SHIFT) & (((size_t)1 << TRACE_FILTER_BITS) - 1);
}

/* false when p is certainly not in the table; safe without the lock. */
static inline bool trace_ptrs_maybe(const struct trace_ptrs *t, uintptr_t p)
{
	return __atomic_load_n(&t->filter[trace_filter_slot(p)], __ATOMIC_RELAXED) != 0;
}

/* Adds p. When p was already there (its free went unseen), its old entry is
 * replaced and returned in *old (old->ptr != 0). 0, or -1 when the table
 * could not grow (p is not added). */
int trace_ptrs_insert(struct trace_ptrs *t, uintptr_t p, uint32_t site, uint64_t weight_bytes,
		      struct trace_ptr *old /* out */);
/* Removes p: 1 with its entry in *out, or 0 when p is not there. */
int trace_ptrs_remove(struct trace_ptrs *t, uintptr_t p, struct trace_ptr *out /* out */);

/* ---- sites ------------------------------------------------------------- */

struct trace_frame {
	uint64_t vaddr;         /* address in the object's ELF virtual addresses */
	const char *sym;        /* the loader's string (lives with the object), or NULL */
	uint32_t map;           /* map id; 0 when the address is in no known object */
};

/*
 * One allocation site as the tracer keeps it inside the job's process: a
 * record of an mmap'd arena, found by hash, with its frames inline. The
 * supervisor rebuilds the same site from the wire lines as a struct
 * trace_site (base/trace_site.h, which this folder may not include); the
 * store keeps it as a trace_site_row, judge/sites.c ranks it as a
 * trace_site_report.
 */
struct tracer_site {
	uint64_t hash;
	uint32_t id;            /* the wire id: index + 1 */
	uint32_t next_dirty;    /* index + 1 of the next dirty site, 0 at the end */
	char kind;              /* 'm' heap, 'a' anonymous mmap */
	bool announced;         /* its site (and py) line went out */
	bool dirty;             /* changed since the last live line that went out */
	uint16_t nframes;
	uint16_t py_len;        /* bytes of py text, 0 when none was captured */
	int64_t live_bytes;     /* estimated */
	uint64_t allocs, frees; /* sampled, cumulative */
	char *py;               /* "line:func:file\t..." (not NUL-terminated), or NULL */
	struct trace_frame frames[];
};

/*
 * trace_sites — every site seen in this process, found by hash. Records come
 * from an arena of mmap'd chunks and live until trace_sites_release(); the
 * index is open addressing over the hash, doubled when half full. Changed
 * sites are chained on a dirty list for the next flush.
 */
struct trace_sites {
	struct tracer_site **by_index;   /* index -> record */
	size_t count, by_index_cap;
	uint32_t *slots;                /* hash slots: index + 1, 0 empty */
	size_t slot_cap;
	char *chunk;                    /* the arena chunk being filled */
	size_t chunk_used, chunk_cap;
	void **chunks;                  /* every chunk, to give them back */
	size_t nchunks, chunks_cap;
	uint32_t dirty_head;            /* index + 1, 0 when none */
	size_t bytes;                   /* pages held, for the docs' accounting */
};

void trace_sites_init(struct trace_sites *s);
void trace_sites_release(struct trace_sites *s);
/* The site with this hash, or NULL. */
struct tracer_site *trace_sites_find(struct trace_sites *s, uint64_t hash);
/* A new site (not announced, not dirty) with copies of the frames and the py
 * text; NULL when out of pages. The caller made sure the hash is new. */
struct tracer_site *trace_sites_add(struct trace_sites *s, uint64_t hash, char kind,
				   const struct trace_frame *frames, int nframes,
				   const char *py, size_t py_len);
static inline struct tracer_site *trace_sites_get(const struct trace_sites *s, uint32_t index)
{
	return index < s->count ? s->by_index[index] : NULL;
}
/* Puts the site on the dirty list (once). */
void trace_sites_mark(struct trace_sites *s, struct tracer_site *site);
/* Takes the whole dirty list: returns its head (index + 1, 0 when empty),
 * sites still flagged dirty; the caller walks next_dirty, clearing or
 * re-marking each. */
uint32_t trace_sites_take_dirty(struct trace_sites *s);

/* ---- line encoding ----------------------------------------------------- */

/* A line being formatted into a fixed buffer; an append that does not fit
 * sets overflow and leaves the buffer as it was. */
struct trace_line {
	char *buf;
	size_t len, cap;        /* cap counts the newline: TRACE_LINE_MAX */
	bool overflow;
};
void trace_line_init(struct trace_line *l, char *buf, size_t cap);
void trace_line_str(struct trace_line *l, const char *s);
void trace_line_mem(struct trace_line *l, const char *s, size_t n);
void trace_line_u64(struct trace_line *l, uint64_t v);
void trace_line_i64(struct trace_line *l, int64_t v);
void trace_line_hex(struct trace_line *l, uint64_t v);
void trace_line_ch(struct trace_line *l, char c);
/* Ends the line with '\n' (always room: appends keep one byte) and returns
 * its length. */
size_t trace_line_end(struct trace_line *l);

/* Each returns the length of the line in buf (newline included; at most
 * TRACE_LINE_MAX, which buf must hold). Text that is no single field (exe
 * path, object path) has newlines replaced by '?' and is cut to fit. */
size_t trace_enc_hello(char *buf, long pid, long ppid, uint64_t mean_bytes, const char *exe);
size_t trace_enc_map(char *buf, long pid, uint32_t map_id, const char *path);
/* Outermost frames that do not fit are dropped; a symbol that is too long or
 * holds a space or control byte is left out. *nframes_out: frames written. */
size_t trace_enc_site(char *buf, long pid, const struct tracer_site *site, int *nframes_out /* out */);
size_t trace_enc_py(char *buf, long pid, const struct tracer_site *site);
/* The header of a live line: "live PID SEQ T_NS". */
void trace_enc_live_begin(struct trace_line *l, long pid, uint64_t seq, uint64_t t_ns);
/* Appends " ID:LIVE:ALLOCS:FREES"; false (line unchanged) when it does not fit. */
bool trace_enc_live_add(struct trace_line *l, const struct tracer_site *site);
size_t trace_enc_end(char *buf, long pid, uint64_t seq, int64_t total_live_bytes, uint64_t dropped);

/*
 * trace_py_text — builds a site's Python text "LINE:FUNC:FILE\tLINE:FUNC:FILE..."
 * innermost first, one frame at a time, into a buffer of TRACE_PY_TEXT_MAX.
 * Tabs, newlines and other control bytes in names become '?'. A frame that
 * does not fit whole ends the text (outermost frames dropped); a single first
 * frame too long for the buffer has its file name cut.
 */
struct trace_py_text {
	char buf[TRACE_PY_TEXT_MAX];
	size_t len;
	int nframes;
	bool full;
};
void trace_py_text_init(struct trace_py_text *t);
/* false once the text is full (this frame and any after it are dropped). */
bool trace_py_text_add(struct trace_py_text *t, long line, const char *func, const char *file);

/*
 * python.c — the Python stack of the calling thread at a sampled event.
 * Outside the tracer's lock, under its guard.
 */
/* Looks for CPython in the process (cheap when already found or long absent). */
void trace_py_resolve(void);
/* Appends the calling thread's Python frames to t, innermost first, when it
 * has any. py_api: the C API may be called (not from realloc or mmap). */
void trace_py_capture(struct trace_py_text *t, bool py_api);
/* CPython ran and has begun tearing itself down. */
bool trace_py_gone(void);

#endif

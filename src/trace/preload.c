/*
 * preload.c — the entry points of libleakproof-trace.so, the sampled
 * allocation tracer that `leakproof run --trace` loads into the job with
 * LD_PRELOAD. It interposes the malloc family and anonymous mmap, samples
 * allocations by bytes (sample.c), keeps the live sampled pointers and the
 * per-site totals (tables.c), and writes the wire lines (encode.c) to the
 * pipe named by LEAKPROOF_TRACE_FD. docs/internals/tracer.md has the design,
 * the protocol and the safety rules; in short:
 *
 *  - The fast path is a thread-local countdown: malloc subtracts the size
 *    and goes on unless it crossed zero; free checks a global count and a
 *    one-byte filter slot before it would look anything up.
 *  - One lock (g.lock) guards the tables, only on the sampled path. It is a
 *    leaf: nothing that can take the loader's lock (dladdr, dlsym, the
 *    unwinder) and nothing of Python's runs while it is held.
 *  - A thread-local guard (t_busy) makes everything the tracer itself causes
 *    (the unwinder's and Python's allocations, a signal handler's malloc in
 *    the middle of ours) untraced, and makes a free under the guard only try
 *    the lock.
 *  - No stdio, no malloc: tables come from mmap, lines are formatted into
 *    static buffers and written with one write(2) each to a descriptor in
 *    O_NONBLOCK; a line that would block is dropped and counted.
 *  - Without a usable LEAKPROOF_TRACE_FD nothing is done but forwarding.
 *
 * Units: bytes; nanoseconds of CLOCK_MONOTONIC.
 */
#define UNW_LOCAL_ONLY
#include "trace/trace.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define unlikely(x) __builtin_expect(!!(x), 0)

#define DEFAULT_MEAN_BYTES 524288
#define DEFAULT_INTERVAL_MS 200
#define STEP_FLUSH_MIN_NS 20000000ull   /* a step flushes, but not more often than this */
#define MAPS_MAX 4096               /* objects given a map id; later ones get 0 */
#define UNARMED_COUNTDOWN 65536     /* before the tracer is on: look again this soon */
#define ALTSTACK_RECHECK 256        /* see on_altstack() */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

enum { ST_UNINIT, ST_OFF, ST_ON };

static int g_state = ST_UNINIT;     /* atomic */
static size_t g_nlive;              /* atomic: live sampled pointers (free's first check) */

static TLS int64_t t_left;          /* bytes until this thread's next sample */
static TLS int t_armed;
static TLS int t_busy;              /* the guard: > 0 inside the tracer */
static TLS struct trace_rng t_rng;
static TLS int t_altstack_recheck;  /* samples before asking sigaltstack() again */

struct map {
	const struct link_map *lm;
	uintptr_t l_addr;
	uint32_t id;
	bool announced;
};

/* A frame as symbolized outside the lock. */
struct raw_frame {
	const struct link_map *lm;  /* NULL: in no object */
	uint64_t vaddr;
	const char *sym;
};

static struct {
	pthread_mutex_t lock;
	int fd;
	bool fd_is_pipe;
	uint64_t mean_bytes;
	uint64_t interval_ns;
	const uint64_t *steps;          /* the supervisor's step counter (mapped), or NULL */
	long pid;
	uintptr_t self_lo, self_hi;     /* this library's mapped range */
	char exe[4096];

	/* under lock */
	struct trace_ptrs ptrs;
	struct trace_sites sites;
	struct map maps[MAPS_MAX];
	uint32_t nmaps;
	bool unknown_announced;         /* map 0 */
	int64_t total_live_bytes;
	uint64_t seq, dropped;
	uint64_t last_flush_ns;
	uint64_t flushed_steps;         /* *steps at the last flush */
	uint64_t samples;
	char line[TRACE_LINE_MAX];
	uint32_t in_line[TRACE_LINE_MAX / 8];   /* sites in the live line being built */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* ---- small helpers ----------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A decimal environment value in [lo, hi], else dflt. */
static long long env_num(const char *name, long long dflt, long long lo, long long hi)
{
	const char *s = getenv(name);
	long long v = 0;
	if (!s || !*s)
		return dflt;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > hi)
			return dflt;
		v = v * 10 + (*s - '0');
	}
	return v < lo || v > hi ? dflt : v;
}

static void arm_thread(void)
{
	uint64_t seed = (uint64_t)(uintptr_t)&t_left ^ now_ns() ^ ((uint64_t)syscall(SYS_gettid) << 32);
	trace_rng_seed(&t_rng, seed);
	t_armed = 1;
	t_left = trace_next_countdown(&t_rng, g.mean_bytes);
}

static void lock(void)
{
	pthread_mutex_lock(&g.lock);
}

/* Under the guard a signal handler may have interrupted our own locked
 * section: only try. */
static bool lock_or_try(void)
{
	if (t_busy > 1)
		return pthread_mutex_trylock(&g.lock) == 0;
	pthread_mutex_lock(&g.lock);
	return true;
}

static void unlock(void)
{
	pthread_mutex_unlock(&g.lock);
}

/* ---- emitting ---------------------------------------------------------- */

/*
 * Writing to a pipe whose reader is gone raises SIGPIPE, which would kill
 * the job: writes happen with SIGPIPE blocked, and a SIGPIPE we caused is
 * taken back before it is unblocked.
 */
struct pipe_guard {
	sigset_t old;
	bool active, was_pending, epipe;
};

static void guard_begin(struct pipe_guard *pg)
{
	sigset_t set, pending;
	pg->active = g.fd_is_pipe;
	pg->epipe = false;
	if (!pg->active)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &pg->old);
	sigpending(&pending);
	pg->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

static void guard_end(struct pipe_guard *pg)
{
	if (!pg->active)
		return;
	if (pg->epipe && !pg->was_pending) {
		sigset_t set;
		struct timespec zero = { 0, 0 };
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		sigtimedwait(&set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &pg->old, NULL);
}

/* One line, one write(2); false (and counted) when it did not go out whole. */
static bool emit(struct pipe_guard *pg, const char *buf, size_t len)
{
	for (int tries = 0; tries < 3; tries++) {
		ssize_t n = write(g.fd, buf, len);
		if (n == (ssize_t)len)
			return true;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EPIPE) {
			pg->epipe = true;
			/* nobody reads any more: stop sampling, keep forwarding */
			__atomic_store_n(&g_state, ST_OFF, __ATOMIC_RELAXED);
		}
		break;
	}
	g.dropped++;
	return false;
}

/* The path of a map: the loader's name, the executable for "". */
static const char *map_path(const struct link_map *lm)
{
	return lm && lm->l_name && lm->l_name[0] ? lm->l_name : g.exe;
}

/* The map id of an object, announcing it when new (under lock). */
static uint32_t map_id(const struct link_map *lm, uintptr_t l_addr)
{
	if (!lm)
		return 0;
	for (uint32_t i = 0; i < g.nmaps; i++)
		if (g.maps[i].lm == lm && g.maps[i].l_addr == l_addr)
			return g.maps[i].id;
	if (g.nmaps == MAPS_MAX)
		return 0;
	struct map *m = &g.maps[g.nmaps++];
	m->lm = lm;
	m->l_addr = l_addr;
	m->id = g.nmaps;        /* 1.. */
	m->announced = false;
	return m->id;
}

static struct map *map_by_id(uint32_t id)
{
	return id >= 1 && id <= g.nmaps ? &g.maps[id - 1] : NULL;
}

/* map, site and py lines of a site not yet announced (under lock). */
static void announce(struct pipe_guard *pg, struct tracer_site *site)
{
	bool ok = true;
	int nframes = 0;
	size_t len = trace_enc_site(g.line, g.pid, site, &nframes);
	for (int i = 0; i < nframes; i++) {
		uint32_t id = site->frames[i].map;
		if (id == 0 && !g.unknown_announced) {
			size_t n = trace_enc_map(g.line, g.pid, 0, "[unknown]");
			g.unknown_announced = emit(pg, g.line, n);
			ok = ok && g.unknown_announced;
		}
		struct map *m = map_by_id(id);
		if (m && !m->announced) {
			size_t n = trace_enc_map(g.line, g.pid, id, map_path(m->lm));
			m->announced = emit(pg, g.line, n);
			ok = ok && m->announced;
		}
	}
	if (!ok)
		return;
	len = trace_enc_site(g.line, g.pid, site, NULL);
	if (!emit(pg, g.line, len))
		return;
	if (site->py_len) {
		len = trace_enc_py(g.line, g.pid, site);
		if (!emit(pg, g.line, len))
			return;     /* announced again later: the site line repeats */
	}
	site->announced = true;
}

/* Writes the live lines of the changed sites and an end line, when the
 * interval has passed, a step was marked since the last time (at most every
 * STEP_FLUSH_MIN_NS), or force (under lock). */
static void flush(bool force)
{
	uint64_t t = now_ns();
	uint64_t steps = g.steps ? __atomic_load_n(g.steps, __ATOMIC_RELAXED) : 0;
	if (!force && t - g.last_flush_ns < g.interval_ns &&
	    (steps == g.flushed_steps || t - g.last_flush_ns < STEP_FLUSH_MIN_NS))
		return;
	g.last_flush_ns = t;
	g.flushed_steps = steps;
	uint32_t next = trace_sites_take_dirty(&g.sites);
	if (!next && !force)
		return;

	struct pipe_guard pg;
	struct trace_line l;
	size_t in_line = 0;
	uint64_t seq = ++g.seq;
	guard_begin(&pg);
	trace_line_init(&l, g.line, TRACE_LINE_MAX);
	trace_enc_live_begin(&l, g.pid, seq, t);
	while (next) {
		struct tracer_site *site = trace_sites_get(&g.sites, next - 1);
		next = site->next_dirty;
		site->dirty = false;
		if (!site->announced) {
			/* a site line that was dropped: again, before any live line of it */
			announce(&pg, site);
			if (!site->announced) {
				trace_sites_mark(&g.sites, site);
				continue;
			}
			trace_line_init(&l, g.line, TRACE_LINE_MAX);   /* announce used the buffer */
			trace_enc_live_begin(&l, g.pid, seq, t);
			for (size_t i = 0; i < in_line; i++)
				trace_enc_live_add(&l, trace_sites_get(&g.sites, g.in_line[i] - 1));
		}
		if (!trace_enc_live_add(&l, site)) {
			if (!emit(&pg, g.line, trace_line_end(&l)))
				for (size_t i = 0; i < in_line; i++)
					trace_sites_mark(&g.sites, trace_sites_get(&g.sites, g.in_line[i] - 1));
			in_line = 0;
			trace_line_init(&l, g.line, TRACE_LINE_MAX);
			trace_enc_live_begin(&l, g.pid, seq, t);
			trace_enc_live_add(&l, site);
		}
		g.in_line[in_line++] = site->id;
	}
	if (in_line && !emit(&pg, g.line, trace_line_end(&l)))
		for (size_t i = 0; i < in_line; i++)
			trace_sites_mark(&g.sites, trace_sites_get(&g.sites, g.in_line[i] - 1));
	size_t n = trace_enc_end(g.line, g.pid, seq, g.total_live_bytes, g.dropped);
	emit(&pg, g.line, n);
	guard_end(&pg);
}

static void hello(void)
{
	struct pipe_guard pg;
	size_t n = trace_enc_hello(g.line, g.pid, (long)getppid(), g.mean_bytes, g.exe);
	guard_begin(&pg);
	emit(&pg, g.line, n);
	guard_end(&pg);
}

/*
 * CPython tears its modules down after Py_IsInitialized() turns false, and
 * frees everything they held: flushed at exit, every site would end near
 * zero. So the first sampled event after that flushes the state as the
 * program left it and stops the tracer (under lock; true when stopped).
 */
static bool py_finalizing(void)
{
	if (!trace_py_gone())
		return false;
	flush(true);
	__atomic_store_n(&g_state, ST_OFF, __ATOMIC_RELAXED);
	return true;
}

/* ---- the sampled path -------------------------------------------------- */

static bool in_self(uintptr_t ip)
{
	return ip >= g.self_lo && ip < g.self_hi;
}

/* A sampled pointer freed: its weight leaves its site's live bytes and the
 * total. */
static void account_free(const struct trace_ptr *e)
{
	struct tracer_site *site = trace_sites_get(&g.sites, e->site);
	if (site) {
		site->live_bytes -= (int64_t)e->weight_bytes;
		site->frees++;
		trace_sites_mark(&g.sites, site);
	}
	g.total_live_bytes -= (int64_t)e->weight_bytes;
}

static void account_alloc(struct tracer_site *site, uintptr_t p, uint64_t weight)
{
	struct trace_ptr old;
	if (trace_ptrs_insert(&g.ptrs, p, site->id - 1, weight, &old))
		return;         /* out of pages: this sample is lost */
	if (old.ptr)        /* its free went unseen (a free under the guard) */
		account_free(&old);
	site->live_bytes += (int64_t)weight;
	site->allocs++;
	g.total_live_bytes += (int64_t)weight;
	trace_sites_mark(&g.sites, site);
	__atomic_store_n(&g_nlive, g.ptrs.count, __ATOMIC_RELAXED);
}

/*
 * Return addresses with their object and symbol, as dladdr1 gave them. Sites
 * share most of their frames (the interpreter's, the framework's), and
 * dladdr walks a library's whole symbol table: without this, naming the new
 * sites of a PyTorch job took 8 % of its time. Direct-mapped; emptied when
 * an object has been unloaded since it was filled (the loader's dlpi_subs),
 * as its symbols' names went with it. Its lock is a leaf, never held over
 * dladdr or dl_iterate_phdr.
 */
#define SYMCACHE_SIZE 8192

static struct {
	pthread_mutex_t lock;
	unsigned long long subs;
	struct symcache_entry {
		uintptr_t pc;
		const struct link_map *lm;
		const char *sym;
	} e[SYMCACHE_SIZE];
} symcache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int loader_subs(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(unsigned long long *)data = info->dlpi_subs;
	return 1;       /* the counters are the same in every object's info */
}

static struct symcache_entry *symcache_slot(uintptr_t pc)
{
	return &symcache.e[(pc * 0x9e3779b97f4a7c15ull) >> 51];    /* top 13 bits */
}

/* The object, address in it, and symbol of each return address. */
static void symbolize(const uintptr_t *keys, int n, struct raw_frame *out)
{
	bool hit[TRACE_FRAMES_MAX];
	unsigned long long subs = 0;
	dl_iterate_phdr(loader_subs, &subs);
	pthread_mutex_lock(&symcache.lock);
	if (subs != symcache.subs) {
		memset(symcache.e, 0, sizeof(symcache.e));
		symcache.subs = subs;
	}
	for (int i = 0; i < n; i++) {
		uintptr_t pc = keys[i] - 1;     /* inside the call instruction */
		struct symcache_entry *e = symcache_slot(pc);
		hit[i] = e->pc == pc;
		out[i].lm = hit[i] ? e->lm : NULL;
		out[i].sym = hit[i] ? e->sym : NULL;
		out[i].vaddr = pc - (out[i].lm ? out[i].lm->l_addr : 0);
	}
	pthread_mutex_unlock(&symcache.lock);
	for (int i = 0; i < n; i++) {
		Dl_info info;
		struct link_map *lm = NULL;
		uintptr_t pc = keys[i] - 1;
		if (hit[i] || !dladdr1((void *)pc, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
			continue;
		out[i].lm = lm;
		out[i].vaddr = pc - lm->l_addr;
		out[i].sym = info.dli_sname;
	}
	pthread_mutex_lock(&symcache.lock);
	for (int i = 0; i < n && subs == symcache.subs; i++) {
		if (hit[i])
			continue;
		struct symcache_entry *e = symcache_slot(keys[i] - 1);
		e->pc = keys[i] - 1;
		e->lm = out[i].lm;
		e->sym = out[i].sym;
	}
	pthread_mutex_unlock(&symcache.lock);
}

static void record(void *p, size_t size, char kind, bool py_api)
{
	void *ips[TRACE_FRAMES_MAX + 8];
	struct raw_frame raw[TRACE_FRAMES_MAX];
	struct trace_frame frames[TRACE_FRAMES_MAX];
	struct trace_py_text pytext;
	uintptr_t keys[TRACE_FRAMES_MAX];
	int n = unw_backtrace(ips, TRACE_FRAMES_MAX + 8), skip = 0, nf = 0;

	while (skip < n && in_self((uintptr_t)ips[skip]))
		skip++;
	for (int i = skip; i < n && nf < TRACE_FRAMES_MAX; i++)
		keys[nf++] = (uintptr_t)ips[i];

	trace_py_text_init(&pytext);
	trace_py_resolve();
	trace_py_capture(&pytext, py_api);
	uint64_t hash = trace_site_hash(kind, keys, nf, pytext.buf, pytext.len);
	uint64_t weight = trace_weight(size, g.mean_bytes);

	lock();
	if (__atomic_load_n(&g_state, __ATOMIC_RELAXED) != ST_ON || py_finalizing()) {
		unlock();
		return;
	}
	struct tracer_site *site = trace_sites_find(&g.sites, hash);
	if (!site) {
		unlock();
		symbolize(keys, nf, raw);      /* outside the lock: it takes the loader's */
		lock();
		site = trace_sites_find(&g.sites, hash);
		if (!site) {
			for (int i = 0; i < nf; i++) {
				frames[i].vaddr = raw[i].vaddr;
				frames[i].sym = raw[i].sym;
				frames[i].map = map_id(raw[i].lm, raw[i].lm ? raw[i].lm->l_addr : 0);
			}
			site = trace_sites_add(&g.sites, hash, kind, frames, nf,
					       pytext.len ? pytext.buf : NULL, pytext.len);
			if (site) {
				struct pipe_guard pg;
				guard_begin(&pg);
				announce(&pg, site);
				guard_end(&pg);
			}
		}
	}
	if (site)
		account_alloc(site, (uintptr_t)p, weight);
	g.samples++;
	flush(false);
	unlock();
}

/* Forgets a sampled pointer being freed; with keep, its entry goes to *out
 * (realloc may have to put it back). 1 when it was there. */
static int forget(void *p, struct trace_ptr *out)
{
	struct trace_ptr e;
	int saved = errno, found = 0;
	t_busy++;
	if (lock_or_try()) {
		if (t_busy == 1 && __atomic_load_n(&g_state, __ATOMIC_RELAXED) == ST_ON)
			py_finalizing();
		found = trace_ptrs_remove(&g.ptrs, (uintptr_t)p, &e);
		if (found) {
			account_free(&e);
			__atomic_store_n(&g_nlive, g.ptrs.count, __ATOMIC_RELAXED);
			if (out)
				*out = e;
			if (t_busy == 1 && __atomic_load_n(&g_state, __ATOMIC_RELAXED) == ST_ON)
				flush(false);
		}
		unlock();
	}
	t_busy--;
	errno = saved;
	return found;
}

/* realloc failed after its old pointer was forgotten: put it back. */
static void unforget(void *p, const struct trace_ptr *e)
{
	t_busy++;
	lock();
	struct tracer_site *site = trace_sites_get(&g.sites, e->site);
	if (site) {
		struct trace_ptr old;
		if (trace_ptrs_insert(&g.ptrs, (uintptr_t)p, e->site, e->weight_bytes, &old) == 0) {
			site->live_bytes += (int64_t)e->weight_bytes;
			site->frees--;
			g.total_live_bytes += (int64_t)e->weight_bytes;
			trace_sites_mark(&g.sites, site);
			__atomic_store_n(&g_nlive, g.ptrs.count, __ATOMIC_RELAXED);
		}
	}
	unlock();
	t_busy--;
}

/* True when running on an alternate signal stack. sigaltstack() is a system
 * call (1 % of the benchmark when made on every sample), so a thread that
 * has no alternate stack is asked again only every ALTSTACK_RECHECK samples. */
static bool on_altstack(void)
{
	stack_t ss;
	if (t_altstack_recheck > 0) {
		t_altstack_recheck--;
		return false;
	}
	if (sigaltstack(NULL, &ss))
		return false;
	if (ss.ss_flags & SS_DISABLE)
		t_altstack_recheck = ALTSTACK_RECHECK;
	return (ss.ss_flags & SS_ONSTACK) != 0;
}

/* The countdown crossed zero: sample this allocation, or re-arm. */
static __attribute__((noinline)) void slow_alloc(void *p, size_t size, char kind, bool py_api)
{
	int state = __atomic_load_n(&g_state, __ATOMIC_RELAXED);
	if (state != ST_ON) {
		t_left = state == ST_OFF ? INT64_MAX : UNARMED_COUNTDOWN;
		return;
	}
	if (!t_armed) {
		arm_thread();
		t_left -= (int64_t)size;
		if (t_left >= 0)
			return;
	}
	t_left = trace_next_countdown(&t_rng, g.mean_bytes);
	if (!p || size == 0 || t_busy)
		return;
	int saved = errno;
	if (on_altstack()) {
		/* a signal handler on a small alternate stack: the sampled path
		 * needs about 10 KiB of stack, so this one goes by unsampled */
		errno = saved;
		return;
	}
	t_busy++;
	record(p, size, kind, py_api);
	t_busy--;
	errno = saved;
}

static inline void count(void *p, size_t size, char kind, bool py_api)
{
	if (unlikely((t_left -= (int64_t)size) < 0))
		slow_alloc(p, size, kind, py_api);
}

static inline bool maybe_sampled(const void *p)
{
	return unlikely(__atomic_load_n(&g_nlive, __ATOMIC_RELAXED) != 0) && p
	       && trace_ptrs_maybe(&g.ptrs, (uintptr_t)p);
}

/* ---- interposed entry points ------------------------------------------- */

/* malloc and calloc, the hottest entry points, decide before they allocate
 * so that the fast path is a subtraction and a tail call. */
static __attribute__((noinline)) void *malloc_slow(size_t size)
{
	void *p = __libc_malloc(size);
	slow_alloc(p, size, 'm', true);
	return p;
}

EXPORT void *malloc(size_t size)
{
	if (__builtin_expect((t_left -= (int64_t)size) >= 0, 1))
		return __libc_malloc(size);
	return malloc_slow(size);
}

static __attribute__((noinline)) void *calloc_slow(size_t n, size_t size, size_t total)
{
	void *p = __libc_calloc(n, size);
	slow_alloc(p, total, 'm', true);
	return p;
}

EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total))
		return __libc_calloc(n, size);          /* fails with ENOMEM */
	if (__builtin_expect((t_left -= (int64_t)total) >= 0, 1))
		return __libc_calloc(n, size);
	return calloc_slow(n, size, total);
}

EXPORT void free(void *p)
{
	if (maybe_sampled(p))
		forget(p, NULL);
	__libc_free(p);
}

EXPORT void *realloc(void *p, size_t size)
{
	struct trace_ptr e;
	int had = maybe_sampled(p) ? forget(p, &e) : 0;
	void *q = __libc_realloc(p, size);
	if (!q && size && had)
		unforget(p, &e);       /* p is still the caller's */
	else if (q)
		count(q, size, 'm', false);
	return q;
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, total);
}

EXPORT void *memalign(size_t align, size_t size)
{
	void *p = __libc_memalign(align, size);
	count(p, size, 'm', true);
	return p;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	void *p = __libc_memalign(align, size);
	count(p, size, 'm', true);
	return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	int saved = errno;
	void *p = __libc_memalign(align, size);
	errno = saved;
	if (!p)
		return ENOMEM;
	*out = p;
	count(p, size, 'm', true);
	return 0;
}

EXPORT void *valloc(size_t size)
{
	void *p = __libc_valloc(size);
	count(p, size, 'm', true);
	return p;
}

EXPORT void *pvalloc(size_t size)
{
	void *p = __libc_pvalloc(size);
	count(p, size, 'm', true);
	return p;
}

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (r == -1)
		return MAP_FAILED;
	/* private anonymous memory, not a thread stack, not a bare reservation */
	if ((flags & MAP_ANONYMOUS) && (flags & 3) == MAP_PRIVATE && !(flags & MAP_STACK)
	    && prot != PROT_NONE) {
		if ((flags & MAP_FIXED) && maybe_sampled((void *)r))
			forget((void *)r, NULL);
		count((void *)r, len, 'a', false);
	}
	return (void *)r;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len)
{
	if (maybe_sampled(addr))
		forget(addr, NULL);
	return (int)syscall(SYS_munmap, addr, len);
}

/* A last flush before the process ends without exit() (os._exit in Python's
 * workers, for one). Not in a vfork child: its memory is the parent's. */
static void final_flush(void)
{
	if (__atomic_load_n(&g_state, __ATOMIC_RELAXED) != ST_ON || getpid() != g.pid)
		return;
	int saved = errno;
	t_busy++;
	if (lock_or_try()) {
		flush(true);
		unlock();
	}
	t_busy--;
	errno = saved;
}

EXPORT void _exit(int status)
{
	final_flush();
	for (;;)
		syscall(SYS_exit_group, status);
}

EXPORT void _Exit(int status)
{
	final_flush();
	for (;;)
		syscall(SYS_exit_group, status);
}

/* ---- start, fork, end -------------------------------------------------- */

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	uintptr_t me = (uintptr_t)data, lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (me >= lo && me < hi) {
		g.self_lo = lo;
		g.self_hi = hi;
		return 1;
	}
	return 0;
}

static void reset_tables(void)
{
	trace_ptrs_release(&g.ptrs);
	trace_sites_release(&g.sites);
	trace_ptrs_init(&g.ptrs);
	trace_sites_init(&g.sites);
	g.nmaps = 0;
	g.unknown_announced = false;
	g.total_live_bytes = 0;
	g.seq = 0;
	g.dropped = 0;
	g.samples = 0;
	__atomic_store_n(&g_nlive, 0, __ATOMIC_RELAXED);
}

static void atfork_prepare(void)
{
	t_busy++;
	lock();
}

static void atfork_parent(void)
{
	unlock();
	t_busy--;
}

/* The child is a process of its own: fresh tables, its own pid, a hello. */
static void atfork_child(void)
{
	pthread_mutex_init(&g.lock, NULL);
	g.pid = (long)getpid();
	if (__atomic_load_n(&g_state, __ATOMIC_RELAXED) == ST_ON) {
		reset_tables();
		g.last_flush_ns = now_ns();
		hello();
		arm_thread();
	}
	t_busy--;
}

/* The descriptor in environment variable fd_var, when usable: open, not
 * stdin/stdout/stderr, and the file pinned in inode_var ("DEV:INO") when
 * that is set, so that a descriptor the job closed and reused is never
 * taken for ours. */
static int pinned_fd(const char *fd_var, const char *inode_var, struct stat *st)
{
	long long fd = env_num(fd_var, -1, 3, 1 << 20);
	if (fd < 3 || fcntl((int)fd, F_GETFL) < 0 || fstat((int)fd, st))
		return -1;
	const char *pin = getenv(inode_var);
	if (pin && *pin) {
		unsigned long long dev = 0, ino = 0;
		const char *s = pin;
		for (; *s >= '0' && *s <= '9'; s++)
			dev = dev * 10 + (unsigned long long)(*s - '0');
		if (*s++ != ':')
			return -1;
		for (; *s >= '0' && *s <= '9'; s++)
			ino = ino * 10 + (unsigned long long)(*s - '0');
		if (*s || dev != (unsigned long long)st->st_dev || ino != (unsigned long long)st->st_ino)
			return -1;
	}
	return (int)fd;
}

/* The supervisor's step counter: 8 bytes of a shared file, mapped read-only
 * (left open for the programs the job execs). NULL when there is none. */
static const uint64_t *map_steps(void)
{
	struct stat st;
	int fd = pinned_fd("LEAKPROOF_TRACE_STEPS_FD", "LEAKPROOF_TRACE_STEPS_FD_INODE", &st);
	if (fd < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(uint64_t))
		return NULL;
	long p = syscall(SYS_mmap, NULL, sizeof(uint64_t), PROT_READ, MAP_SHARED, fd, 0);
	return p == -1 ? NULL : (const uint64_t *)p;
}

__attribute__((constructor)) static void trace_start(void)
{
	t_busy++;
	int saved = errno;
	struct stat st;
	int fd = pinned_fd("LEAKPROOF_TRACE_FD", "LEAKPROOF_TRACE_FD_INODE", &st);
	if (fd < 0) {
		__atomic_store_n(&g_state, ST_OFF, __ATOMIC_RELAXED);
		goto out;
	}
	int fl = fcntl(fd, F_GETFL);
	if (!(fl & O_NONBLOCK))
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	g.fd = fd;
	g.fd_is_pipe = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
	g.steps = map_steps();
	g.flushed_steps = g.steps ? __atomic_load_n(g.steps, __ATOMIC_RELAXED) : 0;
	g.mean_bytes = (uint64_t)env_num("LEAKPROOF_TRACE_MEAN", DEFAULT_MEAN_BYTES, 1, 1LL << 40);
	g.interval_ns = (uint64_t)env_num("LEAKPROOF_TRACE_INTERVAL_MS", DEFAULT_INTERVAL_MS, 0,
					  86400000) * 1000000ull;
	g.pid = (long)getpid();
	ssize_t n = readlink("/proc/self/exe", g.exe, sizeof(g.exe) - 1);
	g.exe[n > 0 ? n : 0] = '\0';
	dl_iterate_phdr(find_self, (void *)(uintptr_t)&trace_start);
	if (trace_ptrs_init(&g.ptrs)) {
		__atomic_store_n(&g_state, ST_OFF, __ATOMIC_RELAXED);
		goto out;
	}
	trace_sites_init(&g.sites);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	trace_py_resolve();
	g.last_flush_ns = now_ns();
	hello();
	__atomic_store_n(&g_state, ST_ON, __ATOMIC_RELEASE);
out:
	errno = saved;
	t_busy--;
}

__attribute__((destructor)) static void trace_stop(void)
{
	final_flush();
}

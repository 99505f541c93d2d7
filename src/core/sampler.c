/*
 * sampler.c — the memory of a process tree, sampled cheaply enough for
 * 100 Hz (see sampler.h for the interface, docs/internals/sampler.md for the
 * cost model, its measurements and the error of the PSS estimate).
 *
 * Per tick: one pread() of /proc/PID/statm per member through a descriptor
 * kept open (a member whose pread fails has been reaped: it is dropped) and
 * one of the job cgroup's usage, then arithmetic. A source whose value has
 * not moved for QUIET_AFTER_NS is quiet: it is read every QUIET_EVERY_NS
 * instead, until it moves. A tick at which nothing is due (every source
 * quiet, no check of membership or GPU, no rollup waiting) rests: it returns
 * the last sample without a system call or a walk of the members. Nothing
 * is allocated in the steady state; arrays grow only when the tree does.
 *
 * Membership, every tree_scan_interval_ns but only after a fork somewhere
 * (the last PID in /proc/loadavg moved): the job cgroup's cgroup.procs, or
 * else a walk of /proc that reads /proc/PID/stat only for PIDs it has not
 * met before (a /proc/PID directory keeps its inode for the life of the
 * process). Each member's stat is re-read once a second, through a kept
 * descriptor, for its name (it changes at exec), its parent and its page
 * faults, and before each of its rollups (the faults as of the read).
 *
 * smaps_rollup (exact PSS, USS, swap) costs about 50 ns per resident page,
 * so it is read per process only when the process is new, its RSS moved by
 * more than pss_refresh_fraction (at most every 100 ms), the tree's
 * sharing changed (a fork, an exit, a re-read that found PSS off its
 * estimate) or, at most every 10 s, it took that many page faults (copy on
 * write moves PSS, not RSS); and only while the CPU budget has credit.
 * Between reads, PSS and USS are estimated as exact + (RSS now - RSS at the
 * read), clamped at 0. The reads that follow a fork or an exit are shown
 * together, once all are in (settle()).
 *
 * At a step boundary (sampler_mark_step()), the dear sources are read
 * sooner, so that the growth kinds are measured per step: the rollup of a
 * member whose RSS or page faults moved by REFRESH_FLOOR_BYTES since its
 * last read (at most every STEP_ROLLUP_EVERY_NS, the lowest priority, and
 * still only on the CPU budget's credit), and the cgroup's memory.stat
 * when its usage moved (at most every STEP_MEMSTAT_EVERY_NS). A job that
 * marks no steps is sampled as before.
 *
 * Units: bytes, nanoseconds (CLOCK_MONOTONIC from the caller; CPU time of
 * rollup reads from CLOCK_THREAD_CPUTIME_ID).
 */
#include "core/sampler.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "platform/cgroup.h"
#include "platform/nvml.h"
#include "platform/proc.h"
#include "util/util.h"

#define SAMPLER_MAX_PROCS (1u << 16)      /* members followed at once */
#define MEMBER_STAT_EVERY_NS 1000000000LL /* name, ppid, faults of each member */
#define FAULT_REFRESH_EVERY_NS 10000000000LL /* faults alone re-read a rollup at most this often */
#define COW_REFRESH_EVERY_NS 500000000LL  /* ... a forked child that still shares: this often */
#define MEMSTAT_EVERY_NS 200000000LL      /* the cgroup's memory.stat, when its usage moved */
#define STEP_MEMSTAT_EVERY_NS 100000000LL /* ... at a step boundary: at most this often */
#define STEP_ROLLUP_EVERY_NS 1000000000LL /* a member's rollup at a step boundary, when it
                                           * moved by REFRESH_FLOOR_BYTES: at most this often */
#define MEMSTAT_FAST_MOVE_BYTES (256u << 10) /* the usage moved this much since memory.stat:
                                           * read it again at once, on the CPU budget */
#define MEMSTAT_FAST_EVERY_NS 5000000LL   /* ... but not more often than this (a sample is
                                           * taken at every step: thousands a second) */
#define DEV_SHM "/dev/shm"                /* without a cgroup: the machine's shmem files */
#define KINDS_MOVE_BYTES (64u << 10)      /* a kind moved by this much: its row is due */
#define KINDS_HEARTBEAT_NS 5000000000LL   /* ... and at least this often */
#define MOVE_REFRESH_EVERY_NS 100000000LL  /* an RSS move alone: at most this often */
#define QUIET_AFTER_NS 500000000LL        /* a value unchanged this long is quiet ... */
#define QUIET_EVERY_NS 100000000LL        /* ... and read only this often */
#define MEMBERSHIP_EVERY_NS 1000000000LL  /* cgroup.procs at least this often, no fork seen */
#define ROLLUP_BURST_NS 1000000000LL      /* budget credit saved up: budget x 1 s */
#define REFRESH_FLOOR_BYTES (256u << 10)  /* smaller RSS moves are statm noise */
#define GPU_PROCS_MAX 1024
#define GPU_DEVICES_MAX 64
#define CGROUP_PROCS_CAP (16u << 20)      /* bytes of cgroup.procs we read */
#define CHAIN_MAX 4096                    /* parent hops when resolving the tree */

/* ---- something read every tick, unless it is quiet ------------------------ */

struct source {
	bool read;                  /* read at least once */
	uint64_t value;             /* what it said (a digest) */
	int64_t read_ns, moved_ns;  /* when it was last read; when its value last changed */
};

/* Quiet: its value has not changed for QUIET_AFTER_NS, and it was read in
 * the current QUIET_EVERY_NS window of the clock. An idle process costs a
 * pread every 100 ms, not every tick; one that moves is read every tick
 * again from its next read. The windows are the same for every source, so
 * the quiet ones are all read at the same tick (the first of a window):
 * one wake-up does the reads, the others rest, and all but the first of
 * its reads find the kernel's code and data in the caches. */
static bool quiet(const struct source *src, int64_t now_ns)
{
	return src->read && now_ns - src->moved_ns >= QUIET_AFTER_NS &&
	       now_ns / QUIET_EVERY_NS == src->read_ns / QUIET_EVERY_NS;
}

static void src_read(struct source *src, int64_t now_ns, uint64_t value)
{
	if (!src->read || value != src->value)
		src->moved_ns = now_ns;
	src->read = true;
	src->value = value;
	src->read_ns = now_ns;
}

/* ---- one member of the tree ------------------------------------------- */

struct member {
	pid_t pid, ppid;
	int statm_fd, stat_fd;      /* kept open; -1: open per read (out of descriptors) */
	char name[32];
	uint32_t seen_gen;          /* membership scan that listed it */
	uint32_t tried_tick;        /* tick of its last rollup attempt */
	bool live;                  /* it has an mm (not a zombie) at this tick */
	bool have_exact;            /* a rollup was read at least once */
	bool exact_now;             /* ... during this tick */
	bool stale;                 /* sharing in the tree changed since that read */
	bool rollup_denied;         /* smaps_rollup not readable (other user, not dumpable) */
	int64_t stat_ns;            /* when its stat was last read */
	int64_t exact_ns;           /* when its rollup was last read */
	struct source src;          /* its statm */
	uint64_t rss, anon;         /* statm, this tick: resident, resident - shared */
	uint64_t rss_at_exact, pss_exact, uss_exact, swap, minflt_at_exact, minflt;
	uint64_t pss, uss;          /* this tick: exact or estimated */
	/* What samples show: the base of the estimate, from a rollup or, for
	 * a fork not yet settled, from the fork itself (see settle()) */
	bool shown;                 /* shown_* hold a base; else PSS is RSS */
	bool shown_read;            /* ... taken from a rollup of its own */
	bool shown_now;             /* ... taken this tick */
	uint64_t shown_pss, shown_uss, shown_rss;
	uint64_t gpu;
	/* growth kinds (docs/internals/growth-kinds.md) */
	bool statm_seen;            /* its first statm was read */
	bool cow_candidate;         /* a child of a member: may share its parent's pages */
	bool cow_checked;           /* its first rollup said whether it does */
	uint64_t shared;            /* statm, this tick: resident file + shmem pages */
	uint64_t shared_at_exact;   /* ... at the last rollup */
	uint64_t pss_file_exact, pss_shmem_exact;
	/* file pages shared with processes outside the tree (see outside_share()) */
	uint64_t pss_file_read;     /* Pss_File as the last rollup read it */
	int64_t outside;            /* of it, what outsiders' comings and goings gave or took */
	uint64_t tree_moved;        /* resident file + shmem pages the others of the tree
	                             * gained or lost since its last rollup */
	uint64_t shared_moved;      /* its own, this tick */
	bool tree_changed;          /* a member came or went since its last rollup */
	uint64_t cow_base;          /* a forked child: its anonymous memory when first
	                             * seen, all of it shared with the parent; 0: none */
	uint64_t cow;               /* of those pages, how many it holds privately now */
	int64_t kinds_ns;           /* when sampler_kinds_due() last returned it; 0: never */
	uint64_t kinds_sent[5];     /* what it returned then: anon, cow, file, shmem, gpu */
};

/* ---- what a /proc walk knows about each PID ---------------------------- */

enum { ST_UNRESOLVED, ST_MEMBER, ST_OUTSIDE, ST_ROOT };

struct scan_ent {
	pid_t pid, ppid;            /* pid 0: empty slot */
	uint64_t ino;               /* of /proc/PID: same inode, same process */
	uint8_t status;
	bool recheck;               /* read its stat again at the next walk */
};

struct scan_table {
	struct scan_ent *v;
	size_t cap, n;              /* cap is a power of two, n <= cap / 2 */
};

struct sampler {
	struct sampler_config cfg;
	const char *root;
	uint64_t page_bytes;

	struct member *m;
	size_t n, alloc;
	uint32_t *index;            /* pid -> member index + 1, open addressing */
	size_t index_cap;
	bool index_dirty;
	bool warned_cap, warned_fds, warned_scan;

	uint32_t gen, tick;
	int64_t next_scan_ns;
	bool scanned;
	int loadavg_fd;             /* its last PID moves at every fork; -1: none */
	pid_t last_pid;             /* as of the last membership read */
	int64_t membership_ns;      /* when membership was last read */
	bool need_walk;             /* a PID was left unresolved: look again */

	/* without a cgroup */
	DIR *proc_dir;
	struct scan_table cur, next;

	/* with a cgroup */
	int procs_fd;               /* cgroup.procs, kept for v2 only */
	int usage_fd;
	struct source usage_src;
	uint64_t usage;             /* latest memory.current / memory.usage_in_bytes */
	bool have_usage;
	struct cgroup_memstat memstat;  /* the page cache, shmem and anon of the cgroup */
	bool have_memstat;
	int64_t memstat_ns;         /* when memory.stat was last read */
	uint64_t usage_at_memstat;  /* the usage then: unchanged, so is memory.stat */
	uint64_t memstat_reads;     /* successful reads so far */
	bool dev_shm;               /* no cgroup: memstat's shmem is DEV_SHM's growth */
	uint64_t dev_shm_base;      /* DEV_SHM's used bytes when the sampler began */
	int64_t memstat_sent_ns;    /* ... the last reading given out, and its value */
	uint64_t memstat_sent;
	char *procs_buf;
	size_t procs_cap;
	pid_t *pids;
	size_t pids_cap;

	/* smaps_rollup budget */
	double credit_ns;           /* CPU time that may still be spent */
	int64_t last_now_ns;
	bool have_last_now;
	int64_t rollup_ns;

	/* GPU */
	struct nvml_proc *gpu_procs;
	int64_t next_gpu_ns;
	bool gpu_sampled, have_gpu, gpu_device_total;
	bool host_pidns;            /* we see host PIDs, as NVML reports them */
	uint64_t gpu_device_bytes;

	struct proc_mem *out;
	size_t out_alloc;

	/* Resting: until rest_until_ns nothing is due (every source quiet and
	 * not yet to be revisited, no check of membership, stat or GPU, no
	 * rollup waiting), and a tick returns the last sample as it stands. */
	int64_t rest_until_ns;
	bool rollup_waiting;        /* a rollup is wanted, but there is no credit */
	bool step_due;              /* a step ended since the last sample (sampler_mark_step) */
	int64_t unsettled_ns;       /* since when a change of sharing is being read; 0: none */
	struct mem_sample last;
};

void sampler_config_init(struct sampler_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->pss_cpu_budget = 0.02;
	cfg->pss_refresh_fraction = 0.02;
	cfg->tree_scan_interval_ns = 200000000;
	cfg->settle_max_ns = 5000000000LL;
	cfg->gpu_interval_ns = 500000000;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t hash_pid(pid_t pid, size_t cap)
{
	return ((uint32_t)pid * 2654435761u) & (cap - 1);
}

/* ---- pid -> member index ------------------------------------------------ */

static void index_put(struct sampler *s, size_t i)
{
	size_t h = hash_pid(s->m[i].pid, s->index_cap);
	while (s->index[h])
		h = (h + 1) & (s->index_cap - 1);
	s->index[h] = (uint32_t)i + 1;
}

static void index_rebuild(struct sampler *s)
{
	size_t want = 16;
	while (want < 2 * (s->n + 1))
		want *= 2;
	if (want > s->index_cap) {
		free(s->index);
		s->index = xmalloc(want * sizeof(*s->index));
		s->index_cap = want;
	}
	memset(s->index, 0, s->index_cap * sizeof(*s->index));
	for (size_t i = 0; i < s->n; i++)
		index_put(s, i);
	s->index_dirty = false;
}

static struct member *member_find(struct sampler *s, pid_t pid)
{
	if (s->index_dirty)
		index_rebuild(s);
	size_t h = hash_pid(pid, s->index_cap);
	for (uint32_t v; (v = s->index[h]); h = (h + 1) & (s->index_cap - 1))
		if (s->m[v - 1].pid == pid)
			return &s->m[v - 1];
	return NULL;
}

static void refresh_stat(struct sampler *s, struct member *m, int64_t now_ns)
{
	struct proc_stat st;
	m->stat_ns = now_ns;
	int r = m->stat_fd >= 0 ? pread_proc_stat(m->stat_fd, &st) : read_proc_stat(s->root, m->pid, &st);
	if (r < 0)
		return;                 /* gone: the statm read will notice */
	m->ppid = st.ppid;
	m->minflt = st.minflt;
	size_t len = strnlen(st.comm, sizeof(m->name) - 1);
	if (m->cow_candidate && (len != strlen(m->name) || memcmp(m->name, st.comm, len))) {
		/* a new program (exec): nothing is shared with the parent now */
		m->cow_candidate = false;
		m->cow_base = m->cow = 0;
	}
	memcpy(m->name, st.comm, len);
	m->name[len] = '\0';
}

/* Start following pid. Returns false when it cannot be followed (gone,
 * or the cap is reached). */
static bool member_add(struct sampler *s, pid_t pid, int64_t now_ns)
{
	if (s->n >= SAMPLER_MAX_PROCS) {
		if (!s->warned_cap)
			warning("the job has more than %u processes: only the first are sampled",
			        SAMPLER_MAX_PROCS);
		s->warned_cap = true;
		return false;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/%d/statm", s->root, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != EMFILE && errno != ENFILE)
		return false;           /* gone already */
	int stat_fd = -1;
	if (fd >= 0) {
		snprintf(path, sizeof(path), "%s/%d/stat", s->root, (int)pid);
		stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if ((fd < 0 || stat_fd < 0) && (errno == EMFILE || errno == ENFILE) && !s->warned_fds) {
		warning("out of file descriptors: reopening /proc files at every sample (raise ulimit -n)");
		s->warned_fds = true;
	}
	if (s->n == s->alloc) {
		s->alloc = s->alloc ? 2 * s->alloc : 16;
		s->m = xrealloc(s->m, s->alloc * sizeof(*s->m));
	}
	struct member *m = &s->m[s->n];
	memset(m, 0, sizeof(*m));
	m->pid = pid;
	m->statm_fd = fd;
	m->stat_fd = stat_fd;
	m->seen_gen = s->gen;
	refresh_stat(s, m, now_ns);
	s->n++;
	if (s->index_dirty || 2 * (s->n + 1) > s->index_cap)
		index_rebuild(s);
	else
		index_put(s, s->n - 1);
	/* A fork shares all of the parent's memory with the child: the
	 * parent's PSS halves without its RSS moving. */
	struct member *parent = m->ppid > 0 ? member_find(s, m->ppid) : NULL;
	if (parent && parent != m && parent->have_exact)
		parent->stale = true;
	return true;
}

static void member_drop(struct sampler *s, size_t i)
{
	if (s->m[i].statm_fd >= 0)
		close(s->m[i].statm_fd);
	if (s->m[i].stat_fd >= 0)
		close(s->m[i].stat_fd);
	s->m[i] = s->m[--s->n];
	s->index_dirty = true;
}

/* ---- membership from /proc ---------------------------------------------- */

static struct scan_ent *table_find(const struct scan_table *t, pid_t pid)
{
	if (!t->cap)
		return NULL;
	for (size_t h = hash_pid(pid, t->cap); t->v[h].pid; h = (h + 1) & (t->cap - 1))
		if (t->v[h].pid == pid)
			return &t->v[h];
	return NULL;
}

static void table_grow(struct scan_table *t)
{
	struct scan_table old = *t;
	t->cap = old.cap ? 2 * old.cap : 256;
	t->v = xcalloc(t->cap, sizeof(*t->v));
	t->n = 0;
	for (size_t i = 0; i < old.cap; i++) {
		if (!old.v[i].pid)
			continue;
		size_t h = hash_pid(old.v[i].pid, t->cap);
		while (t->v[h].pid)
			h = (h + 1) & (t->cap - 1);
		t->v[h] = old.v[i];
		t->n++;
	}
	free(old.v);
}

/* A fresh slot for pid, which the table does not hold; NULL at the cap. */
static struct scan_ent *table_add(struct scan_table *t, pid_t pid)
{
	if (2 * (t->n + 1) > t->cap) {
		if (t->cap >= 2 * (size_t)PROC_LIST_MAX)
			return NULL;
		table_grow(t);
	}
	size_t h = hash_pid(pid, t->cap);
	while (t->v[h].pid)
		h = (h + 1) & (t->cap - 1);
	t->n++;
	t->v[h].pid = pid;
	return &t->v[h];
}

/* Member or not, following parents until one is known. */
static void resolve(struct sampler *s, struct scan_ent *e)
{
	struct scan_ent *cur = e;
	uint8_t result = ST_OUTSIDE;
	bool unknown_parent = false;
	for (int hops = 0; ; hops++) {
		if (cur->status != ST_UNRESOLVED) {
			result = cur->status == ST_OUTSIDE ? ST_OUTSIDE : ST_MEMBER;
			break;
		}
		if (cur->ppid == s->cfg.root_pid) {
			result = ST_MEMBER;
			break;
		}
		struct scan_ent *p = cur->ppid > 0 && hops < CHAIN_MAX ? table_find(&s->cur, cur->ppid) : NULL;
		if (!p) {
			/* Outside, or its parent died after we read its stat and it
			 * has been reparented since: look again next time. */
			unknown_parent = cur->ppid > 0;
			break;
		}
		cur = p;
	}
	if (unknown_parent)
		s->need_walk = true;
	for (struct scan_ent *x = e; x->status == ST_UNRESOLVED; ) {
		x->status = result;
		x->recheck = unknown_parent;
		struct scan_ent *p = x->ppid > 0 ? table_find(&s->cur, x->ppid) : NULL;
		if (!p)
			break;
		x = p;
	}
}

/* Whether a process may have been created since the last walk. */
static bool forked_since_walk(struct sampler *s, pid_t *last_pid)
{
	char buf[128];
	*last_pid = 0;
	if (s->loadavg_fd < 0 || pread_buf(s->loadavg_fd, buf, sizeof(buf)) <= 0 ||
	    parse_loadavg_last_pid(buf, last_pid) < 0)
		return true;
	return *last_pid != s->last_pid || s->need_walk;
}

static int scan_proc(struct sampler *s, int64_t now_ns)
{
	struct scan_table *t = &s->next;
	s->need_walk = false;
	if (t->cap)
		memset(t->v, 0, t->cap * sizeof(*t->v));
	t->n = 0;
	rewinddir(s->proc_dir);
	pid_t pid;
	uint64_t ino;
	int r;
	while ((r = proc_readdir(s->proc_dir, &pid, &ino)) > 0) {
		struct scan_ent *old = table_find(&s->cur, pid);
		struct scan_ent *e = table_add(t, pid);
		if (!e)
			break;
		if (old && old->ino == ino && ino > 1 && !old->recheck) {
			e->ppid = old->ppid;
			e->ino = ino;
			e->status = old->status;
			continue;
		}
		struct proc_stat st;
		e->ino = ino;
		if (read_proc_stat(s->root, pid, &st) < 0) {
			e->status = ST_OUTSIDE;  /* gone, or unreadable: try again next walk */
			e->recheck = true;
			s->need_walk = true;
			continue;
		}
		e->ppid = st.ppid;
		if (pid == s->cfg.root_pid)
			e->status = s->cfg.exclude_root ? ST_ROOT : ST_MEMBER;
		else
			e->status = ST_UNRESOLVED;
	}
	if (r < 0)
		return -1;
	struct scan_table tmp = s->cur;
	s->cur = s->next;
	s->next = tmp;

	t = &s->cur;
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].pid && t->v[i].status == ST_UNRESOLVED)
			resolve(s, &t->v[i]);
	for (size_t i = 0; i < t->cap; i++) {
		struct scan_ent *e = &t->v[i];
		if (!e->pid || e->status != ST_MEMBER)
			continue;
		struct member *m = member_find(s, e->pid);
		if (m)
			m->seen_gen = s->gen;
		else if (!member_add(s, e->pid, now_ns))
			e->recheck = s->need_walk = true;
	}
	return 0;
}

/* ---- membership from the job cgroup ------------------------------------- */

/* Whether pid's name (comm) begins with cfg.skip_comm: not a member. */
static bool skipped(const struct sampler *s, pid_t pid)
{
	char path[4096], comm[32];
	if (!s->cfg.skip_comm)
		return false;
	snprintf(path, sizeof(path), "%s/%d/comm", s->root, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;   /* gone: its statm read fails, it is dropped */
	comm[n] = '\0';
	return !strncmp(comm, s->cfg.skip_comm, strlen(s->cfg.skip_comm));
}

static void take_member(struct sampler *s, pid_t pid, int64_t now_ns)
{
	if (s->cfg.exclude_root && pid == s->cfg.root_pid)
		return;
	struct member *m = member_find(s, pid);
	if (m)
		m->seen_gen = s->gen;       /* v1 may list a PID twice */
	else if (!skipped(s, pid))
		member_add(s, pid, now_ns);
}

struct tree_scan {
	struct sampler *s;
	int64_t now_ns;
};

static void tree_one(pid_t pid, void *vctx)
{
	struct tree_scan *t = vctx;
	if (pid > 0)
		take_member(t->s, pid, t->now_ns);
}

/*
 * v2 restarts cgroup.procs at every read from offset 0, so its descriptor is
 * kept. v1 builds a PID list at the first read after open() and serves it
 * again until it has gone unread for a second: a kept descriptor polled
 * every 100 ms would never see a new process. v1's is opened per read.
 */
static int scan_cgroup(struct sampler *s, int64_t now_ns)
{
	ssize_t len;
	s->need_walk = false;
	if (s->cfg.cgroup_tree) {   /* each cgroup's procs, opened per read */
		struct tree_scan t = { s, now_ns };
		return cgroup_tree_each_proc(s->cfg.cgroup_dir, tree_one, &t) < 0 ? -1 : 0;
	}
	if (s->cfg.cgroup_version == 1) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/cgroup.procs", s->cfg.cgroup_dir);
		s->procs_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (s->procs_fd < 0)
			return -1;
	}
	for (;;) {
		len = pread_buf(s->procs_fd, s->procs_buf, s->procs_cap);
		if (len < 0)
			break;
		if ((size_t)len + 1 < s->procs_cap || s->procs_cap >= CGROUP_PROCS_CAP)
			break;
		s->procs_cap *= 2;
		s->procs_buf = xrealloc(s->procs_buf, s->procs_cap);
	}
	if (s->cfg.cgroup_version == 1) {
		int e = errno;
		close(s->procs_fd);
		s->procs_fd = -1;
		errno = e;
	}
	if (len < 0)
		return -1;
	/* A cut last line (at the cap) must not read as a smaller PID. */
	char *end = strrchr(s->procs_buf, '\n');
	if (end)
		end[1] = '\0';
	ssize_t n = parse_pid_list_buf(s->procs_buf, s->pids, s->pids_cap);
	if (n > 0 && (size_t)n > s->pids_cap) {
		s->pids_cap = (size_t)n;
		s->pids = xrealloc(s->pids, s->pids_cap * sizeof(*s->pids));
		n = parse_pid_list_buf(s->procs_buf, s->pids, s->pids_cap);
	}
	if (n < 0)
		return -1;
	for (ssize_t i = 0; i < n; i++)
		take_member(s, s->pids[i], now_ns);
	return 0;
}

/* ---- smaps_rollup -------------------------------------------------------- */

/*
 * Copy-on-write privatisation of a forked child (growth-kinds.md): right
 * after a fork every resident anonymous page of the child is shared with
 * the parent, so its Private_Dirty is ~0. Later, Private_Dirty counts the
 * pages it copied (a write to a shared page) plus the memory it allocated
 * itself; the second also raises its anonymous total and the first does
 * not. So the copies are Private_Dirty - (Anonymous - cow_base), clamped to
 * [0, cow_base]. A child that shares nothing at its first rollup (it ran
 * exec, or is not a fork of a member) is not followed.
 */
static void update_cow(struct member *m, const struct proc_smaps *sm)
{
	uint64_t anon = sm->anonymous_bytes;
	uint64_t priv = sm->private_dirty_bytes < anon ? sm->private_dirty_bytes : anon;
	if (!m->cow_checked) {
		m->cow_checked = true;
		if (anon - priv < REFRESH_FLOOR_BYTES || !m->cow_base) {
			m->cow_candidate = false;
			m->cow_base = m->cow = 0;
			return;
		}
	}
	uint64_t own = anon > m->cow_base ? anon - m->cow_base : 0;
	uint64_t cow = priv > own ? priv - own : 0;
	m->cow = cow < m->cow_base ? cow : m->cow_base;
}

/* Bytes in use in the tmpfs at path; false when it cannot be read. */
static bool tmpfs_used(const char *path, uint64_t *out)
{
	struct statvfs v;
	if (statvfs(path, &v) < 0 || v.f_blocks < v.f_bfree)
		return false;
	*out = (uint64_t)(v.f_blocks - v.f_bfree) * (uint64_t)v.f_frsize;
	return true;
}

/* Without a cgroup, the shared memory the job may hold unmapped: how much
 * the machine's DEV_SHM grew since the sampler began (anybody's files:
 * the kinds say so). A new reading is given out (memstat_reads) when it
 * moved by KINDS_MOVE_BYTES or after KINDS_HEARTBEAT_NS. */
static void read_dev_shm(struct sampler *s, int64_t now_ns)
{
	uint64_t used;
	s->memstat_ns = now_ns;
	if (!tmpfs_used(DEV_SHM, &used))
		return;
	uint64_t v = used > s->dev_shm_base ? used - s->dev_shm_base : 0;
	uint64_t d = v > s->memstat_sent ? v - s->memstat_sent : s->memstat_sent - v;
	if (s->have_memstat && d < KINDS_MOVE_BYTES && now_ns - s->memstat_sent_ns < KINDS_HEARTBEAT_NS)
		return;
	memset(&s->memstat, 0, sizeof(s->memstat));
	s->memstat.shmem_bytes = v;
	s->memstat_sent = v;
	s->memstat_sent_ns = now_ns;
	s->have_memstat = true;
	s->memstat_reads++;
}

/* v + (to - from), clamped at 0. */
static uint64_t shift(uint64_t v, uint64_t from, uint64_t to)
{
	if (to >= from)
		return v + (to - from);
	return from - to > v ? 0 : v - (from - to);
}

/* v - d, clamped at 0. */
static uint64_t minus(uint64_t v, int64_t d)
{
	return d < 0 ? v + (uint64_t)-d : (uint64_t)d > v ? 0 : v - (uint64_t)d;
}

/*
 * File pages shared with processes outside the tree: when one of those
 * starts or ends, the tree's PSS moves, by tens of MiB for a PyTorch job
 * (it shares ~100 MiB of libtorch with every other PyTorch process on the
 * machine), though nothing in the job did: a plateau would read as a leak,
 * or a leak as noise. Such a move is told by what did not come with it:
 * Pss_File moved between two rollups of a member while no member came or
 * went, and neither its own resident file + shmem pages (statm) nor those
 * of the rest of the tree moved by half as much. It goes into m->outside,
 * which is taken off what the samples show: file pages shared with
 * outsiders count at the share they had when first read, moved only by
 * the tree's own doings. A move from inside the tree (a sibling mapping
 * the same pages, a fork, an exit) comes with one of those, and is shown
 * as read; so is any move of anonymous memory (copy on write).
 */
static void outside_share(struct member *m, const struct proc_smaps *sm)
{
	if (m->have_exact && sm->has_pss_split && !m->tree_changed) {
		int64_t moved = (int64_t)sm->pss_file_bytes - (int64_t)m->pss_file_read;
		int64_t own = (int64_t)m->shared - (int64_t)m->shared_at_exact;
		uint64_t explained = (uint64_t)(own < 0 ? -own : own) + m->tree_moved;
		if ((uint64_t)(moved < 0 ? -moved : moved) > 2 * explained)
			m->outside += moved - own;
		/* what outsiders gave or took is a share of pages the member
		 * maps: when it unmaps its own (or is exiting), that share goes
		 * with them (a job that unmapped a file whose share an outsider
		 * had left was shown with 0 B of PSS) */
		else if (own < 0 && m->shared_at_exact > 0)
			m->outside = (int64_t)((double)m->outside * (double)m->shared / (double)m->shared_at_exact);
	}
	/* and never more than the file pages it holds now */
	if (m->outside > (int64_t)sm->pss_file_bytes)
		m->outside = (int64_t)sm->pss_file_bytes;
	m->pss_file_read = sm->pss_file_bytes;
	m->tree_moved = 0;
	m->tree_changed = false;
}

static void read_rollup(struct sampler *s, struct member *m, int64_t now_ns)
{
	struct proc_smaps sm;
	int64_t t0 = thread_cpu_ns();
	/* the fault count as of this read: faults taken before it are in it
	 * (with a count up to a second old, the memory a process filled just
	 * before would trigger a second read 10 s later) */
	refresh_stat(s, m, now_ns);
	int r = read_proc_smaps(s->root, m->pid, &sm);
	int e = errno;
	int64_t cost = thread_cpu_ns() - t0;
	s->rollup_ns += cost;
	s->credit_ns -= (double)cost;
	m->tried_tick = s->tick;
	if (r < 0) {
		if (e == EACCES || e == EPERM)
			m->rollup_denied = true;
		return;                 /* gone: the next statm read drops it */
	}
	outside_share(m, &sm);
	m->have_exact = m->exact_now = true;
	m->exact_ns = now_ns;
	m->stale = false;
	/* the reference RSS from the same read as the PSS, not from this
	 * tick's statm: memory touched in between would otherwise be counted
	 * twice (or not at all) by every later estimate */
	m->rss_at_exact = sm.rss_bytes ? sm.rss_bytes : m->rss;
	m->minflt_at_exact = m->minflt;
	m->pss_exact = minus(sm.pss_bytes, m->outside);
	m->uss_exact = proc_smaps_uss(&sm);
	m->swap = sm.swap_bytes;
	m->shared_at_exact = m->shared;
	m->pss_file_exact = minus(sm.pss_file_bytes, m->outside);
	m->pss_shmem_exact = sm.pss_shmem_bytes;
	if (m->cow_candidate)
		update_cow(m, &sm);
}

static uint64_t threshold(const struct sampler *s, uint64_t rss)
{
	double t = s->cfg.pss_refresh_fraction * (double)rss;
	return t > REFRESH_FLOOR_BYTES ? (uint64_t)t : REFRESH_FLOOR_BYTES;
}

/* Shares enough with the rest of the system that others can move its PSS. */
static bool shares(const struct sampler *s, const struct member *m)
{
	return m->rss_at_exact > m->pss_exact &&
	       m->rss_at_exact - m->pss_exact > threshold(s, m->rss_at_exact);
}

/* How much m wants a fresh rollup: 0 not at all, else larger is sooner. */
static double want_rollup(const struct sampler *s, const struct member *m, int64_t now_ns, bool step)
{
	if (!m->live || m->rollup_denied || m->tried_tick == s->tick)
		return 0;
	if (!m->have_exact)
		return 4;
	if (m->stale)
		return 3;
	uint64_t thr = threshold(s, m->rss_at_exact);
	uint64_t moved = m->rss > m->rss_at_exact ? m->rss - m->rss_at_exact : m->rss_at_exact - m->rss;
	double base = (double)m->rss_at_exact + 1;
	if (moved > thr && now_ns - m->exact_ns >= MOVE_REFRESH_EVERY_NS)
		return 2 + moved / (moved + base);
	double faulted = m->minflt > m->minflt_at_exact ?
	                 (double)(m->minflt - m->minflt_at_exact) * (double)s->page_bytes : 0;
	int64_t fault_every = m->cow_base ? COW_REFRESH_EVERY_NS : FAULT_REFRESH_EVERY_NS;
	if (faulted > (double)thr && now_ns - m->exact_ns >= fault_every)
		return 1 + faulted / (faulted + base);
	/* a step ended: a smaller move is worth a read, after the others */
	if (step && now_ns - m->exact_ns >= STEP_ROLLUP_EVERY_NS &&
	    (moved >= REFRESH_FLOOR_BYTES || faulted >= REFRESH_FLOOR_BYTES))
		return 0.5;
	return 0;
}

static void refresh_rollups(struct sampler *s, int64_t now_ns, bool force, bool step)
{
	s->rollup_waiting = false;
	if (force) {
		for (size_t i = 0; i < s->n; i++)
			if (s->m[i].live && !s->m[i].rollup_denied)
				read_rollup(s, &s->m[i], now_ns);
		return;
	}
	while (s->credit_ns > 0) {
		struct member *best = NULL;
		double best_want = 0;
		for (size_t i = 0; i < s->n; i++) {
			double w = want_rollup(s, &s->m[i], now_ns, step);
			if (w > best_want) {
				best_want = w;
				best = &s->m[i];
			}
		}
		if (!best)
			break;
		bool had_exact = best->have_exact;
		uint64_t pss_before = best->pss_exact, rss_before = best->rss_at_exact;
		read_rollup(s, best, now_ns);
		/* PSS moved while RSS did not (copy on write, a sharer exited):
		 * whoever shared those pages moved too. The estimate is taken
		 * at the RSS of the same read: a process that is filling memory
		 * has more of it by the time its rollup is read than at this
		 * tick's statm, which is no surprise. */
		uint64_t estimate = had_exact ? shift(pss_before, rss_before, best->rss_at_exact) : 0;
		if (estimate && best->exact_now) {
			uint64_t d = best->pss_exact > estimate ? best->pss_exact - estimate : estimate - best->pss_exact;
			if (d > threshold(s, best->rss))
				for (size_t i = 0; i < s->n; i++)
					if (&s->m[i] != best && s->m[i].have_exact && !s->m[i].exact_now &&
					    shares(s, &s->m[i]))
						s->m[i].stale = true;   /* (one read this tick saw it) */
		}
	}
	for (size_t i = 0; s->credit_ns <= 0 && i < s->n && !s->rollup_waiting; i++)
		s->rollup_waiting = want_rollup(s, &s->m[i], now_ns, false) > 0;
}

/*
 * What the samples show of the rollups read. A change of sharing (a fork,
 * an exit) moves the PSS of several members at once, and the budget reads
 * their rollups one at a time, maybe a second or more apart: a parent
 * still shown as before a fork next to its children read after it counts
 * what they share twice (a 256 MiB buffer shared with four workers showed
 * as 458 MiB). So while a member is stale, or is a fork not yet read, the
 * rollups read are kept and the samples go on showing the bases from before
 * the change (a fork's child: nothing but what it gained since), until the
 * last of them is read; then all switch at once. A tree whose sharing never
 * settles (a job that forks all the time) switches every settle_max_ns.
 * A first read of a process that shares nothing with its parent (it ran
 * exec, or is nobody's fork) is shown at once: it moves no one else.
 */
static void settle(struct sampler *s, int64_t now_ns)
{
	bool unsettled = false;
	for (size_t i = 0; i < s->n && !unsettled; i++) {
		const struct member *m = &s->m[i];
		unsettled = m->live && !m->rollup_denied && (m->stale || (m->shown && !m->shown_read && !m->have_exact));
	}
	if (unsettled && !s->unsettled_ns)
		s->unsettled_ns = now_ns;
	bool all = !unsettled || now_ns - s->unsettled_ns >= s->cfg.settle_max_ns;
	if (all)
		s->unsettled_ns = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct member *m = &s->m[i];
		m->shown_now = false;
		if (!m->have_exact || (!all && (m->shown_read || m->cow_candidate)))
			continue;
		m->shown = m->shown_read = true;
		m->shown_now = m->exact_now;
		m->shown_pss = m->pss_exact;
		m->shown_uss = m->uss_exact;
		m->shown_rss = m->rss_at_exact;
	}
}

/* ---- GPU ------------------------------------------------------------------ */

static void sample_gpu(struct sampler *s)
{
	size_t count = 0;
	if (nvml_processes(s->cfg.nvml, s->gpu_procs, GPU_PROCS_MAX, &count) < 0)
		return;                 /* keep the last values */
	for (size_t i = 0; i < s->n; i++)
		s->m[i].gpu = 0;
	uint64_t matched_bytes = 0;
	size_t matched = 0;
	uint64_t devices = 0;       /* bit d: device d holds a process */
	for (size_t i = 0; i < count; i++) {
		const struct nvml_proc *p = &s->gpu_procs[i];
		if (p->device >= 0 && p->device < GPU_DEVICES_MAX)
			devices |= 1ull << p->device;
		struct member *m = p->pid > 0 && p->pid <= (unsigned)INT32_MAX ? member_find(s, (pid_t)p->pid) : NULL;
		if (!m)
			continue;
		m->gpu += p->used_bytes;
		matched_bytes += p->used_bytes;
		matched++;
	}
	s->have_gpu = true;
	/* NVML lists processes, but none of ours while we live in a PID
	 * namespace of our own (NVML speaks host PIDs), or ours without sizes:
	 * the devices' own usage is the best we have. In the host's namespace,
	 * no match means the GPU processes are somebody else's. */
	s->gpu_device_total = count > 0 && ((matched == 0 && !s->host_pidns) ||
	                                    (matched > 0 && matched_bytes == 0));
	if (!s->gpu_device_total)
		return;
	s->gpu_device_bytes = 0;
	for (int d = 0; d < GPU_DEVICES_MAX; d++) {
		uint64_t used, total;
		if ((devices >> d & 1) && nvml_device_memory(s->cfg.nvml, d, &used, &total) == 0)
			s->gpu_device_bytes += used;
	}
}

/* ---- life cycle ------------------------------------------------------------ */

struct sampler *sampler_new(const struct sampler_config *cfg)
{
	if (cfg->root_pid <= 0 && !(cfg->cgroup_dir && cfg->cgroup_tree)) {
		error("sampler: no root process");
		return NULL;
	}
	if (!(cfg->pss_cpu_budget >= 0 && cfg->pss_cpu_budget <= 1) ||
	    !(cfg->pss_refresh_fraction >= 0) || cfg->tree_scan_interval_ns <= 0 ||
	    cfg->gpu_interval_ns <= 0 || cfg->settle_max_ns < 0) {
		error("sampler: invalid configuration");
		return NULL;
	}
	if (cfg->cgroup_dir && cfg->cgroup_version != 1 && cfg->cgroup_version != 2) {
		error("sampler: unknown cgroup version %d", cfg->cgroup_version);
		return NULL;
	}
	struct sampler *s = xcalloc(1, sizeof(*s));
	s->cfg = *cfg;
	s->root = cfg->proc_root ? cfg->proc_root : PROC_ROOT_DEFAULT;
	/* without a cgroup of the job's own, the shared memory nobody maps
	 * is looked for in the machine's /dev/shm (the real one only: a fake
	 * proc root is a test's) */
	s->dev_shm = !cfg->cgroup_dir && !strcmp(s->root, "/proc") && tmpfs_used(DEV_SHM, &s->dev_shm_base);
	long page = sysconf(_SC_PAGESIZE);
	s->page_bytes = page > 0 ? (uint64_t)page : 4096;
	s->procs_fd = s->usage_fd = s->loadavg_fd = -1;
	s->credit_ns = cfg->pss_cpu_budget * (double)ROLLUP_BURST_NS;
	index_rebuild(s);

	if (cfg->cgroup_dir) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/cgroup.procs", cfg->cgroup_dir);
		s->procs_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (s->procs_fd < 0) {
			error_errno("cannot open '%s'", path);
			sampler_free(s);
			return NULL;
		}
		if (cfg->cgroup_version == 1 || cfg->cgroup_tree) {   /* reopened at every read: see scan_cgroup() */
			close(s->procs_fd);
			s->procs_fd = -1;
		}
		snprintf(path, sizeof(path), "%s/%s", cfg->cgroup_dir,
		         cfg->cgroup_version == 2 ? "memory.current" : "memory.usage_in_bytes");
		s->usage_fd = open(path, O_RDONLY | O_CLOEXEC);  /* none: no memory controller */
		s->procs_cap = 4096;
		s->procs_buf = xmalloc(s->procs_cap);
		s->pids_cap = 64;
		s->pids = xmalloc(s->pids_cap * sizeof(*s->pids));
	} else {
		s->proc_dir = proc_opendir(s->root);
		if (!s->proc_dir) {
			error_errno("cannot open '%s'", s->root);
			sampler_free(s);
			return NULL;
		}
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/loadavg", s->root);
	s->loadavg_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfg->nvml) {
		s->gpu_procs = xmalloc(GPU_PROCS_MAX * sizeof(*s->gpu_procs));
		char link[64];
		snprintf(path, sizeof(path), "%s/self/ns/pid", s->root);
		ssize_t len = readlink(path, link, sizeof(link) - 1);
		link[len > 0 ? len : 0] = '\0';
		s->host_pidns = !strcmp(link, "pid:[4026531836]");   /* PROC_PID_INIT_INO */
	}
	return s;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		if (s->m[i].statm_fd >= 0)
			close(s->m[i].statm_fd);
		if (s->m[i].stat_fd >= 0)
			close(s->m[i].stat_fd);
	}
	if (s->proc_dir)
		closedir(s->proc_dir);
	if (s->procs_fd >= 0)
		close(s->procs_fd);
	if (s->usage_fd >= 0)
		close(s->usage_fd);
	if (s->loadavg_fd >= 0)
		close(s->loadavg_fd);
	free(s->m);
	free(s->index);
	free(s->cur.v);
	free(s->next.v);
	free(s->procs_buf);
	free(s->pids);
	free(s->gpu_procs);
	free(s->out);
	free(s);
}

/* ---- one sample ------------------------------------------------------------- */

/* When a source next needs a read: at every tick until it is quiet, then
 * at the next window (see quiet()). */
static int64_t src_due(const struct source *src, int64_t now_ns)
{
	if (!src->read || now_ns - src->moved_ns < QUIET_AFTER_NS)
		return now_ns;
	return (src->read_ns / QUIET_EVERY_NS + 1) * QUIET_EVERY_NS;
}

/*
 * Until when the ticks after this one have nothing to do. A rollup that
 * becomes due by time alone (the rate limits of want_rollup()) waits for
 * the next read of a source, at most QUIET_EVERY_NS; one that waits for
 * credit, until the credit is there.
 */
static int64_t rest_until(const struct sampler *s, int64_t now_ns)
{
	if (s->cfg.every_tick)
		return now_ns;          /* never rest: a budget is watched */
	int64_t due = s->next_scan_ns;
	if (s->cfg.nvml && s->next_gpu_ns < due)
		due = s->next_gpu_ns;
	if (s->usage_fd >= 0 && src_due(&s->usage_src, now_ns) < due)
		due = src_due(&s->usage_src, now_ns);
	for (size_t i = 0; i < s->n && due > now_ns; i++)
		if (src_due(&s->m[i].src, now_ns) < due)
			due = src_due(&s->m[i].src, now_ns);
	if (s->unsettled_ns && s->unsettled_ns + s->cfg.settle_max_ns < due)
		due = s->unsettled_ns + s->cfg.settle_max_ns;
	if (s->rollup_waiting && s->cfg.pss_cpu_budget > 0) {
		int64_t credit_at = now_ns + (int64_t)(-s->credit_ns / s->cfg.pss_cpu_budget) + 1;
		if (credit_at < due)
			due = credit_at;
	}
	return due;
}

/* The job cgroup's memory.current / memory.usage_in_bytes. */
static bool read_usage(struct sampler *s, uint64_t *bytes)
{
	char buf[64], *end;
	if (s->usage_fd < 0 || pread_buf(s->usage_fd, buf, sizeof(buf)) <= 0 || buf[0] < '0' || buf[0] > '9')
		return false;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (errno || (*end != '\n' && *end))
		return false;
	*bytes = v;
	return true;
}

static void update_membership(struct sampler *s, int64_t now_ns, bool force, bool *changed)
{
	size_t before = s->n;
	/* Without a fork anywhere since the last look, no process can have
	 * joined the tree, and those that left fail their pread: skip it. A
	 * process can also be moved into a cgroup without a fork: cgroup.procs
	 * is read at least every MEMBERSHIP_EVERY_NS. */
	pid_t last_pid;
	bool forked = forked_since_walk(s, &last_pid);
	if (!s->proc_dir && now_ns - s->membership_ns >= MEMBERSHIP_EVERY_NS)
		force = true;
	if (!forked && !force)
		return;
	s->last_pid = last_pid;
	s->membership_ns = now_ns;
	s->gen++;
	int r = s->proc_dir ? scan_proc(s, now_ns) : scan_cgroup(s, now_ns);
	if (r < 0) {
		if (!s->warned_scan)    /* once: this runs ten times a second */
			error_errno("cannot list the job's processes in '%s'",
			            s->proc_dir ? s->root : s->cfg.cgroup_dir);
		s->warned_scan = s->need_walk = true;
		return;                 /* keep the members we had */
	}
	if (s->n != before)
		*changed = true;
	for (size_t i = 0; i < s->n; ) {
		if (s->m[i].seen_gen != s->gen) {
			member_drop(s, i);  /* left the cgroup, or died between ticks */
			*changed = true;
		} else {
			i++;
		}
	}
}

int sampler_sample(struct sampler *s, int64_t now_ns, bool force_exact, struct mem_sample *out)
{
	s->tick++;
	if (s->have_last_now && now_ns > s->last_now_ns) {
		double cap = s->cfg.pss_cpu_budget * (double)ROLLUP_BURST_NS;
		s->credit_ns += (double)(now_ns - s->last_now_ns) * s->cfg.pss_cpu_budget;
		if (s->credit_ns > cap)
			s->credit_ns = cap;
	}
	s->last_now_ns = now_ns;
	s->have_last_now = true;
	bool step = s->step_due;
	s->step_due = false;

	/* Nothing due: the last sample stands (no read, so nothing is exact
	 * at this one). This is most ticks of an idle job. */
	if (!force_exact && now_ns < s->rest_until_ns) {
		double t;
		memcpy(&t, &out->t, sizeof(t));
		*out = s->last;
		memcpy(&out->t, &t, sizeof(t));
		out->pss_exact = false;
		return out->nprocs;
	}

	bool changed = false;
	if (!s->scanned || force_exact || now_ns >= s->next_scan_ns) {
		update_membership(s, now_ns, force_exact || !s->scanned, &changed);
		s->scanned = true;
		/* on the quiet sources' windows (see quiet()): one wake-up
		 * does both */
		s->next_scan_ns = (now_ns + s->cfg.tree_scan_interval_ns) / QUIET_EVERY_NS * QUIET_EVERY_NS;
		if (s->next_scan_ns <= now_ns)
			s->next_scan_ns = now_ns + s->cfg.tree_scan_interval_ns;
		for (size_t i = 0; i < s->n; i++)
			if (now_ns - s->m[i].stat_ns >= MEMBER_STAT_EVERY_NS)
				refresh_stat(s, &s->m[i], now_ns);
	}

	/* The per-tick part: one pread per member and one for the cgroup's
	 * usage, except for a source that is quiet (see quiet()). */
	bool all = force_exact || changed || s->cfg.every_tick;
	if (s->usage_fd >= 0 && (all || !quiet(&s->usage_src, now_ns))) {
		uint64_t v = 0;
		s->have_usage = read_usage(s, &v);
		src_read(&s->usage_src, now_ns, s->have_usage ? v : UINT64_MAX);
		s->usage = v;
	}
	/* memory.stat: dearer (a larger text), and only for the kinds, so at
	 * most every 200 ms (100 ms at a step) and only when the usage moved
	 * since; but when the usage moved fast (by MEMSTAT_FAST_MOVE_BYTES
	 * since the last read), at once, every 5 ms at most and only while
	 * the CPU budget of the rollups has credit (each read is charged to
	 * it): growth that lasts a fraction of a second gets its kinds read
	 * like slow growth */
	uint64_t moved = s->usage > s->usage_at_memstat ? s->usage - s->usage_at_memstat :
	                 s->usage_at_memstat - s->usage;
	if (s->cfg.cgroup_dir && s->usage_fd >= 0 &&
	    (force_exact || (now_ns - s->memstat_ns >= (step ? STEP_MEMSTAT_EVERY_NS : MEMSTAT_EVERY_NS) &&
	                     (!s->memstat_ns || s->usage != s->usage_at_memstat)) ||
	     (moved >= MEMSTAT_FAST_MOVE_BYTES && s->credit_ns > 0 &&
	      now_ns - s->memstat_ns >= MEMSTAT_FAST_EVERY_NS))) {
		int64_t t0 = thread_cpu_ns();
		s->memstat_ns = now_ns;
		s->usage_at_memstat = s->usage;
		s->have_memstat = cgroup_read_memstat(s->cfg.cgroup_dir, &s->memstat) == 0;
		s->memstat_reads += s->have_memstat;
		s->credit_ns -= (double)(thread_cpu_ns() - t0);
	} else if (s->dev_shm && (force_exact || now_ns - s->memstat_ns >= (step ? STEP_MEMSTAT_EVERY_NS :
	                                                                       MEMSTAT_EVERY_NS))) {
		read_dev_shm(s, now_ns);
	}
	uint64_t tree_moved = 0;    /* resident file + shmem pages moved, this tick */
	for (size_t i = 0; i < s->n; i++) {
		s->m[i].exact_now = false;
		s->m[i].shared_moved = 0;
	}
	for (size_t i = 0; i < s->n; ) {
		struct member *m = &s->m[i];
		if (!all && quiet(&m->src, now_ns)) {
			i++;
			continue;
		}
		struct proc_statm sm;
		int r = m->statm_fd >= 0 ? pread_proc_statm(m->statm_fd, &sm)
		                         : read_proc_statm(s->root, m->pid, &sm);
		if (r < 0) {
			member_drop(s, i);  /* reaped (ESRCH) or gone */
			changed = true;
			continue;
		}
		m->live = sm.size_pages > 0;
		m->rss = sm.resident_pages * s->page_bytes;
		m->anon = sm.resident_pages > sm.shared_pages ?
		          (sm.resident_pages - sm.shared_pages) * s->page_bytes : 0;
		uint64_t shared = sm.shared_pages * s->page_bytes;
		if (m->statm_seen) {
			m->shared_moved = shared > m->shared ? shared - m->shared : m->shared - shared;
			tree_moved += m->shared_moved;
		}
		m->shared = shared;
		if (!m->statm_seen && m->live) {
			/* first sight: a child of a member may be a fork sharing
			 * its parent's pages (update_cow() decides) */
			m->statm_seen = true;
			struct member *parent = m->ppid > 0 ? member_find(s, m->ppid) : NULL;
			if (parent && parent->pid != m->pid) {
				m->cow_candidate = true;
				m->cow_base = m->anon;
				/* A fork adds no memory: what the child shares is
				 * still in its parent's shown PSS, and the child's own
				 * is what it gained since (see settle()). */
				if (parent->shown) {
					m->shown = true;
					m->shown_pss = m->shown_uss = 0;
					m->shown_rss = m->rss;
				}
			}
		}
		src_read(&m->src, now_ns, sm.resident_pages ^ sm.shared_pages << 32 ^ sm.size_pages << 48);
		i++;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct member *m = &s->m[i];
		m->tree_moved += tree_moved - m->shared_moved;
		m->tree_changed |= changed;
		if (changed && m->have_exact && shares(s, m))
			m->stale = true;
	}

	refresh_rollups(s, now_ns, force_exact, step);
	settle(s, now_ns);

	if (s->cfg.nvml && (!s->gpu_sampled || now_ns >= s->next_gpu_ns || force_exact)) {
		sample_gpu(s);
		s->gpu_sampled = true;
		s->next_gpu_ns = now_ns + s->cfg.gpu_interval_ns;
	}

	double t;                   /* the caller's (maybe not set yet): kept */
	memcpy(&t, &out->t, sizeof(t));
	memset(out, 0, sizeof(*out));
	memcpy(&out->t, &t, sizeof(t));
	bool all_exact = true;
	uint64_t gpu = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct member *m = &s->m[i];
		if (!m->live) {
			m->pss = m->uss = 0;
			continue;
		}
		if (m->shown_now) {
			m->pss = m->pss_exact;
			m->uss = m->uss_exact;
		} else if (m->shown) {
			m->pss = shift(m->shown_pss, m->shown_rss, m->rss);
			m->uss = shift(m->shown_uss, m->shown_rss, m->rss);
			all_exact = false;
		} else {
			/* Never read (no budget yet, or not allowed): RSS bounds PSS,
			 * resident anonymous memory bounds USS. */
			m->pss = m->rss;
			m->uss = m->anon;
			all_exact = false;
		}
		out->nprocs++;
		out->rss += m->rss;
		out->pss += m->pss;
		out->uss += m->uss;
		out->swap += m->swap;
		gpu += m->gpu;
	}
	out->pss_exact = out->nprocs > 0 && all_exact;
	if (s->have_gpu) {
		out->has_gpu = true;
		out->gpu = s->gpu_device_total ? s->gpu_device_bytes : gpu;
	}
	out->cgroup = s->usage;
	out->has_cgroup = s->have_usage;
	s->last = *out;
	s->rest_until_ns = rest_until(s, now_ns);
	return out->nprocs;
}

static void fill_proc(const struct sampler *s, const struct member *m, struct proc_mem *p)
{
	p->pid = m->pid;
	p->ppid = m->ppid;
	memcpy(p->name, m->name, sizeof(p->name));
	p->rss = m->rss;
	p->pss = m->pss;
	p->uss = m->uss;
	p->swap = m->swap;
	p->gpu = s->gpu_device_total ? 0 : m->gpu;
	p->anon = m->anon;
	p->shmem = m->pss_shmem_exact;
	/* file-backed: PSS of the mapped files at the last rollup, moved by
	 * what statm's resident file + shmem pages did since */
	p->file = m->have_exact ? shift(m->pss_file_exact, m->shared_at_exact, m->shared) : m->shared;
	p->cow = m->cow;
	p->cow_base = m->cow_base;
}

static void out_room(struct sampler *s)
{
	if (s->out_alloc < s->n) {
		free(s->out);
		s->out_alloc = s->alloc;
		s->out = xmalloc(s->out_alloc * sizeof(*s->out));
	}
}

size_t sampler_kinds_due(struct sampler *s, int64_t now_ns, const struct proc_mem **out)
{
	out_room(s);
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct member *m = &s->m[i];
		if (!m->live)
			continue;
		struct proc_mem *p = &s->out[k];
		fill_proc(s, m, p);
		uint64_t v[5] = { p->anon, p->cow, p->file, p->shmem, p->gpu };
		bool moved = !m->kinds_ns || now_ns - m->kinds_ns >= KINDS_HEARTBEAT_NS;
		for (int j = 0; j < 5 && !moved; j++)
			moved = (v[j] > m->kinds_sent[j] ? v[j] - m->kinds_sent[j] : m->kinds_sent[j] - v[j]) >=
			        KINDS_MOVE_BYTES;
		if (!moved)
			continue;
		m->kinds_ns = now_ns;
		memcpy(m->kinds_sent, v, sizeof(v));
		k++;
	}
	*out = s->out;
	return k;
}

size_t sampler_procs(struct sampler *s, const struct proc_mem **out)
{
	out_room(s);
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->m[i].live)
			fill_proc(s, &s->m[i], &s->out[k++]);
	*out = s->out;
	return k;
}

int64_t sampler_next_due(const struct sampler *s)
{
	return s->rest_until_ns;
}

int64_t sampler_rollup_ns(const struct sampler *s)
{
	return s->rollup_ns;
}

void sampler_mark_step(struct sampler *s)
{
	s->step_due = true;
	s->rest_until_ns = 0;       /* the next sample reads what is due */
}

uint64_t sampler_job_kinds(const struct sampler *s, struct cgroup_memstat *out)
{
	if (!s->have_memstat)
		return 0;
	*out = s->memstat;
	return s->memstat_reads;
}

bool sampler_job_kinds_dev_shm(const struct sampler *s)
{
	return s->dev_shm;
}

bool sampler_gpu_is_device_total(const struct sampler *s)
{
	return s->gpu_device_total;
}

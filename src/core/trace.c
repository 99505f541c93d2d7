/*
 * trace.c — the tracer's wire lines, gathered into sites (see trace.h).
 *
 * The lines, one record each (docs/internals/tracer.md):
 *
 *   hello PID PPID MEAN EXE         a process starts (or execs): its old sites are freed
 *   map PID MAP PATH                an object file
 *   site PID SITE KIND FRAME...     FRAME = MAP:HEXVADDR[:SYMBOL]
 *   py PID SITE FRAME\tFRAME...     its Python stack
 *   live PID SEQ TNS SITE:LIVE:ALLOCS:FREES ...
 *   end PID SEQ TOTAL DROPPED
 *
 * A site's local number becomes a global one on its first `live`, when its
 * `py` line (sent before) is known, so the key holds both stacks.
 */
#include "core/trace.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

struct local_site {
	char kind;
	char *frames;          /* as in trace_site, PATH resolved */
	char *python;
	size_t global;         /* index + 1 into ti->sites; 0: not yet */
	int64_t live, allocs, frees;
};

struct proc {
	pid_t pid;
	bool gone;
	char **maps;           /* by map id */
	size_t nmaps;
	struct local_site *sites;   /* by site id */
	size_t nsites;
	int64_t dropped;
};

struct trace_in {
	struct proc *procs;
	size_t nprocs, procs_cap;
	struct trace_site **sites;  /* by id - 1 */
	size_t nsites, sites_cap;
	size_t *slots;              /* open addressing on the key: index + 1, 0 empty */
	size_t nslots;
	struct trace_site **dirty;
	size_t dirty_cap;
	int64_t bad_lines, mean;
};

struct trace_in *trace_in_new(void)
{
	return xcalloc(1, sizeof(struct trace_in));
}

static void proc_clear(struct proc *p)
{
	for (size_t i = 0; i < p->nmaps; i++)
		free(p->maps[i]);
	free(p->maps);
	for (size_t i = 0; i < p->nsites; i++) {
		free(p->sites[i].frames);
		free(p->sites[i].python);
	}
	free(p->sites);
	p->maps = NULL;
	p->sites = NULL;
	p->nmaps = p->nsites = 0;
}

void trace_in_free(struct trace_in *ti)
{
	if (!ti)
		return;
	for (size_t i = 0; i < ti->nprocs; i++)
		proc_clear(&ti->procs[i]);
	free(ti->procs);
	for (size_t i = 0; i < ti->nsites; i++) {
		free(ti->sites[i]->frames);
		free(ti->sites[i]->python);
		free(ti->sites[i]);
	}
	free(ti->sites);
	free(ti->slots);
	free(ti->dirty);
	free(ti);
}

/* ---- lookups ----------------------------------------------------------- */

static struct proc *find_proc(struct trace_in *ti, pid_t pid, bool create)
{
	for (size_t i = 0; i < ti->nprocs; i++)
		if (ti->procs[i].pid == pid)
			return &ti->procs[i];
	if (!create)
		return NULL;
	if (ti->nprocs == ti->procs_cap) {
		ti->procs_cap = ti->procs_cap ? 2 * ti->procs_cap : 8;
		ti->procs = xrealloc(ti->procs, ti->procs_cap * sizeof(*ti->procs));
	}
	struct proc *p = &ti->procs[ti->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

static uint64_t hash_key(char kind, const char *frames, const char *python)
{
	uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
	h = (h ^ (unsigned char)kind) * 1099511628211ULL;
	for (const char *s = frames; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	h = (h ^ 0xff) * 1099511628211ULL;
	for (const char *s = python ? python : ""; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static bool same_site(const struct trace_site *s, char kind, const char *frames, const char *python)
{
	return s->kind == kind && !strcmp(s->frames, frames) &&
	       !strcmp(s->python ? s->python : "", python ? python : "");
}

static void rehash(struct trace_in *ti)
{
	free(ti->slots);
	ti->nslots = ti->nslots ? 2 * ti->nslots : 256;
	ti->slots = xcalloc(ti->nslots, sizeof(size_t));
	for (size_t i = 0; i < ti->nsites; i++) {
		const struct trace_site *s = ti->sites[i];
		size_t j = hash_key(s->kind, s->frames, s->python) & (ti->nslots - 1);
		while (ti->slots[j])
			j = (j + 1) & (ti->nslots - 1);
		ti->slots[j] = i + 1;
	}
}

/* The global site of a local one, made on first use. */
static struct trace_site *global_site(struct trace_in *ti, struct local_site *l)
{
	if (l->global)
		return ti->sites[l->global - 1];
	if (2 * (ti->nsites + 1) > ti->nslots)
		rehash(ti);
	size_t j = hash_key(l->kind, l->frames, l->python) & (ti->nslots - 1);
	for (; ti->slots[j]; j = (j + 1) & (ti->nslots - 1))
		if (same_site(ti->sites[ti->slots[j] - 1], l->kind, l->frames, l->python)) {
			l->global = ti->slots[j];
			return ti->sites[l->global - 1];
		}
	if (ti->nsites == ti->sites_cap) {
		ti->sites_cap = ti->sites_cap ? 2 * ti->sites_cap : 64;
		ti->sites = xrealloc(ti->sites, ti->sites_cap * sizeof(*ti->sites));
	}
	struct trace_site *s = xcalloc(1, sizeof(*s));
	s->id = (int64_t)ti->nsites + 1;
	s->kind = l->kind;
	s->frames = xstrdup(l->frames);
	s->python = l->python ? xstrdup(l->python) : NULL;
	ti->sites[ti->nsites++] = s;
	ti->slots[j] = ti->nsites;
	l->global = ti->nsites;
	return s;
}

/* Add what a local site holds now (sign -1 to take it back). */
static void account(struct trace_in *ti, struct local_site *l, int sign)
{
	if (!l->live && !l->allocs && !l->frees)
		return;
	struct trace_site *s = global_site(ti, l);
	s->live += sign * l->live;
	s->allocs += sign * l->allocs;
	s->frees += sign * l->frees;
	s->dirty = true;
}

/* A process ends or execs: its sites hold nothing more. */
static void proc_drop(struct trace_in *ti, struct proc *p)
{
	for (size_t i = 0; i < p->nsites; i++) {
		struct local_site *l = &p->sites[i];
		if (l->frames && l->live) {
			struct trace_site *s = global_site(ti, l);
			s->live -= l->live;
			s->dirty = true;
		}
	}
	proc_clear(p);
}

/* ---- parsing ----------------------------------------------------------- */

struct cursor {
	const char *p, *end;
};

/* The next space-separated word; false at the end. */
static bool word(struct cursor *c, const char **w, size_t *n)
{
	while (c->p < c->end && *c->p == ' ')
		c->p++;
	if (c->p >= c->end)
		return false;
	*w = c->p;
	while (c->p < c->end && *c->p != ' ')
		c->p++;
	*n = (size_t)(c->p - *w);
	return true;
}

static bool number(struct cursor *c, int64_t *out)
{
	const char *w;
	size_t n;
	char buf[32], *end;
	if (!word(c, &w, &n) || n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, w, n);
	buf[n] = '\0';
	errno = 0;
	long long v = strtoll(buf, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* The rest of the line after one space. */
static char *rest(struct cursor *c)
{
	if (c->p < c->end && *c->p == ' ')
		c->p++;
	size_t n = (size_t)(c->end - c->p);
	char *s = xmalloc(n + 1);
	memcpy(s, c->p, n);
	s[n] = '\0';
	return s;
}

/* Grow an array of `size`-byte elements to hold index i. */
static void *grow(void *a, size_t *n, size_t i, size_t size)
{
	if (i < *n)
		return a;
	size_t want = *n ? *n : 16;
	while (want <= i)
		want *= 2;
	a = xrealloc(a, want * size);
	memset((char *)a + *n * size, 0, (want - *n) * size);
	*n = want;
	return a;
}

#define MAX_ID 1000000     /* a bigger id is a broken line, not a site */

static int on_site(struct proc *p, struct cursor *c)
{
	int64_t id;
	const char *w;
	size_t n;
	if (!number(c, &id) || id < 0 || id >= MAX_ID || !word(c, &w, &n) || n != 1 || (*w != 'm' && *w != 'a'))
		return -1;
	char kind = *w;
	struct strbuf sb = STRBUF_INIT;
	while (word(c, &w, &n)) {
		/* MAP:HEXVADDR[:SYMBOL] */
		char buf[4200];
		if (n >= sizeof(buf))
			goto bad;
		memcpy(buf, w, n);
		buf[n] = '\0';
		char *end, *addr, *sym;
		long map = strtol(buf, &end, 10);
		if (end == buf || *end != ':' || map < 0 || (size_t)map >= p->nmaps || !p->maps[map])
			goto bad;
		addr = end + 1;
		unsigned long long va = strtoull(addr, &end, 16);
		if (end == addr || (*end && *end != ':'))
			goto bad;
		sym = *end ? end + 1 : "";
		strbuf_addf(&sb, "%s\t0x%llx\t%s\n", p->maps[map], va, sym);
	}
	size_t nsites = p->nsites;
	p->sites = grow(p->sites, &nsites, (size_t)id, sizeof(*p->sites));
	p->nsites = nsites;
	struct local_site *l = &p->sites[id];
	if (l->frames) {
		strbuf_release(&sb);
		return -1;         /* announced twice */
	}
	l->kind = kind;
	l->frames = strbuf_detach(&sb, NULL);
	return 0;
bad:
	strbuf_release(&sb);
	return -1;
}

static int on_live(struct trace_in *ti, struct proc *p, struct cursor *c)
{
	int64_t seq, t;
	const char *w;
	size_t n;
	if (!number(c, &seq) || !number(c, &t))
		return -1;
	int r = 0;
	while (word(c, &w, &n)) {
		char buf[96], *e;
		long long v[4];
		if (n >= sizeof(buf)) {
			r = -1;
			continue;
		}
		memcpy(buf, w, n);
		buf[n] = '\0';
		char *q = buf;
		int k = 0;
		for (; k < 4; k++) {
			errno = 0;
			v[k] = strtoll(q, &e, 10);
			if (e == q || errno || (k < 3 ? *e != ':' : *e != '\0'))
				break;
			q = e + 1;
		}
		if (k < 4 || v[0] < 0 || (size_t)v[0] >= p->nsites || !p->sites[v[0]].frames) {
			r = -1;
			continue;
		}
		struct local_site *l = &p->sites[v[0]];
		account(ti, l, -1);
		l->live = v[1] > 0 ? v[1] : 0;
		l->allocs = v[2];
		l->frees = v[3];
		account(ti, l, +1);
	}
	return r;
}

int trace_in_line(struct trace_in *ti, const char *line, size_t len)
{
	struct cursor c = { line, line + len };
	if (len && line[len - 1] == '\r')
		c.end--;
	const char *w;
	size_t n;
	int64_t pid;
	if (!word(&c, &w, &n) || !number(&c, &pid) || pid <= 0 || pid > INT32_MAX)
		goto bad;
	struct proc *p = find_proc(ti, (pid_t)pid, n == 5 && !memcmp(w, "hello", 5));
	if (!p)
		goto bad;          /* a process that never said hello */

	if (n == 5 && !memcmp(w, "hello", 5)) {
		int64_t ppid, mean;
		if (!number(&c, &ppid) || !number(&c, &mean))
			goto bad;
		proc_drop(ti, p);  /* an exec: the old image's memory is gone */
		p->gone = false;
		ti->mean = mean;
	} else if (n == 3 && !memcmp(w, "map", 3)) {
		int64_t id;
		if (!number(&c, &id) || id < 0 || id >= MAX_ID)
			goto bad;
		size_t nmaps = p->nmaps;
		p->maps = grow(p->maps, &nmaps, (size_t)id, sizeof(*p->maps));
		p->nmaps = nmaps;
		free(p->maps[id]);
		p->maps[id] = rest(&c);
	} else if (n == 4 && !memcmp(w, "site", 4)) {
		if (on_site(p, &c) < 0)
			goto bad;
	} else if (n == 2 && !memcmp(w, "py", 2)) {
		int64_t id;
		if (!number(&c, &id) || id < 0 || (size_t)id >= p->nsites || !p->sites[id].frames ||
		    p->sites[id].global)
			goto bad;
		free(p->sites[id].python);
		p->sites[id].python = rest(&c);
	} else if (n == 4 && !memcmp(w, "live", 4)) {
		if (on_live(ti, p, &c) < 0)
			goto bad;
	} else if (n == 3 && !memcmp(w, "end", 3)) {
		int64_t seq, total, dropped;
		if (!number(&c, &seq) || !number(&c, &total) || !number(&c, &dropped))
			goto bad;
		p->dropped = dropped;
	} else {
		goto bad;
	}
	return 0;
bad:
	ti->bad_lines++;
	return -1;
}

void trace_in_forget(struct trace_in *ti, pid_t pid)
{
	struct proc *p = find_proc(ti, pid, false);
	if (p && !p->gone) {
		proc_drop(ti, p);
		p->gone = true;
	}
}

void trace_in_forget_dead(struct trace_in *ti)
{
	for (size_t i = 0; i < ti->nprocs; i++)
		if (!ti->procs[i].gone && kill(ti->procs[i].pid, 0) < 0 && errno == ESRCH)
			trace_in_forget(ti, ti->procs[i].pid);
}

struct trace_site **trace_take_dirty(struct trace_in *ti, size_t *n)
{
	if (ti->dirty_cap < ti->nsites) {
		ti->dirty_cap = ti->sites_cap;
		ti->dirty = xrealloc(ti->dirty, ti->dirty_cap * sizeof(*ti->dirty));
	}
	size_t k = 0;
	for (size_t i = 0; i < ti->nsites; i++) {
		struct trace_site *s = ti->sites[i];
		if (s->dirty && s->live != s->taken_live) {
			s->taken_live = s->live;
			ti->dirty[k++] = s;
		}
		s->dirty = false;
	}
	*n = k;
	return ti->dirty;
}

const struct trace_site *trace_in_site(const struct trace_in *ti, int64_t id)
{
	return id >= 1 && (size_t)id <= ti->nsites ? ti->sites[id - 1] : NULL;
}

void trace_in_counts(const struct trace_in *ti, struct trace_counts *out)
{
	memset(out, 0, sizeof(*out));
	out->sites = ti->nsites;
	out->processes = ti->nprocs;
	out->bad_lines = ti->bad_lines;
	out->mean_bytes = ti->mean;
	for (size_t i = 0; i < ti->nprocs; i++)
		out->dropped_lines += ti->procs[i].dropped;
}

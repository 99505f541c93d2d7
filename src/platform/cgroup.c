/*
 * cgroup.c — the job's own cgroup, on cgroup v2 (unified) or v1 (the memory
 * controller's hierarchy).
 *
 * Role: the supervisor puts each job in a fresh child cgroup of its own
 * cgroup, to read the job's memory as the kernel charges it, to find every
 * process of the job (even those that left its process group), to kill
 * them all at the end and to enforce memory limits. Nothing is assumed:
 * the caller's cgroups come from PROC/self/cgroup, the mount points from
 * PROC/self/mountinfo (PROC is "/proc" unless cgroup_set_roots() says
 * otherwise, so tests run on fixture trees). docs/internals/cgroups.md
 * explains the strategies, delegation on v2 and the fallbacks.
 *
 * Units: bytes. Paths are at most PATH_MAX bytes, NUL included.
 */
#include "platform/cgroup.h"
#include "platform/proc.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define PROC_CGROUP_CAP   (64 * 1024)        /* PROC/self/cgroup */
#define MOUNTINFO_CAP     (16 * 1024 * 1024) /* PROC/self/mountinfo, at most */
#define SMALL_FILE_CAP    4096               /* memory.max, cgroup.controllers... */
#define REMOVE_WAIT_NS    1000000000LL       /* rmdir retries for this long */
#define KILL_WAIT_NS      2000000000LL       /* SIGKILL rounds without cgroup.kill */
#define RETRY_SLEEP_NS    10000000L          /* between retries */
#define MAX_NAME_TRIES    1000               /* leakproof-PID-N names tried */
#define PIDSET_CAP        (4 * 1024 * 1024)  /* pid_max is at most 2^22 */
#define UNLIMITED_FROM    (1ULL << 62)       /* a limit this big means none */

static char proc_root[PATH_MAX] = "/proc";

void cgroup_set_roots(const char *root)
{
	snprintf(proc_root, sizeof(proc_root), "%s", root && *root ? root : "/proc");
}

/* ---- small string helpers ------------------------------------------- */

/* Copy n bytes of s into dst as a string; false (and dst "") when it
 * does not fit. */
static bool copy_span(char *dst, size_t dstsz, const char *s, size_t n)
{
	if (!dstsz)
		return false;
	if (n >= dstsz) {
		dst[0] = '\0';
		return false;
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	return true;
}

/* Whether tok is one of the sep-separated items of s[0..n). */
static bool has_token(const char *s, size_t n, const char *tok, char sep)
{
	size_t toklen = strlen(tok);
	const char *end = s + n;
	while (s < end) {
		const char *e = memchr(s, sep, (size_t)(end - s));
		if (!e)
			e = end;
		if ((size_t)(e - s) == toklen && !memcmp(s, tok, toklen))
			return true;
		if (e == end)
			break;
		s = e + 1;
	}
	return false;
}

/* Whether the whitespace-separated words of s include word. */
static bool has_word(const char *s, const char *word)
{
	size_t wlen = strlen(word);
	while (*s) {
		s += strspn(s, " \t\n");
		size_t n = strcspn(s, " \t\n");
		if (n == wlen && !memcmp(s, word, wlen))
			return true;
		s += n;
	}
	return false;
}

/* Parse decimal digits at *s (at least one, no sign); advances *s. -1 on
 * no digits or overflow. */
static int parse_u64_digits(const char **s, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*s = p;
	*out = v;
	return 0;
}

static const char *skip_blanks(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

static void sleep_ns(long ns)
{
	struct timespec ts = { 0, ns };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- pure parsers ---------------------------------------------------- */

int parse_proc_cgroup(const char *buf, char *v2_path, size_t v2sz, char *v1_mem_path, size_t v1sz)
{
	bool found_v2 = false, found_v1 = false;

	if (v2sz)
		v2_path[0] = '\0';
	if (v1sz)
		v1_mem_path[0] = '\0';
	for (const char *line = buf; *line; ) {
		const char *eol = strchrnul(line, '\n');
		const char *c1 = memchr(line, ':', (size_t)(eol - line));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (c2) {
			/* "ID:CONTROLLERS:PATH"; the path may hold ':' itself */
			const char *path = c2 + 1;
			size_t plen = (size_t)(eol - path);
			size_t idlen = (size_t)(c1 - line);
			bool id_ok = idlen > 0 && strspn(line, "0123456789") == idlen;
			if (plen && path[plen - 1] == '\r')
				plen--;
			if (id_ok && plen && path[0] == '/') {
				if (idlen == 1 && line[0] == '0' && c2 == c1 + 1) {
					if (!found_v2)
						found_v2 = copy_span(v2_path, v2sz, path, plen);
				} else if (has_token(c1 + 1, (size_t)(c2 - c1 - 1), "memory", ',')) {
					if (!found_v1)
						found_v1 = copy_span(v1_mem_path, v1sz, path, plen);
				}
			}
		}
		line = *eol ? eol + 1 : eol;
	}
	return found_v2 || found_v1 ? 0 : -1;
}

/* Copy a mountinfo field, decoding the octal escapes the kernel writes
 * for space, tab, newline and backslash ("\040"). false when it does not
 * fit. */
static bool unescape_field(char *dst, size_t dstsz, const char *s, size_t n)
{
	size_t j = 0;
	if (!dstsz)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '\\' && i + 3 < n &&
		    s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' &&
		    s[i + 3] >= '0' && s[i + 3] <= '7') {
			int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
			if (v) {
				c = (char)v;
				i += 3;
			}
		}
		if (j + 1 >= dstsz) {
			dst[0] = '\0';
			return false;
		}
		dst[j++] = c;
	}
	dst[j] = '\0';
	return true;
}

#define MOUNTINFO_MAX_FIELDS 64

/* Both buffers made empty (a size of 0: nothing to write). */
static void empty_mount(char *mount, size_t msz, char *root, size_t rsz)
{
	if (msz)
		mount[0] = '\0';
	if (rsz)
		root[0] = '\0';
}

/* A mountinfo line's mount point (field 4) and root (field 3), split in
 * fields f of lengths flen, unescaped into mount and root: true, else both
 * empty (one did not fit). */
static bool take_mount(const char *const *f, const size_t *flen, char *mount, size_t msz, char *root, size_t rsz)
{
	if (unescape_field(mount, msz, f[4], flen[4]) && unescape_field(root, rsz, f[3], flen[3]))
		return true;
	empty_mount(mount, msz, root, rsz);
	return false;
}

/* parse_cgroup_mounts, with the root of the cgroup2 mount as well. */
static int parse_cgroup_mounts_roots(const char *mountinfo, char *v2_mount, size_t v2sz,
                                     char *v2_root, size_t v2rsz,
                                     char *v1_mem_mount, size_t v1sz,
                                     char *v1_mem_root, size_t v1rsz)
{
	bool found_v2 = false, found_v1 = false;

	empty_mount(v2_mount, v2sz, v2_root, v2rsz);
	empty_mount(v1_mem_mount, v1sz, v1_mem_root, v1rsz);
	for (const char *line = mountinfo; *line; ) {
		const char *eol = strchrnul(line, '\n');
		const char *f[MOUNTINFO_MAX_FIELDS];
		size_t flen[MOUNTINFO_MAX_FIELDS];
		int nf = 0, sep = -1;

		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS" */
		for (const char *p = line; p < eol && nf < MOUNTINFO_MAX_FIELDS; ) {
			while (p < eol && *p == ' ')
				p++;
			if (p >= eol)
				break;
			const char *e = p;
			while (e < eol && *e != ' ')
				e++;
			f[nf] = p;
			flen[nf] = (size_t)(e - p);
			if (sep < 0 && nf >= 6 && flen[nf] == 1 && *p == '-')
				sep = nf;
			nf++;
			p = e;
		}
		if (sep >= 6 && nf >= sep + 4) {
			const char *fstype = f[sep + 1];
			size_t fslen = flen[sep + 1];
			size_t optlen = flen[sep + 3];
			if (optlen && f[sep + 3][optlen - 1] == '\r')
				optlen--;
			if (!found_v2 && fslen == 7 && !memcmp(fstype, "cgroup2", 7))
				found_v2 = take_mount(f, flen, v2_mount, v2sz, v2_root, v2rsz);
			else if (!found_v1 && fslen == 6 && !memcmp(fstype, "cgroup", 6) &&
			         has_token(f[sep + 3], optlen, "memory", ','))
				found_v1 = take_mount(f, flen, v1_mem_mount, v1sz, v1_mem_root, v1rsz);
		}
		line = *eol ? eol + 1 : eol;
	}
	return found_v2 || found_v1 ? 0 : -1;
}

int parse_cgroup_mounts(const char *mountinfo, char *v2_mount, size_t v2sz,
                        char *v1_mem_mount, size_t v1sz, char *v1_mem_root, size_t v1rsz)
{
	char v2_root[PATH_MAX];
	return parse_cgroup_mounts_roots(mountinfo, v2_mount, v2sz, v2_root, sizeof(v2_root),
	                                 v1_mem_mount, v1sz, v1_mem_root, v1rsz);
}

int parse_limit_value(const char *buf, uint64_t *out)
{
	const char *s = buf;
	uint64_t v;

	if (!strncmp(s, "max", 3)) {
		s += 3;
		v = 0;
	} else {
		if (parse_u64_digits(&s, &v) < 0)
			return -1;
		if (v >= UNLIMITED_FROM)
			v = 0;
	}
	if (*skip_blanks(s))
		return -1;
	*out = v;
	return 0;
}

/* Calls fn(key, keylen, value, ctx) for each "KEY VALUE" line whose value
 * is a plain number; malformed lines are skipped. */
static void for_each_keyed_line(const char *buf,
                                void (*fn)(const char *, size_t, uint64_t, void *), void *ctx)
{
	for (const char *line = buf; *line; ) {
		const char *eol = strchrnul(line, '\n');
		size_t klen = strcspn(line, " \t\n");
		const char *v = line + klen;
		while (*v == ' ' || *v == '\t')
			v++;
		uint64_t val;
		if (klen && v < eol && parse_u64_digits(&v, &val) == 0) {
			while (v < eol && (*v == ' ' || *v == '\t' || *v == '\r'))
				v++;
			if (v == eol)
				fn(line, klen, val, ctx);
		}
		line = *eol ? eol + 1 : eol;
	}
}

struct events_ctx {
	struct cgroup_events *ev;
	int known;
	bool v1;
};

static bool key_is(const char *k, size_t klen, const char *name)
{
	return klen == strlen(name) && !memcmp(k, name, klen);
}

static void events_line(const char *k, size_t klen, uint64_t val, void *vctx)
{
	struct events_ctx *ctx = vctx;
	if (ctx->v1) {
		if (key_is(k, klen, "oom_kill")) {
			ctx->ev->oom_kill = val;
			ctx->ev->oom = val;
			ctx->known++;
		} else if (key_is(k, klen, "oom_kill_disable") || key_is(k, klen, "under_oom")) {
			ctx->known++;
		}
		return;
	}
	if (key_is(k, klen, "oom"))
		ctx->ev->oom = val;
	else if (key_is(k, klen, "oom_kill"))
		ctx->ev->oom_kill = val;
	else if (key_is(k, klen, "max"))
		ctx->ev->max = val;
	else if (key_is(k, klen, "high"))
		ctx->ev->high = val;
	else if (!key_is(k, klen, "low") && !key_is(k, klen, "oom_group_kill"))
		return;
	ctx->known++;
}

int parse_memory_events(const char *buf, struct cgroup_events *out)
{
	struct events_ctx ctx = { out, 0, false };
	memset(out, 0, sizeof(*out));
	for_each_keyed_line(buf, events_line, &ctx);
	return ctx.known ? 0 : -1;
}

int parse_oom_control(const char *buf, struct cgroup_events *out)
{
	struct events_ctx ctx = { out, 0, true };
	memset(out, 0, sizeof(*out));
	for_each_keyed_line(buf, events_line, &ctx);
	return ctx.known ? 0 : -1;
}

struct find_key_ctx {
	const char *key;
	uint64_t val;
	bool found;
};

static void find_key_line(const char *k, size_t klen, uint64_t val, void *vctx)
{
	struct find_key_ctx *ctx = vctx;
	if (!ctx->found && key_is(k, klen, ctx->key)) {
		ctx->val = val;
		ctx->found = true;
	}
}

/* memory.stat: the page cache (active_file + inactive_file: clean and
 * dirty file pages, shmem excluded on both versions, since shmem lives on
 * the anonymous LRU lists), shmem and anonymous memory. On v1 the
 * hierarchical total_* keys win over the cgroup's own, so children are
 * counted as on v2. */
struct memstat_ctx {
	uint64_t v[2][4];           /* [own, total_][active_file, inactive_file, shmem, anon] */
	unsigned seen[2];
};

static void memstat_line(const char *k, size_t klen, uint64_t val, void *vctx)
{
	static const char *const keys[4] = { "active_file", "inactive_file", "shmem", "anon" };
	struct memstat_ctx *ctx = vctx;
	int total = klen > 6 && !memcmp(k, "total_", 6);
	if (total) {
		k += 6;
		klen -= 6;
	}
	for (int i = 0; i < 4; i++)
		if (key_is(k, klen, keys[i]) || (i == 3 && key_is(k, klen, "rss"))) {
			ctx->v[total][i] = val;
			ctx->seen[total] |= 1u << i;
		}
}

int parse_memory_stat(const char *buf, struct cgroup_memstat *out)
{
	struct memstat_ctx ctx;
	memset(&ctx, 0, sizeof(ctx));
	memset(out, 0, sizeof(*out));
	for_each_keyed_line(buf, memstat_line, &ctx);
	int w = (ctx.seen[1] & 3u) == 3u ? 1 : 0;
	if ((ctx.seen[w] & 3u) != 3u)
		return -1;
	out->file_cache_bytes = ctx.v[w][0] + ctx.v[w][1];
	out->shmem_bytes = ctx.v[w][2];
	out->anon_bytes = ctx.v[w][3];
	return 0;
}

/* ---- file helpers ---------------------------------------------------- */

/* DIR/NAME into out; false (errno ENAMETOOLONG) when it does not fit. */
static bool join_path(char *out, size_t outsz, const char *dir, const char *name)
{
	int n = snprintf(out, outsz, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= outsz) {
		errno = ENAMETOOLONG;
		return false;
	}
	return true;
}

static ssize_t read_in_dir(const char *dir, const char *name, char *buf, size_t cap)
{
	char path[PATH_MAX];
	if (!join_path(path, sizeof(path), dir, name))
		return -1;
	return read_file_buf(path, buf, cap);
}

/* Write s to PATH in one write(); -1 with errno on failure. */
static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(s);
	ssize_t n;
	do
		n = write(fd, s, len);
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	if (n < 0 || (size_t)n != len) {
		errno = n < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

static int write_in_dir(const char *dir, const char *name, const char *s)
{
	char path[PATH_MAX];
	if (!join_path(path, sizeof(path), dir, name))
		return -1;
	return write_file(path, s);
}

/* Whether DIR/cgroup.controllers lists "memory". */
static bool controllers_have_memory(const char *dir)
{
	char buf[SMALL_FILE_CAP];
	return read_in_dir(dir, "cgroup.controllers", buf, sizeof(buf)) >= 0 &&
	       has_word(buf, "memory");
}

/* Read a whole /proc text file into a malloc'ed buffer, growing up to
 * cap; a file longer than cap loses its last, partial line. The caller
 * frees the result. NULL with errno on failure. */
static char *read_text_file(const char *path, size_t cap)
{
	size_t sz = 64 * 1024;
	for (;;) {
		char *buf = xmalloc(sz);
		ssize_t n = read_file_buf(path, buf, sz);
		if (n < 0) {
			int e = errno;
			free(buf);
			errno = e;
			return NULL;
		}
		if ((size_t)n + 1 < sz)
			return buf;
		if (sz >= cap) {
			char *nl = strrchr(buf, '\n');
			if (nl)
				nl[1] = '\0';
			else
				buf[0] = '\0';
			return buf;
		}
		free(buf);
		sz *= 2;
	}
}

struct pid_stream {
	void (*fn)(pid_t, void *);
	void *ctx;
	int count;
	long long cur;            /* the number being read, -1 between numbers */
};

static void pid_stream_end_number(struct pid_stream *ps)
{
	if (ps->cur < 0)
		return;
	/* 0 stands for a process of another pid namespace: counted, and
	 * handed on (fn must not signal it) */
	if (ps->count < INT_MAX) {
		ps->count++;
		if (ps->fn)
			ps->fn((pid_t)ps->cur, ps->ctx);
	}
	ps->cur = -1;
}

/*
 * Stream the pids of DIR/cgroup.procs (it can be long) through fn; fn may
 * be NULL to count them. Returns the number of entries read, or -1 with
 * errno.
 */
static int for_each_proc(const char *dir, void (*fn)(pid_t, void *), void *ctx)
{
	struct pid_stream ps = { fn, ctx, 0, -1 };
	char path[PATH_MAX], chunk[4096];

	if (!join_path(path, sizeof(path), dir, "cgroup.procs"))
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		for (ssize_t i = 0; i < n; i++) {
			char c = chunk[i];
			if (c >= '0' && c <= '9') {
				ps.cur = (ps.cur < 0 ? 0 : ps.cur) * 10 + (c - '0');
				if (ps.cur > INT_MAX)
					ps.cur = INT_MAX;
			} else {
				pid_stream_end_number(&ps);
			}
		}
		if (n == 0)
			break;
	}
	pid_stream_end_number(&ps);
	close(fd);
	return ps.count;
}

/* ---- where the caller's cgroups are ---------------------------------- */

struct cg_paths {
	char v2_dir[PATH_MAX];     /* the caller's v2 cgroup ("" if none) */
	char v2_mount[PATH_MAX];
	char v1_dir[PATH_MAX];     /* the caller's v1 memory cgroup ("" if none) */
	char v1_mount[PATH_MAX];
	/* scratch for parsing */
	char v2_path[PATH_MAX], v1_path[PATH_MAX], v1_root[PATH_MAX], v2_root[PATH_MAX];
};

/*
 * MOUNT + (PATH with ROOT, the part of the hierarchy mounted at MOUNT,
 * stripped). -1 with a reason when PATH lies outside what is mounted
 * (containers without a cgroup namespace, "/.." paths from a foreign
 * namespace) or is too long.
 */
static int resolve_dir(char *out, size_t outsz, const char *mount, const char *root,
                       const char *path, struct strbuf *why, const char *what)
{
	size_t rl = strlen(root);
	const char *rel = path;

	while (rl > 1 && root[rl - 1] == '/')
		rl--;
	if (!(rl == 1 && root[0] == '/')) {
		if (strncmp(path, root, rl) || (path[rl] != '/' && path[rl] != '\0')) {
			strbuf_addf(why, "%s: own cgroup '%s' is outside the mounted part '%s'; ",
			            what, path, root);
			return -1;
		}
		rel = path + rl;
	}
	if (strstr(rel, "/../") || (strlen(rel) >= 3 && !strcmp(rel + strlen(rel) - 3, "/.."))) {
		strbuf_addf(why, "%s: own cgroup '%s' is not visible here; ", what, path);
		return -1;
	}
	if (!strcmp(rel, "/"))
		rel = "";
	int n = snprintf(out, outsz, "%s%s", strcmp(mount, "/") ? mount : "", rel);
	if (n < 0 || (size_t)n >= outsz) {
		strbuf_addf(why, "%s: path of own cgroup too long; ", what);
		out[0] = '\0';
		return -1;
	}
	if (!out[0])
		snprintf(out, outsz, "/");
	return 0;
}

/* Find the v1 memory and v2 cgroup directories of process who ("self":
 * the caller; else a pid). Reasons for what is missing go to why. The
 * caller frees the result with free(). */
static struct cg_paths *load_paths_of(const char *who, struct strbuf *why)
{
	char path[PATH_MAX], rel[64];
	struct cg_paths *p = xcalloc(1, sizeof(*p));
	char *text;

	snprintf(rel, sizeof(rel), "%s/cgroup", who);
	if (!join_path(path, sizeof(path), proc_root, rel) ||
	    !(text = read_text_file(path, PROC_CGROUP_CAP))) {
		strbuf_addf(why, "cannot read '%s': %s; ", path, strerror(errno));
		return p;
	}
	int r = parse_proc_cgroup(text, p->v2_path, sizeof(p->v2_path),
	                          p->v1_path, sizeof(p->v1_path));
	free(text);
	if (r < 0) {
		strbuf_addf(why, "'%s' names no v2 or v1 memory cgroup; ", path);
		return p;
	}

	if (!join_path(path, sizeof(path), proc_root, "self/mountinfo") ||
	    !(text = read_text_file(path, MOUNTINFO_CAP))) {
		strbuf_addf(why, "cannot read '%s': %s; ", path, strerror(errno));
		return p;
	}
	parse_cgroup_mounts_roots(text, p->v2_mount, sizeof(p->v2_mount),
	                          p->v2_root, sizeof(p->v2_root),
	                          p->v1_mount, sizeof(p->v1_mount),
	                          p->v1_root, sizeof(p->v1_root));
	free(text);

	if (p->v2_path[0] && !p->v2_mount[0])
		strbuf_addf(why, "v2: no cgroup2 file system mounted; ");
	if (p->v2_path[0] && p->v2_mount[0])
		resolve_dir(p->v2_dir, sizeof(p->v2_dir), p->v2_mount, p->v2_root,
		            p->v2_path, why, "v2");
	if (p->v1_path[0] && !p->v1_mount[0])
		strbuf_addf(why, "v1: memory controller not mounted; ");
	if (p->v1_path[0] && p->v1_mount[0])
		resolve_dir(p->v1_dir, sizeof(p->v1_dir), p->v1_mount, p->v1_root,
		            p->v1_path, why, "v1");
	return p;
}

static struct cg_paths *load_paths(struct strbuf *why)
{
	return load_paths_of("self", why);
}

/* ---- creating the job cgroup ----------------------------------------- */

static unsigned job_counter;

/* mkdir BASE/leakproof-PID-N with a free N; the path in out. */
static int make_job_dir(char *out, size_t outsz, const char *base, struct strbuf *why,
                        const char *what)
{
	for (int tries = 0; tries < MAX_NAME_TRIES; tries++) {
		char name[64];
		snprintf(name, sizeof(name), "leakproof-%ld-%u", (long)getpid(), ++job_counter);
		if (!join_path(out, outsz, base, name)) {
			strbuf_addf(why, "%s: path too long below '%s'; ", what, base);
			return -1;
		}
		if (mkdir(out, 0755) == 0)
			return 0;
		if (errno != EEXIST) {
			strbuf_addf(why, "%s: cannot create '%s': %s; ", what, out, strerror(errno));
			return -1;
		}
	}
	strbuf_addf(why, "%s: no free name below '%s'; ", what, base);
	return -1;
}

static int create_v1(struct job_cgroup *out, const char *own, struct strbuf *why)
{
	char path[PATH_MAX];

	memset(out, 0, sizeof(*out));
	if (make_job_dir(out->dir, sizeof(out->dir), own, why, "v1") < 0)
		return -1;
	if (!join_path(path, sizeof(path), out->dir, "memory.usage_in_bytes") ||
	    access(path, R_OK) < 0) {
		strbuf_addf(why, "v1: '%s' has no memory.usage_in_bytes; ", out->dir);
		rmdir(out->dir);
		return -1;
	}
	out->version = 1;
	out->has_memory = true;
	return 0;
}

/*
 * The caller's move to a leaf sibling (v2), shared by every job of this
 * process that relies on it: undone when the last of them is removed.
 */
static struct {
	int jobs;                 /* live jobs with moved_self */
	pid_t pid;                /* the process moved */
	bool enabled_memory;      /* we wrote +memory to base's subtree_control */
	char base[PATH_MAX];      /* the cgroup the caller came from */
	char leaf[PATH_MAX];      /* base/leakproof-supervisor-PID */
} moved;

/* Move the calling process into DIR. */
static int move_self(const char *dir)
{
	return write_in_dir(dir, "cgroup.procs", "0");
}

/* Try to make memory available to the children of base, moving the
 * caller into a leaf sibling if processes in base prevent it. */
static bool enable_memory_v2(const char *base, const char *child, bool *did_move,
                             struct strbuf *why)
{
	*did_move = false;
	if (!controllers_have_memory(base)) {
		strbuf_addf(why, "v2: memory controller not delegated to '%s'; ", base);
		return false;
	}
	if (write_in_dir(base, "cgroup.subtree_control", "+memory") == 0) {
		if (controllers_have_memory(child))
			return true;
		strbuf_addf(why, "v2: memory enabled in '%s' but not in '%s'; ", base, child);
		return false;
	}
	if (errno != EBUSY) {
		strbuf_addf(why, "v2: cannot enable memory in '%s/cgroup.subtree_control': %s; ",
		            base, strerror(errno));
		return false;
	}

	/* "no internal processes": base holds processes, the caller among
	 * them. Move the caller alone into a leaf and retry. */
	char leaf[PATH_MAX], name[64];
	snprintf(name, sizeof(name), "leakproof-supervisor-%ld", (long)getpid());
	if (!join_path(leaf, sizeof(leaf), base, name))
		return false;
	if (mkdir(leaf, 0755) < 0 && errno != EEXIST) {
		strbuf_addf(why, "v2: cannot create '%s': %s; ", leaf, strerror(errno));
		return false;
	}
	if (move_self(leaf) < 0) {
		strbuf_addf(why, "v2: cannot move the supervisor to '%s': %s; ", leaf, strerror(errno));
		rmdir(leaf);
		return false;
	}
	if (write_in_dir(base, "cgroup.subtree_control", "+memory") == 0 &&
	    controllers_have_memory(child)) {
		*did_move = true;
		moved.jobs = 0;
		moved.pid = getpid();
		moved.enabled_memory = true;
		snprintf(moved.base, sizeof(moved.base), "%s", base);
		snprintf(moved.leaf, sizeof(moved.leaf), "%s", leaf);
		return true;
	}
	strbuf_addf(why, "v2: cannot enable memory in '%s': other processes live there "
	            "(no internal processes rule); ", base);
	if (move_self(base) < 0)
		warning("cannot move back to cgroup '%s': %s", base, strerror(errno));
	else
		rmdir(leaf);
	return false;
}

/* Whether own is the leaf this process moved itself to. */
static bool in_own_leaf(const char *own)
{
	return moved.pid && moved.pid == getpid() && !strcmp(own, moved.leaf);
}

static int create_v2(struct job_cgroup *out, const char *own, struct strbuf *why)
{
	bool reuse = in_own_leaf(own), did_move = false;
	const char *base = reuse ? moved.base : own;   /* never below our leaf */

	memset(out, 0, sizeof(*out));
	if (make_job_dir(out->dir, sizeof(out->dir), base, why, "v2") < 0)
		return -1;
	out->version = 2;
	if (controllers_have_memory(out->dir)) {
		out->has_memory = true;
	} else if (reuse) {
		/* memory was disabled meanwhile; we are out of base already */
		if (write_in_dir(base, "cgroup.subtree_control", "+memory") == 0 &&
		    controllers_have_memory(out->dir)) {
			out->has_memory = true;
			moved.enabled_memory = true;
		} else {
			strbuf_addf(why, "v2: cannot enable memory in '%s'; ", base);
		}
	} else {
		out->has_memory = enable_memory_v2(base, out->dir, &did_move, why);
	}
	if (out->has_memory && (reuse || did_move)) {
		out->moved_self = true;
		moved.jobs++;
	}
	return 0;
}

static void set_why(char *why, size_t whysz, struct strbuf *sb)
{
	if (!why || !whysz)
		return;
	size_t len = sb->len;
	while (len && (sb->buf[len - 1] == ' ' || sb->buf[len - 1] == ';'))
		len--;
	copy_span(why, whysz, strbuf_str(sb), len < whysz ? len : whysz - 1);
}

int cgroup_create_job(struct job_cgroup *out, char *why, size_t whysz)
{
	struct strbuf reasons = STRBUF_INIT;
	struct job_cgroup v2job;
	bool have_v2 = false, tried_v2 = false;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (why && whysz)
		why[0] = '\0';
	struct cg_paths *p = load_paths(&reasons);

	/* 1. v2 where memory can be had there (pure v2 systems) */
	if (p->v2_dir[0] && (controllers_have_memory(p->v2_dir) || in_own_leaf(p->v2_dir))) {
		tried_v2 = true;
		if (create_v2(&v2job, p->v2_dir, &reasons) == 0) {
			if (v2job.has_memory) {
				*out = v2job;
				ret = 0;
				goto done;
			}
			have_v2 = true;
		}
	}
	/* 2. v1 memory controller (v1 or hybrid systems) */
	if (p->v1_dir[0] && create_v1(out, p->v1_dir, &reasons) == 0) {
		if (have_v2)
			cgroup_remove(&v2job);
		strbuf_reset(&reasons);
		ret = 0;
		goto done;
	}
	/* 3. v2 without memory: still finds and kills every process */
	if (!tried_v2 && p->v2_dir[0] && create_v2(&v2job, p->v2_dir, &reasons) == 0)
		have_v2 = true;
	if (have_v2) {
		*out = v2job;
		ret = 0;
		goto done;
	}
	memset(out, 0, sizeof(*out));
	if (!reasons.len)
		strbuf_addstr(&reasons, "no cgroup found");
done:
	if (ret < 0 || !out->has_memory)
		set_why(why, whysz, &reasons);
	strbuf_release(&reasons);
	free(p);
	return ret;
}

/* ---- using it --------------------------------------------------------- */

int cgroup_enter(const struct job_cgroup *cg, pid_t pid)
{
	/* async-signal-safe: no stdio, no malloc */
	static const char procs[] = "/cgroup.procs";
	char path[sizeof(cg->dir) + sizeof(procs)];
	char num[24];
	size_t dlen = strnlen(cg->dir, sizeof(cg->dir));
	size_t nlen = 0;

	if (pid < 0 || dlen == 0 || dlen >= sizeof(cg->dir)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(path, cg->dir, dlen);
	memcpy(path + dlen, procs, sizeof(procs));
	char rev[24];
	unsigned long v = (unsigned long)pid;
	do {
		rev[nlen++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < nlen; i++)
		num[i] = rev[nlen - 1 - i];

	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = write(fd, num, nlen);
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	if (n != (ssize_t)nlen) {
		errno = n < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

int cgroup_usage(const struct job_cgroup *cg, uint64_t *bytes)
{
	const char *name = cg->version == 2 ? "memory.current" : "memory.usage_in_bytes";
	char buf[64];

	if (!cg->has_memory) {
		errno = ENOTSUP;
		return -1;
	}
	if (read_in_dir(cg->dir, name, buf, sizeof(buf)) < 0)
		return error_errno("cannot read '%s/%s'", cg->dir, name);
	const char *s = buf;
	if (parse_u64_digits(&s, bytes) < 0 || *skip_blanks(s))
		return error("cannot parse '%s/%s'", cg->dir, name);
	return 0;
}

int cgroup_nprocs(const struct job_cgroup *cg)
{
	int n = for_each_proc(cg->dir, NULL, NULL);
	if (n < 0)
		return error_errno("cannot read '%s/cgroup.procs'", cg->dir);
	return n;
}

/* The pids signalled so far, to count each process once. */
struct signal_ctx {
	int sig;
	pid_t self;
	pid_t except_pgid;        /* skip this process group (0: none) */
	pid_t *pids;
	size_t n, alloc;
	int listed;               /* pids seen in this round, self excluded */
};

static void signal_one(pid_t pid, void *vctx)
{
	struct signal_ctx *ctx = vctx;
	if (pid <= 0 || pid == ctx->self)
		return;   /* never kill(0, ...) nor the supervisor itself */
	if (ctx->except_pgid && getpgid(pid) == ctx->except_pgid)
		return;
	ctx->listed++;
	if (kill(pid, ctx->sig) < 0)
		return;
	for (size_t i = 0; i < ctx->n; i++)
		if (ctx->pids[i] == pid)
			return;
	if (ctx->n == ctx->alloc) {
		if (ctx->alloc >= PIDSET_CAP)
			return;
		ctx->alloc = ctx->alloc ? 2 * ctx->alloc : 64;
		ctx->pids = xrealloc(ctx->pids, ctx->alloc * sizeof(*ctx->pids));
	}
	ctx->pids[ctx->n++] = pid;
}

int cgroup_signal_all(const struct job_cgroup *cg, int sig, pid_t except_pgid)
{
	if (sig == SIGKILL && cg->version == 2) {
		int n = cgroup_nprocs(cg);
		if (n < 0)
			return -1;
		if (write_in_dir(cg->dir, "cgroup.kill", "1") == 0)
			return n;
		if (errno != ENOENT)
			return error_errno("cannot write '%s/cgroup.kill'", cg->dir);
		/* kernel before 5.14: signal the pids one by one */
	}

	struct signal_ctx ctx = { .sig = sig, .self = getpid(),
	                          .except_pgid = sig == SIGKILL ? 0 : except_pgid };
	int64_t deadline = mono_ns() + KILL_WAIT_NS;
	for (;;) {
		ctx.listed = 0;
		if (for_each_proc(cg->dir, signal_one, &ctx) < 0) {
			free(ctx.pids);
			return error_errno("cannot read '%s/cgroup.procs'", cg->dir);
		}
		/* SIGKILL: again until empty, for processes forked meanwhile */
		if (sig != SIGKILL || !ctx.listed)
			break;
		if (mono_ns() > deadline) {
			warning("%d processes of cgroup '%s' outlived SIGKILL", ctx.listed, cg->dir);
			break;
		}
		sleep_ns(RETRY_SLEEP_NS);
	}
	free(ctx.pids);
	return (int)ctx.n;
}

/* Count the child directories of dir other than skip. */
static int count_subdirs(const char *dir, const char *skip)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, skip))
			continue;
		char path[PATH_MAX];
		struct stat st;
		if (join_path(path, sizeof(path), dir, de->d_name) &&
		    stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			n++;
	}
	closedir(d);
	return n;
}

/*
 * The last job relying on the caller's move is gone: disable memory again
 * if we enabled it, move the caller back and remove its leaf. Where other
 * cgroups appeared beside ours (they may rely on memory being enabled) or
 * a step fails, the caller stays in its leaf, and later jobs reuse it.
 */
static void undo_move(void)
{
	const char *leafname = strrchr(moved.leaf, '/') + 1;

	if (moved.pid != getpid() || count_subdirs(moved.base, leafname) != 0)
		return;
	if (moved.enabled_memory) {
		if (write_in_dir(moved.base, "cgroup.subtree_control", "-memory") < 0) {
			warning("cannot disable memory in cgroup '%s': %s", moved.base,
			        strerror(errno));
			return;
		}
		moved.enabled_memory = false;
	}
	if (move_self(moved.base) < 0) {
		warning("cannot move back to cgroup '%s': %s", moved.base, strerror(errno));
		return;
	}
	moved.pid = 0;
	if (rmdir(moved.leaf) < 0)
		warning("cannot remove cgroup '%s': %s", moved.leaf, strerror(errno));
}

int cgroup_remove(const struct job_cgroup *cg)
{
	int64_t deadline = mono_ns() + REMOVE_WAIT_NS;

	while (rmdir(cg->dir) < 0 && errno != ENOENT) {
		if (errno != EBUSY || mono_ns() > deadline) {
			if (errno == EBUSY) {
				int n = for_each_proc(cg->dir, NULL, NULL);
				return error("cannot remove cgroup '%s': %d processes still in it",
				             cg->dir, n);
			}
			return error_errno("cannot remove cgroup '%s'", cg->dir);
		}
		sleep_ns(RETRY_SLEEP_NS);
	}
	if (cg->moved_self && moved.jobs > 0 && --moved.jobs == 0)
		undo_move();
	return 0;
}

/* Is name "leakproof-PID-N" (N digits) or "leakproof-supervisor-PID"? */
static bool left_by(const char *name, pid_t pid)
{
	char job[64], leaf[64];
	int jn = snprintf(job, sizeof(job), "leakproof-%ld-", (long)pid);
	snprintf(leaf, sizeof(leaf), "leakproof-supervisor-%ld", (long)pid);
	if (!strcmp(name, leaf))
		return true;
	const char *n = name + jn;
	return !strncmp(name, job, (size_t)jn) && *n && strspn(n, "0123456789") == strlen(n);
}

/* Whether some process in dir started before ticks. */
struct older_ctx { uint64_t before; bool found; };

static void note_older(pid_t pid, void *arg)
{
	struct older_ctx *c = arg;
	struct proc_stat ps;
	if (!c->found && read_proc_stat(NULL, pid, &ps) == 0 && ps.starttime_ticks < c->before)
		c->found = true;
}

/*
 * Whether cg, named after a supervisor that is gone, is that supervisor's,
 * when its pid is held now by a process started at holder_start (0: no
 * process has it). A supervisor puts in its cgroups only itself and
 * processes started after it, so a cgroup holding a process older than the
 * holder is not the holder's; an empty one may be (it is being set up) if
 * the holder is a leakproof.
 */
static bool left_by_gone(const char *dir, pid_t pid, uint64_t holder_start)
{
	if (!holder_start)
		return true;
	struct older_ctx c = { holder_start, false };
	int n = for_each_proc(dir, note_older, &c);
	if (n < 0)
		return false;
	if (n > 0)
		return c.found;
	char comm[64] = "", path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	ssize_t len = read_file_buf(path, comm, sizeof(comm));
	return len > 0 && strncmp(comm, "leakproof", 9) != 0;
}

/* SIGKILL what is in cg, remove it; how many were killed. A cgroup that
 * is still there after that adds one to *left. */
static int reap(const struct job_cgroup *cg, int *left)
{
	int n = cgroup_signal_all(cg, SIGKILL, 0);
	if (cgroup_remove(cg) < 0)
		++*left;
	return n > 0 ? n : 0;
}

int cgroup_reap_left(pid_t pid, uint64_t start_ticks, const char *recorded, int *left)
{
	struct proc_stat holder;
	uint64_t holder_start = 0;
	*left = 0;
	if (pid <= 0)
		return 0;
	if (read_proc_stat(NULL, pid, &holder) == 0 && holder.state != 'Z' && holder.state != 'X') {
		if (!start_ticks || holder.starttime_ticks == start_ticks)
			return 0;   /* alive, or nothing to tell it from another */
		holder_start = holder.starttime_ticks;
	} else if (errno != ENOENT && errno != ESRCH && kill(pid, 0) == 0) {
		return 0;
	}
	struct strbuf why = STRBUF_INIT;
	struct cg_paths *p = load_paths(&why);
	strbuf_release(&why);
	const char *bases[2] = { p->v2_dir, p->v1_dir };
	int killed = 0;
	for (int i = 0; i < 2; i++) {
		DIR *d = bases[i][0] ? opendir(bases[i]) : NULL;
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			struct job_cgroup cg = { .version = i == 0 ? 2 : 1 };
			if (!left_by(e->d_name, pid) || !join_path(cg.dir, sizeof(cg.dir), bases[i], e->d_name))
				continue;
			if (left_by_gone(cg.dir, pid, holder_start))
				killed += reap(&cg, left);
			else
				++*left;
		}
		closedir(d);
	}
	free(p);
	/* Where the run said its job's cgroup was (it may have started from
	 * another cgroup than the caller's): only a directory of a cgroup file
	 * system that this supervisor would have named, as a store's word is
	 * not enough to kill what runs somewhere. */
	struct statfs fs;
	const char *base = recorded ? strrchr(recorded, '/') : NULL;
	struct job_cgroup cg = { 0 };
	if (base && left_by(base + 1, pid) && statfs(recorded, &fs) == 0 &&
	    (fs.f_type == CGROUP2_SUPER_MAGIC || fs.f_type == CGROUP_SUPER_MAGIC) &&
	    snprintf(cg.dir, sizeof(cg.dir), "%s", recorded) < (int)sizeof(cg.dir)) {
		cg.version = fs.f_type == CGROUP2_SUPER_MAGIC ? 2 : 1;
		if (left_by_gone(cg.dir, pid, holder_start))
			killed += reap(&cg, left);
		else
			++*left;
	}
	return killed;
}

/* bytes into cg's file name, none for 0 (no limit: v1's "-1", v2's "max");
 * -1 after a message. */
static int set_bytes(const struct job_cgroup *cg, const char *name, uint64_t bytes, const char *none)
{
	char val[32];

	if (bytes)
		snprintf(val, sizeof(val), "%llu", (unsigned long long)bytes);
	else
		snprintf(val, sizeof(val), "%s", none);
	if (write_in_dir(cg->dir, name, val) < 0)
		return error_errno("cannot set '%s/%s' to %s", cg->dir, name, val);
	return 0;
}

int cgroup_set_limit(const struct job_cgroup *cg, uint64_t max_bytes, uint64_t high_bytes)
{
	if (!cg->has_memory)
		return error("cgroup '%s' has no memory controller: cannot set a limit", cg->dir);
	if (cg->version == 1)
		return set_bytes(cg, "memory.limit_in_bytes", max_bytes, "-1");
	if (high_bytes && set_bytes(cg, "memory.high", high_bytes, "max") < 0)
		return -1;
	return set_bytes(cg, "memory.max", max_bytes, "max");
}

int cgroup_read_events(const struct job_cgroup *cg, struct cgroup_events *out)
{
	char buf[SMALL_FILE_CAP];
	const char *name = cg->version == 2 ? "memory.events" : "memory.oom_control";

	memset(out, 0, sizeof(*out));
	if (!cg->has_memory) {
		errno = ENOTSUP;
		return -1;
	}
	if (read_in_dir(cg->dir, name, buf, sizeof(buf)) < 0)
		return error_errno("cannot read '%s/%s'", cg->dir, name);
	int r = cg->version == 2 ? parse_memory_events(buf, out) : parse_oom_control(buf, out);
	if (r < 0)
		return error("cannot parse '%s/%s'", cg->dir, name);
	if (cg->version == 1) {
		uint64_t failcnt;
		const char *s = buf;
		if (read_in_dir(cg->dir, "memory.failcnt", buf, sizeof(buf)) < 0)
			return error_errno("cannot read '%s/memory.failcnt'", cg->dir);
		if (parse_u64_digits(&s, &failcnt) < 0 || *skip_blanks(s))
			return error("cannot parse '%s/memory.failcnt'", cg->dir);
		out->max = failcnt;
	}
	return 0;
}

/* The OOM kills of path's v1 memory cgroup and those below it. */
static uint64_t v1_tree_oom_kills(char *path, size_t cap, int depth)
{
	char buf[SMALL_FILE_CAP];
	struct cgroup_events ev;
	uint64_t n = read_in_dir(path, "memory.oom_control", buf, sizeof(buf)) >= 0 &&
	             parse_oom_control(buf, &ev) == 0 ? ev.oom_kill : 0;
	DIR *d = depth > 0 ? opendir(path) : NULL;
	struct dirent *e;
	size_t len = strlen(path);
	while (d && (e = readdir(d))) {
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    len + 1 + strlen(e->d_name) + 1 > cap)
			continue;
		path[len] = '/';
		strcpy(path + len + 1, e->d_name);
		n += v1_tree_oom_kills(path, cap, depth - 1);
		path[len] = '\0';
	}
	if (d)
		closedir(d);
	return n;
}

uint64_t cgroup_tree_oom_kills(const struct job_cgroup *cg)
{
	char buf[SMALL_FILE_CAP], path[PATH_MAX];
	struct cgroup_events ev;
	if (!cg->has_memory || strlen(cg->dir) >= sizeof(path))
		return 0;
	if (cg->version == 2)   /* memory.events counts the cgroups below too */
		return read_in_dir(cg->dir, "memory.events", buf, sizeof(buf)) >= 0 &&
		       parse_memory_events(buf, &ev) == 0 ? ev.oom_kill : 0;
	strcpy(path, cg->dir);
	return v1_tree_oom_kills(path, sizeof(path), CGROUP_TREE_DEPTH);
}

/* ---- a process leakproof did not start -------------------------------- */

int cgroup_of_process(pid_t pid, struct job_cgroup *out, char *why, size_t whysz)
{
	struct strbuf sb = STRBUF_INIT;
	char who[32];
	snprintf(who, sizeof(who), "%d", (int)pid);
	memset(out, 0, sizeof(*out));
	struct cg_paths *p = load_paths_of(who, &sb);
	int rc = -1;
	/* the v1 memory controller where it is mounted (its usage and
	 * events are what a memory cgroup is for), else v2 */
	if (p->v1_dir[0] && strcmp(p->v1_path, "/")) {
		out->version = 1;
		snprintf(out->dir, sizeof(out->dir), "%s", p->v1_dir);
		out->has_memory = true;
		rc = 0;
	} else if (p->v2_dir[0] && strcmp(p->v2_path, "/")) {
		char probe[PATH_MAX];
		out->version = 2;
		snprintf(out->dir, sizeof(out->dir), "%s", p->v2_dir);
		out->has_memory = join_path(probe, sizeof(probe), out->dir, "memory.current") && access(probe, R_OK) == 0;
		rc = 0;
	} else if (!sb.len) {
		strbuf_addstr(&sb, "it is in the root cgroup");
	}
	if (rc < 0)
		set_why(why, whysz, &sb);
	else if (why && whysz)
		why[0] = '\0';
	strbuf_release(&sb);
	free(p);
	return rc;
}

int cgroup_each_proc(const struct job_cgroup *cg, void (*fn)(pid_t pid, void *ctx), void *ctx)
{
	return for_each_proc(cg->dir, fn, ctx);
}

static int tree_each_proc(char *path, size_t cap, int depth, void (*fn)(pid_t, void *), void *ctx)
{
	int n = for_each_proc(path, fn, ctx);
	if (n < 0 && depth == CGROUP_TREE_DEPTH)
		return -1;   /* below the top: a cgroup removed meanwhile */
	n = n < 0 ? 0 : n;
	DIR *d = depth > 0 ? opendir(path) : NULL;
	struct dirent *e;
	size_t len = strlen(path);
	while (d && (e = readdir(d))) {
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (len + 1 + strlen(e->d_name) + 1 > cap)
			continue;
		path[len] = '/';
		strcpy(path + len + 1, e->d_name);
		n += tree_each_proc(path, cap, depth - 1, fn, ctx);
		path[len] = '\0';
	}
	if (d)
		closedir(d);
	return n;
}

int cgroup_tree_each_proc(const char *dir, void (*fn)(pid_t pid, void *ctx), void *ctx)
{
	char path[PATH_MAX];
	if (strlen(dir) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(path, dir);
	return tree_each_proc(path, sizeof(path), CGROUP_TREE_DEPTH, fn, ctx);
}

/* ---- the caller's own limit ------------------------------------------ */

/* The smallest limit in file NAME from dir (below or at mount) up to and
 * including mount; 0 when none. */
static uint64_t smallest_limit_up(const char *dir, const char *mount, const char *name)
{
	char path[PATH_MAX], buf[64];
	uint64_t best = 0;
	size_t mlen = strlen(mount);

	snprintf(path, sizeof(path), "%s", dir);
	for (;;) {
		uint64_t v;
		if (read_in_dir(path, name, buf, sizeof(buf)) >= 0 &&
		    parse_limit_value(buf, &v) == 0 && v && (!best || v < best))
			best = v;
		if (strlen(path) <= mlen)
			break;
		char *slash = strrchr(path, '/');
		if (!slash)
			break;
		if ((size_t)(slash - path) < mlen)
			snprintf(path, sizeof(path), "%s", mount);
		else
			*slash = '\0';
	}
	return best;
}

uint64_t cgroup_limit_of(const struct job_cgroup *cg)
{
	char buf[64];
	uint64_t v;
	if (read_in_dir(cg->dir, cg->version == 2 ? "memory.max" : "memory.limit_in_bytes", buf, sizeof(buf)) < 0 ||
	    parse_limit_value(buf, &v) < 0)
		return 0;
	return v;
}

static uint64_t min_limit(uint64_t a, uint64_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

uint64_t cgroup_self_limit(void)
{
	struct strbuf why = STRBUF_INIT;
	struct cg_paths *p = load_paths(&why);
	uint64_t best = 0;

	if (p->v1_dir[0]) {
		char buf[SMALL_FILE_CAP * 4];
		best = smallest_limit_up(p->v1_dir, p->v1_mount, "memory.limit_in_bytes");
		/* v1 knows the limit in force, ancestors outside the mount too */
		if (read_in_dir(p->v1_dir, "memory.stat", buf, sizeof(buf)) >= 0) {
			struct find_key_ctx ctx = { "hierarchical_memory_limit", 0, false };
			for_each_keyed_line(buf, find_key_line, &ctx);
			if (ctx.found && ctx.val < UNLIMITED_FROM)
				best = min_limit(best, ctx.val);
		}
	}
	if (p->v2_dir[0])
		best = min_limit(best, smallest_limit_up(p->v2_dir, p->v2_mount, "memory.max"));
	strbuf_release(&why);
	free(p);
	return best;
}

int cgroup_read_memstat(const char *dir, struct cgroup_memstat *out)
{
	char buf[SMALL_FILE_CAP * 4];
	if (read_in_dir(dir, "memory.stat", buf, sizeof(buf)) < 0)
		return -1;
	return parse_memory_stat(buf, out);
}

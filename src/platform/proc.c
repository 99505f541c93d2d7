/*
 * proc.c — parsers and readers for /proc (see proc.h). The parsers are pure
 * and accept only what the kernel writes: every number is checked for its
 * digits and for overflow, and a text that stops short is refused rather
 * than read as smaller values. Sizes in bytes ("kB" in the files is KiB).
 */
#include "platform/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* ---- small scanners --------------------------------------------------- */

/* Decimal digits at p into *out. Returns the first byte after them, or NULL
 * when there is no digit or the value overflows. */
static const char *scan_u64(const char *p, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = p;
	while (*p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
		p++;
	}
	if (p == start)
		return NULL;
	*out = v;
	return p;
}

/* A PID-sized value (0 .. INT_MAX). */
static const char *scan_pid(const char *p, pid_t *out)
{
	uint64_t v;
	p = scan_u64(p, &v);
	if (!p || v > INT_MAX)
		return NULL;
	*out = (pid_t)v;
	return p;
}

/* One stat field that we skip: an optionally negative integer. */
static const char *skip_int(const char *p)
{
	uint64_t v;
	if (*p == '-')
		p++;
	return scan_u64(p, &v);
}

static int einval(void)
{
	errno = EINVAL;
	return -1;
}

/* ---- stat ------------------------------------------------------------ */

/*
 * "PID (COMM) S PPID PGRP SESSION TTY TPGID FLAGS MINFLT CMINFLT MAJFLT
 * CMAJFLT UTIME STIME CUTIME CSTIME PRIO NICE THREADS ITREAL START VSIZE
 * RSS ...": fields numbered from 1 as in proc(5); we need up to 24 (rss).
 */
int parse_proc_stat_buf(const char *buf, struct proc_stat *out)
{
	memset(out, 0, sizeof(*out));
	const char *p = scan_pid(buf, &out->pid);
	if (!p || out->pid <= 0 || p[0] != ' ' || p[1] != '(')
		return einval();
	const char *name = p + 2;
	const char *close = strrchr(name, ')');
	if (!close)
		return einval();
	size_t len = (size_t)(close - name);
	if (len >= sizeof(out->comm))
		len = sizeof(out->comm) - 1;
	memcpy(out->comm, name, len);
	out->comm[len] = '\0';

	p = close + 1;
	bool letter = (p[1] >= 'A' && p[1] <= 'Z') || (p[1] >= 'a' && p[1] <= 'z');
	if (p[0] != ' ' || !letter)
		return einval();
	out->state = p[1];
	p += 2;
	for (int field = 4; field <= 24; field++) {
		if (*p != ' ')
			return einval();
		p++;
		uint64_t v = 0;
		switch (field) {
		case 4: p = scan_pid(p, &out->ppid); break;
		case 5: p = scan_pid(p, &out->pgrp); break;
		case 9: p = scan_u64(p, &v); out->flags = (unsigned)v; break;
		case 10: p = scan_u64(p, &out->minflt); break;
		case 12: p = scan_u64(p, &out->majflt); break;
		case 14: p = scan_u64(p, &out->utime_ticks); break;
		case 15: p = scan_u64(p, &out->stime_ticks); break;
		case 22: p = scan_u64(p, &out->starttime_ticks); break;
		case 24: p = scan_u64(p, &v); out->rss_pages = v; break;
		default: p = skip_int(p); break;
		}
		if (!p)
			return einval();
	}
	/* The line goes on (52 fields today); a read cut inside rss would end here. */
	if (*p != ' ' && *p != '\n')
		return einval();
	return 0;
}

/* ---- statm ------------------------------------------------------------ */

int parse_proc_statm_buf(const char *buf, struct proc_statm *out)
{
	uint64_t v[3];
	const char *p = buf;
	for (int i = 0; i < 3; i++) {
		if (i) {
			if (*p != ' ')
				return einval();
			p++;
		}
		p = scan_u64(p, &v[i]);
		if (!p)
			return einval();
	}
	if (*p != ' ' && *p != '\n')
		return einval();
	out->size_pages = v[0];
	out->resident_pages = v[1];
	out->shared_pages = v[2];
	return 0;
}

/* ---- "Key:   N kB" lines (smaps, meminfo) ---------------------------- */

/*
 * Splits a line into its key and value. Returns 1 with the key (not
 * NUL-terminated: *key, *keylen) and the value in bytes, 0 for a line that is
 * not "Key: value" at all (an smaps mapping header, a blank line), -1 for a
 * "Key:" whose value is not "N kB" (*key still set, so the caller can decide
 * whether it cared about that key).
 */
static int scan_kb_line(const char *line, size_t len, const char **key, size_t *keylen, uint64_t *bytes)
{
	const char *end = line + len, *p = line;
	while (p < end && (*p == '_' || *p == '(' || *p == ')' ||
	                   (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
		p++;
	if (p == line || p == end || *p != ':')
		return 0;
	*key = line;
	*keylen = (size_t)(p - line);
	p++;
	while (p < end && *p == ' ')
		p++;
	uint64_t kib = 0;
	const char *q = p;
	while (q < end && *q >= '0' && *q <= '9') {
		unsigned d = (unsigned)(*q - '0');
		if (kib > (UINT64_MAX - d) / 10)
			return -1;
		kib = kib * 10 + d;
		q++;
	}
	if (q == p || end - q != 3 || memcmp(q, " kB", 3))
		return -1;
	if (kib > UINT64_MAX / 1024)
		return -1;
	*bytes = kib * 1024;
	return 1;
}

static bool key_is(const char *key, size_t keylen, const char *want)
{
	return strlen(want) == keylen && !memcmp(key, want, keylen);
}

/* A "Key: N kB" line whose key is one of keys[0..nkeys): the key's index,
 * its value in *bytes and *ok true, or *ok false when the value is not
 * "N kB". -1 for another key, or a line that is not "Key: value" at all. */
static int known_kb_line(const char *line, size_t len, const char *const *keys, size_t nkeys, uint64_t *bytes,
                         bool *ok)
{
	const char *key;
	size_t keylen;
	int r = scan_kb_line(line, len, &key, &keylen, bytes);
	if (r == 0)
		return -1;
	for (size_t i = 0; i < nkeys; i++) {
		if (key_is(key, keylen, keys[i])) {
			*ok = r > 0;
			return (int)i;
		}
	}
	return -1;
}

/* Next line of a NUL-terminated text: [*line, *line + *len), without the
 * newline. Returns false at the end. *at moves past the newline. */
static bool next_line(const char **at, const char **line, size_t *len)
{
	const char *p = *at;
	if (!*p)
		return false;
	const char *nl = strchr(p, '\n');
	*line = p;
	*len = nl ? (size_t)(nl - p) : strlen(p);
	*at = nl ? nl + 1 : p + *len;
	return true;
}

/* ---- smaps / smaps_rollup -------------------------------------------- */

enum {
	SM_RSS, SM_PSS, SM_PSS_ANON, SM_PSS_FILE, SM_PSS_SHMEM, SM_SHARED_CLEAN, SM_SHARED_DIRTY,
	SM_PRIVATE_CLEAN, SM_PRIVATE_DIRTY, SM_SWAP, SM_SWAP_PSS, SM_ANONYMOUS, SM_COUNT
};
static const char *const smaps_keys[SM_COUNT] = {
	"Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Shared_Clean", "Shared_Dirty",
	"Private_Clean", "Private_Dirty", "Swap", "SwapPss", "Anonymous",
};

static uint64_t *smaps_field(struct proc_smaps *sm, int which)
{
	switch (which) {
	case SM_RSS: return &sm->rss_bytes;
	case SM_PSS: return &sm->pss_bytes;
	case SM_PSS_ANON: return &sm->pss_anon_bytes;
	case SM_PSS_FILE: return &sm->pss_file_bytes;
	case SM_PSS_SHMEM: return &sm->pss_shmem_bytes;
	case SM_SHARED_CLEAN: return &sm->shared_clean_bytes;
	case SM_SHARED_DIRTY: return &sm->shared_dirty_bytes;
	case SM_PRIVATE_CLEAN: return &sm->private_clean_bytes;
	case SM_PRIVATE_DIRTY: return &sm->private_dirty_bytes;
	case SM_SWAP: return &sm->swap_bytes;
	case SM_ANONYMOUS: return &sm->anonymous_bytes;
	default: return &sm->swap_pss_bytes;
	}
}

uint64_t proc_smaps_uss(const struct proc_smaps *sm)
{
	return sm->private_clean_bytes + sm->private_dirty_bytes;
}

void smaps_parser_begin(struct smaps_parser *p)
{
	memset(p, 0, sizeof(*p));
}

void smaps_parser_line(struct smaps_parser *p, const char *line, size_t len)
{
	uint64_t bytes = 0;
	bool ok;
	int i = known_kb_line(line, len, smaps_keys, SM_COUNT, &bytes, &ok);
	if (i < 0)
		return;     /* unknown keys (VmFlags, THPeligible, Pss_Dirty, ...) are not ours to judge */
	uint64_t *f = smaps_field(&p->sum, i);
	if (!ok || *f > UINT64_MAX - bytes)
		p->bad = true;
	else
		*f += bytes;
	p->seen |= 1u << i;
}

int smaps_parser_end(const struct smaps_parser *p, struct proc_smaps *out)
{
	unsigned need = (1u << SM_RSS) | (1u << SM_PSS);
	unsigned split = (1u << SM_PSS_ANON) | (1u << SM_PSS_FILE) | (1u << SM_PSS_SHMEM);
	if (p->bad || (p->seen & need) != need)
		return einval();
	*out = p->sum;
	out->has_pss_split = (p->seen & split) == split;
	return 0;
}

int parse_smaps_rollup_buf(const char *buf, struct proc_smaps *out)
{
	size_t n = strlen(buf);
	if (!n || buf[n - 1] != '\n')
		return einval();
	struct smaps_parser p;
	smaps_parser_begin(&p);
	const char *at = buf, *line;
	size_t len;
	while (next_line(&at, &line, &len))
		smaps_parser_line(&p, line, len);
	return smaps_parser_end(&p, out);
}

/* ---- meminfo ----------------------------------------------------------- */

int parse_meminfo_buf(const char *buf, struct meminfo *out)
{
	static const char *const keys[] = { "MemTotal", "MemFree", "MemAvailable", "Buffers",
	                                    "Cached", "SwapTotal", "SwapFree" };
	uint64_t *fields[] = { &out->mem_total_bytes, &out->mem_free_bytes, &out->mem_available_bytes,
	                       &out->buffers_bytes, &out->cached_bytes, &out->swap_total_bytes,
	                       &out->swap_free_bytes };
	unsigned seen = 0;
	memset(out, 0, sizeof(*out));
	const char *at = buf, *line;
	size_t len;
	while (next_line(&at, &line, &len)) {
		uint64_t bytes = 0;
		bool ok;
		int i = known_kb_line(line, len, keys, sizeof(keys) / sizeof(keys[0]), &bytes, &ok);
		if (i < 0)
			continue;
		if (!ok)
			return einval();
		*fields[i] = bytes;
		seen |= 1u << i;
	}
	if (!(seen & 1u))
		return einval();
	if (!(seen & (1u << 2))) {
		uint64_t est = out->mem_free_bytes;
		est = est > UINT64_MAX - out->buffers_bytes ? UINT64_MAX : est + out->buffers_bytes;
		est = est > UINT64_MAX - out->cached_bytes ? UINT64_MAX : est + out->cached_bytes;
		out->mem_available_bytes = est;
		out->available_estimated = true;
	}
	return 0;
}

/* ---- loadavg -------------------------------------------------------------- */

int parse_loadavg_last_pid(const char *buf, pid_t *out)
{
	size_t n = strlen(buf);
	if (!n || buf[n - 1] != '\n')
		return einval();
	const char *sp = memrchr(buf, ' ', n);
	if (!sp || !strchr(buf, '/') || strchr(buf, '/') > sp)
		return einval();
	pid_t pid;
	const char *end = scan_pid(sp + 1, &pid);
	if (!end || *end != '\n')
		return einval();
	*out = pid;
	return 0;
}

/* ---- PID lists --------------------------------------------------------- */

ssize_t parse_pid_list_buf(const char *buf, pid_t *out, size_t max)
{
	size_t n = 0;
	const char *at = buf, *line;
	size_t len;
	while (next_line(&at, &line, &len)) {
		if (!len)
			continue;
		pid_t pid;
		const char *end = scan_pid(line, &pid);
		if (!end || end != line + len || n == (size_t)SSIZE_MAX)
			return einval();
		if (pid == 0)
			continue;
		if (n < max)
			out[n] = pid;
		n++;
	}
	return (ssize_t)n;
}

/* ---- readers ------------------------------------------------------------ */

static int proc_path(char *path, size_t sz, const char *root, pid_t pid, const char *name)
{
	int n = pid > 0 ? snprintf(path, sz, "%s/%d/%s", root ? root : PROC_ROOT_DEFAULT, (int)pid, name)
	                : snprintf(path, sz, "%s/%s", root ? root : PROC_ROOT_DEFAULT, name);
	if (n < 0 || (size_t)n >= sz) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* Reads a small proc file whole; a file that fills buf is refused (EINVAL)
 * rather than parsed cut. */
static int read_small(const char *root, pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[4096];
	if (proc_path(path, sizeof(path), root, pid, name) < 0)
		return -1;
	ssize_t n = read_file_buf(path, buf, cap);
	if (n < 0)
		return -1;
	if ((size_t)n + 1 >= cap)
		return einval();
	return 0;
}

int read_proc_stat(const char *root, pid_t pid, struct proc_stat *out)
{
	char buf[4096];
	if (read_small(root, pid, "stat", buf, sizeof(buf)) < 0)
		return -1;
	return parse_proc_stat_buf(buf, out);
}

int read_proc_statm(const char *root, pid_t pid, struct proc_statm *out)
{
	char buf[512];
	if (read_small(root, pid, "statm", buf, sizeof(buf)) < 0)
		return -1;
	return parse_proc_statm_buf(buf, out);
}

int pread_proc_statm(int fd, struct proc_statm *out)
{
	char buf[512];
	ssize_t n = pread_buf(fd, buf, sizeof(buf));
	if (n < 0)
		return -1;
	if (n == 0) {               /* nothing at all: not a statm */
		errno = EINVAL;
		return -1;
	}
	return parse_proc_statm_buf(buf, out);
}

int pread_proc_stat(int fd, struct proc_stat *out)
{
	char buf[2048];             /* a stat line: ~300 bytes, 52 fields of at most 20 digits */
	ssize_t n = pread_buf(fd, buf, sizeof(buf));
	if (n < 0)
		return -1;
	if (n == 0 || (size_t)n + 1 >= sizeof(buf))
		return einval();        /* nothing, or cut */
	return parse_proc_stat_buf(buf, out);
}

int proc_maps_readable(const char *root, pid_t pid, char *path, size_t pathsz)
{
	if (proc_path(path, pathsz, root, pid, "smaps_rollup") < 0)
		return errno;
	char c;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &c, 1) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return e;
	}
	close(fd);
	return 0;
}

bool proc_environ_has(const char *root, pid_t pid, const char *entry)
{
	char path[4096], buf[4096];
	if (proc_path(path, sizeof(path), root, pid, "environ") < 0)
		return false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	/* entries end in NUL; at: how much of entry the current one matches
	 * so far, len + 1 once it cannot */
	size_t len = strlen(entry), at = 0;
	bool found = false;
	ssize_t n;
	while (!found && ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)))
		for (ssize_t i = 0; i < n && !found; i++) {
			if (!buf[i]) {
				found = at == len;
				at = 0;
			} else {
				at = at < len && buf[i] == entry[at] ? at + 1 : len + 1;
			}
		}
	close(fd);
	return found;
}

int proc_self_pidns(uint64_t *ino)
{
	struct stat st;
	if (stat(PROC_ROOT_DEFAULT "/self/ns/pid", &st) < 0)
		return -1;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

int read_boot_id(char *buf, size_t cap)
{
	char raw[64];
	if (read_small(NULL, 0, "sys/kernel/random/boot_id", raw, sizeof(raw)) < 0)
		return -1;
	size_t n = strcspn(raw, "\n");
	if (n == 0 || n >= cap)
		return einval();
	memcpy(buf, raw, n);
	buf[n] = '\0';
	return 0;
}

int read_boot_time(int64_t *btime)
{
	/* /proc/stat's intr line alone can pass 64 KiB: read it line by line */
	FILE *f = fopen(PROC_ROOT_DEFAULT "/stat", "re");
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	long long v = 0;
	while (getline(&line, &cap, f) > 0)
		if (sscanf(line, "btime %lld", &v) == 1)
			break;
	free(line);
	fclose(f);
	if (v <= 0)
		return einval();
	*btime = v;
	return 0;
}

int read_meminfo(const char *root, struct meminfo *out)
{
	char buf[16384];
	if (read_small(root, 0, "meminfo", buf, sizeof(buf)) < 0)
		return -1;
	return parse_meminfo_buf(buf, out);
}

/* Streams an smaps file line by line through a fixed buffer. Lines longer
 * than the buffer are mapping headers with long paths: skipped. */
static int parse_smaps_fd(int fd, struct proc_smaps *out)
{
	char buf[8192];
	size_t have = 0;
	bool skipping = false, any = false, ended_nl = false;
	struct smaps_parser p;
	smaps_parser_begin(&p);
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		any = true;
		ended_nl = buf[have + (size_t)n - 1] == '\n';
		have += (size_t)n;
		size_t start = 0;
		for (;;) {
			char *nl = memchr(buf + start, '\n', have - start);
			if (!nl)
				break;
			size_t len = (size_t)(nl - (buf + start));
			if (!skipping)
				smaps_parser_line(&p, buf + start, len);
			skipping = false;
			start += len + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have == sizeof(buf)) {  /* one line fills the buffer */
			skipping = true;
			have = 0;
		}
	}
	if (!any || !ended_nl)
		return einval();
	return smaps_parser_end(&p, out);
}

int read_proc_smaps(const char *root, pid_t pid, struct proc_smaps *out)
{
	char path[4096];
	if (proc_path(path, sizeof(path), root, pid, "smaps_rollup") < 0)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		/* No smaps_rollup before Linux 4.14, or the process is gone. */
		if (proc_path(path, sizeof(path), root, pid, "smaps") < 0)
			return -1;
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return -1;
	int r = parse_smaps_fd(fd, out);
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/* ---- walking /proc ------------------------------------------------------ */

DIR *proc_opendir(const char *root)
{
	return opendir(root ? root : PROC_ROOT_DEFAULT);
}

int proc_readdir(DIR *dir, pid_t *pid, uint64_t *ino)
{
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(dir);
		if (!de)
			return errno ? -1 : 0;
		const char *end = scan_pid(de->d_name, pid);
		if (!end || *end || *pid <= 0)
			continue;
		*ino = (uint64_t)de->d_ino;
		return 1;
	}
}

ssize_t proc_scan(const char *root, struct proc_list *list)
{
	DIR *dir = proc_opendir(root);
	if (!dir)
		return -1;
	list->n = 0;
	pid_t pid;
	uint64_t ino;
	int r;
	while ((r = proc_readdir(dir, &pid, &ino)) > 0) {
		struct proc_stat st;
		if (read_proc_stat(root, pid, &st) < 0)
			continue;           /* gone since the listing, or not a process */
		if (list->n == list->alloc) {
			if (list->alloc >= PROC_LIST_MAX)
				break;
			list->alloc = list->alloc ? list->alloc * 2 : 256;
			list->v = xrealloc(list->v, list->alloc * sizeof(*list->v));
		}
		list->v[list->n].pid = st.pid;
		list->v[list->n].ppid = st.ppid;
		list->n++;
	}
	int e = errno;
	closedir(dir);
	if (r < 0) {
		errno = e;
		return -1;
	}
	return (ssize_t)list->n;
}

void proc_list_release(struct proc_list *list)
{
	free(list->v);
	list->v = NULL;
	list->n = list->alloc = 0;
}

bool proc_list_descends(const struct proc_list *list, pid_t pid, pid_t ancestor)
{
	for (size_t hops = 0; hops < PROC_LIST_MAX; hops++) {
		const struct proc_entry *e = NULL;
		for (size_t i = 0; i < list->n; i++)
			if (list->v[i].pid == pid) {
				e = &list->v[i];
				break;
			}
		if (!e || e->ppid <= 0)
			return false;
		if (e->ppid == ancestor)
			return true;
		pid = e->ppid;
	}
	return false;
}

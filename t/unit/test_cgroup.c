/*
 * test_cgroup.c — the cgroup module: parsers on v1 and v2 text (hostile
 * input included), reads on the fixture trees of t/fixtures/cgroup, the
 * fallbacks of cgroup_create_job, and real jobs on this machine's cgroups
 * (v1 or v2 memory, and the cgroup2 hierarchy even without memory). A real
 * test that cannot run here prints "# skip: REASON" and counts as passed.
 */
#include "platform/cgroup.h"
#include "util/util.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024ULL * 1024)
#define REAL_TEST_TIMEOUT_S 60

/* ---- helpers ----------------------------------------------------------- */

/* snprintf that stops the tests where a path does not fit. */
static void fmt(char *buf, size_t sz, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t sz, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(buf, sz, f, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sz) {
		fprintf(stderr, "  path too long: %s\n", buf);
		exit(1);
	}
}

/* The absolute path of t/fixtures/cgroup (tests run from the top of the
 * tree; else it is found beside this file). */
static const char *fixture_dir(void)
{
	static char dir[PATH_MAX];
	char guess[PATH_MAX];

	if (dir[0])
		return dir;
	if (realpath("t/fixtures/cgroup", dir))
		return dir;
	fmt(guess, sizeof(guess), "%s", __FILE__);
	char *slash = strrchr(guess, '/');
	if (slash) {
		fmt(slash, sizeof(guess) - (size_t)(slash - guess), "/../fixtures/cgroup");
		if (realpath(guess, dir))
			return dir;
	}
	dir[0] = '\0';
	fprintf(stderr, "  cannot find t/fixtures/cgroup\n");
	return dir;
}

/* Contents of a fixture file; the caller frees it. "" when missing (a
 * failed CHECK tells). */
static char *fixture_text(const char *name)
{
	char path[PATH_MAX];
	char *buf = xmalloc(64 * 1024);
	fmt(path, sizeof(path), "%s/%s", fixture_dir(), name);
	if (read_file_buf(path, buf, 64 * 1024) < 0) {
		fprintf(stderr, "  cannot read fixture '%s'\n", path);
		buf[0] = '\0';
	}
	return buf;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* Append s to sb escaped as mountinfo escapes paths. */
static void add_mountinfo_escaped(struct strbuf *sb, const char *s)
{
	for (; *s; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			strbuf_addf(sb, "\\%03o", (unsigned)(unsigned char)*s);
		else
			strbuf_addch(sb, *s);
	}
}

static char scratch[PATH_MAX];

/* A fresh scratch directory with an empty "self" in it, for a fake proc
 * root; its path in scratch. */
static const char *make_scratch(void)
{
	char self[PATH_MAX + 8];
	fmt(scratch, sizeof(scratch), "/tmp/lp-test-cgroup-XXXXXX");
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		exit(1);
	}
	fmt(self, sizeof(self), "%s/self", scratch);
	mkdir(self, 0755);
	return scratch;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

static void remove_scratch(void)
{
	if (scratch[0])
		nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	scratch[0] = '\0';
	cgroup_set_roots(NULL);
}

static void scratch_file(const char *name, const char *text)
{
	char path[PATH_MAX + 64];
	fmt(path, sizeof(path), "%s/%s", scratch, name);
	if (write_text(path, text) < 0)
		perror(path);
}

/* A fake proc root for tree: self/cgroup copied, self/mountinfo from
 * mountinfo.in with @ROOT@ replaced. Returns the proc root. */
static const char *proc_root_for_tree(const char *tree)
{
	char name[256];
	struct strbuf mi = STRBUF_INIT;

	make_scratch();
	fmt(name, sizeof(name), "%s/self/cgroup", tree);
	char *cg = fixture_text(name);
	scratch_file("self/cgroup", cg);
	free(cg);
	fmt(name, sizeof(name), "%s/self/mountinfo.in", tree);
	char *in = fixture_text(name);
	for (const char *s = in; *s; ) {
		const char *at = strstr(s, "@ROOT@");
		if (!at) {
			strbuf_addstr(&mi, s);
			break;
		}
		strbuf_add(&mi, s, (size_t)(at - s));
		add_mountinfo_escaped(&mi, fixture_dir());
		s = at + 6;
	}
	scratch_file("self/mountinfo", strbuf_str(&mi));
	strbuf_release(&mi);
	free(in);
	cgroup_set_roots(scratch);
	return scratch;
}

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- parsers ------------------------------------------------------------ */

static void test_parse_proc_cgroup_hybrid(void)
{
	char v2[PATH_MAX], v1[PATH_MAX];
	char *t = fixture_text("hybrid.cgroup");

	CHECK_EQ_INT(parse_proc_cgroup(t, v2, sizeof(v2), v1, sizeof(v1)), 0);
	CHECK_STR(v2, "/user.slice/user-1000.slice/session-2.scope");
	CHECK_STR(v1, "/user.slice/user-1000.slice/session-2.scope");
	free(t);

	/* this machine's shape: memory deep, everything else at the root */
	CHECK_EQ_INT(parse_proc_cgroup("9:name=systemd:/\n4:memory:/process_api/151fb0\n0::/\n",
	                               v2, sizeof(v2), v1, sizeof(v1)), 0);
	CHECK_STR(v2, "/");
	CHECK_STR(v1, "/process_api/151fb0");
}

static void test_parse_proc_cgroup_v1_comounted(void)
{
	char v2[PATH_MAX], v1[PATH_MAX];
	char *t = fixture_text("v1-comounted.cgroup");

	CHECK_EQ_INT(parse_proc_cgroup(t, v2, sizeof(v2), v1, sizeof(v1)), 0);
	CHECK_STR(v2, "");
	CHECK_STR(v1, "/docker/3f2a");   /* "memory_recursiveprot" is not "memory" */
	free(t);
}

static void test_parse_proc_cgroup_v2(void)
{
	char v2[PATH_MAX], v1[PATH_MAX];
	char *t = fixture_text("v2.cgroup");

	CHECK_EQ_INT(parse_proc_cgroup(t, v2, sizeof(v2), v1, sizeof(v1)), 0);
	CHECK_STR(v2, "/user.slice/user-1000.slice/user@1000.service/app.slice/"
	              "app-org.gnome.Terminal.slice/vte-spawn-4f1c.scope");
	CHECK_STR(v1, "");
	free(t);

	/* a path holding ':' and no final newline; CRLF tolerated */
	CHECK_EQ_INT(parse_proc_cgroup("0::/a:b/c", v2, sizeof(v2), v1, sizeof(v1)), 0);
	CHECK_STR(v2, "/a:b/c");
	CHECK_EQ_INT(parse_proc_cgroup("0::/x\r\n", v2, sizeof(v2), v1, sizeof(v1)), 0);
	CHECK_STR(v2, "/x");
}

static void test_parse_proc_cgroup_hostile(void)
{
	char v2[PATH_MAX], v1[16];

	/* nothing usable */
	CHECK_EQ_INT(parse_proc_cgroup("", v2, sizeof(v2), v1, sizeof(v1)), -1);
	CHECK_EQ_INT(parse_proc_cgroup("garbage\n\n::\n:::\n", v2, sizeof(v2), v1, sizeof(v1)), -1);
	CHECK_STR(v2, "");
	/* only non-memory v1 controllers */
	CHECK_EQ_INT(parse_proc_cgroup("3:cpuset:/\n2:pids:/a\n", v2, sizeof(v2), v1, sizeof(v1)), -1);
	/* relative path, non-numeric id, empty path: skipped */
	CHECK_EQ_INT(parse_proc_cgroup("0::relative\nx:memory:/a\n4:memory:\n", v2, sizeof(v2),
	                               v1, sizeof(v1)), -1);
	/* the first line wins; junk around is ignored */
	CHECK_EQ_INT(parse_proc_cgroup("junk\n0::/first\n0::/second\n", v2, sizeof(v2),
	                               v1, sizeof(v1)), 0);
	CHECK_STR(v2, "/first");
	/* a path that does not fit is absent, not truncated */
	CHECK_EQ_INT(parse_proc_cgroup("4:memory:/a/very/long/path/indeed\n", v2, sizeof(v2),
	                               v1, sizeof(v1)), -1);
	CHECK_STR(v1, "");
	CHECK_EQ_INT(parse_proc_cgroup("4:memory:/a/very/long/path/indeed\n0::/\n", v2, sizeof(v2),
	                               v1, sizeof(v1)), 0);
	CHECK_STR(v2, "/");
	CHECK_STR(v1, "");
}

static void test_parse_mounts_hybrid(void)
{
	char v2[PATH_MAX], v1[PATH_MAX], root[PATH_MAX];
	char *t = fixture_text("hybrid.mountinfo");

	CHECK_EQ_INT(parse_cgroup_mounts(t, v2, sizeof(v2), v1, sizeof(v1), root, sizeof(root)), 0);
	CHECK_STR(v2, "/sys/fs/cgroup/unified");
	CHECK_STR(v1, "/sys/fs/cgroup/memory");
	CHECK_STR(root, "/");
	free(t);
}

static void test_parse_mounts_v2(void)
{
	char v2[PATH_MAX], v1[PATH_MAX], root[PATH_MAX];
	char *t = fixture_text("v2.mountinfo");

	CHECK_EQ_INT(parse_cgroup_mounts(t, v2, sizeof(v2), v1, sizeof(v1), root, sizeof(root)), 0);
	CHECK_STR(v2, "/sys/fs/cgroup");  /* the first cgroup2 mount, not the bind mount */
	CHECK_STR(v1, "");
	CHECK_STR(root, "");
	free(t);
}

static void test_parse_mounts_container(void)
{
	char v2[PATH_MAX], v1[PATH_MAX], root[PATH_MAX];
	char *t = fixture_text("container.mountinfo");

	CHECK_EQ_INT(parse_cgroup_mounts(t, v2, sizeof(v2), v1, sizeof(v1), root, sizeof(root)), 0);
	CHECK_STR(v2, "");
	CHECK_STR(v1, "/sys/fs/cgroup/memory limits\\x");  /* \040 and \134 decoded */
	CHECK_STR(root, "/docker/3f2a");
	free(t);
}

static void test_parse_mounts_hostile(void)
{
	char v2[PATH_MAX], v1[PATH_MAX], root[PATH_MAX], tiny[8];

	CHECK_EQ_INT(parse_cgroup_mounts("", v2, sizeof(v2), v1, sizeof(v1), root, sizeof(root)), -1);
	/* no " - " separator, too few fields, a cgroup fs without memory in its
	 * super options ("memory" only in the mount options must not count) */
	CHECK_EQ_INT(parse_cgroup_mounts(
		"garbage\n1 2 3\n"
		"36 31 0:33 / /sys/fs/cgroup/memory rw,memory cgroup cgroup rw,memory\n"
		"37 31 0:34 / /sys/fs/cgroup/pids rw,memory - cgroup cgroup rw,pids\n"
		"38 31 0:35 / /x rw - cgroup\n",
		v2, sizeof(v2), v1, sizeof(v1), root, sizeof(root)), -1);
	CHECK_STR(v1, "");
	/* several optional fields before the separator; a lone "-" in an
	 * early field is not the separator; a bad escape stays literal */
	CHECK_EQ_INT(parse_cgroup_mounts(
		"41 31 0:38 / /cg\\9x rw shared:1 master:2 propagate_from:3 - cgroup2 none rw\n",
		v2, sizeof(v2), v1, sizeof(v1), root, sizeof(root)), 0);
	CHECK_STR(v2, "/cg\\9x");
	CHECK_EQ_INT(parse_cgroup_mounts(
		"41 31 - / /cg rw - cgroup2 none rw\n",
		v2, sizeof(v2), v1, sizeof(v1), root, sizeof(root)), 0);
	CHECK_STR(v2, "/cg");
	/* a mount point that does not fit is absent */
	CHECK_EQ_INT(parse_cgroup_mounts(
		"41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 none rw\n",
		tiny, sizeof(tiny), v1, sizeof(v1), root, sizeof(root)), -1);
	CHECK_STR(tiny, "");
}

static void test_parse_limit_value(void)
{
	uint64_t v = 77;

	CHECK_EQ_INT(parse_limit_value("max\n", &v), 0);
	CHECK_EQ_INT(v, 0);
	CHECK_EQ_INT(parse_limit_value("1073741824\n", &v), 0);
	CHECK_EQ_INT(v, 1073741824);
	CHECK_EQ_INT(parse_limit_value("4096", &v), 0);
	CHECK_EQ_INT(v, 4096);
	/* v1 "unlimited": PAGE_COUNTER_MAX pages, 4 KiB and 64 KiB pages, old
	 * kernels' 2^64 - 1 */
	v = 1;
	CHECK_EQ_INT(parse_limit_value("9223372036854771712\n", &v), 0);
	CHECK_EQ_INT(v, 0);
	v = 1;
	CHECK_EQ_INT(parse_limit_value("9223372036854710272\n", &v), 0);
	CHECK_EQ_INT(v, 0);
	v = 1;
	CHECK_EQ_INT(parse_limit_value("18446744073709551615\n", &v), 0);
	CHECK_EQ_INT(v, 0);
	/* 1 TiB is a real limit */
	CHECK_EQ_INT(parse_limit_value("1099511627776", &v), 0);
	CHECK(v == 1099511627776ULL);
	/* junk */
	v = 5;
	CHECK_EQ_INT(parse_limit_value("18446744073709551616", &v), -1);
	CHECK_EQ_INT(parse_limit_value("", &v), -1);
	CHECK_EQ_INT(parse_limit_value("\n", &v), -1);
	CHECK_EQ_INT(parse_limit_value("-1", &v), -1);
	CHECK_EQ_INT(parse_limit_value("12abc", &v), -1);
	CHECK_EQ_INT(parse_limit_value("maximum", &v), -1);
	CHECK_EQ_INT(parse_limit_value("12 34", &v), -1);
	CHECK_EQ_INT(v, 5);   /* untouched on failure */
}

static void test_parse_memory_stat(void)
{
	struct cgroup_memstat ms;
	/* v2: file includes shmem; the page cache is the file LRU lists */
	CHECK_EQ_INT(parse_memory_stat("anon 4096000\nfile 9000000\nkernel 1\nshmem 1000000\n"
	                               "inactive_anon 0\nactive_anon 4096000\ninactive_file 3000000\n"
	                               "active_file 5000000\nunevictable 0\n", &ms), 0);
	CHECK_EQ_INT(ms.file_cache_bytes, 8000000);
	CHECK_EQ_INT(ms.shmem_bytes, 1000000);
	CHECK_EQ_INT(ms.anon_bytes, 4096000);
	/* v1: the hierarchical total_* keys win over the cgroup's own */
	CHECK_EQ_INT(parse_memory_stat("cache 10\nrss 20\nshmem 3\ninactive_file 1\nactive_file 2\n"
	                               "total_cache 100\ntotal_rss 200\ntotal_shmem 30\n"
	                               "total_inactive_file 10\ntotal_active_file 20\n", &ms), 0);
	CHECK_EQ_INT(ms.file_cache_bytes, 30);
	CHECK_EQ_INT(ms.shmem_bytes, 30);
	CHECK_EQ_INT(ms.anon_bytes, 200);
	/* v1 without totals */
	CHECK_EQ_INT(parse_memory_stat("rss 20\nshmem 3\ninactive_file 1\nactive_file 2\n", &ms), 0);
	CHECK_EQ_INT(ms.file_cache_bytes, 3);
	CHECK_EQ_INT(ms.anon_bytes, 20);
	/* no file lists: not a memory.stat */
	CHECK_EQ_INT(parse_memory_stat("anon 5\nshmem 1\n", &ms), -1);
	CHECK_EQ_INT(parse_memory_stat("", &ms), -1);
	CHECK_EQ_INT(parse_memory_stat("active_file x\ninactive_file 1\n", &ms), -1);
}

static void test_parse_memory_events(void)
{
	struct cgroup_events ev;

	CHECK_EQ_INT(parse_memory_events("low 0\nhigh 12\nmax 7\noom 3\noom_kill 2\n"
	                                 "oom_group_kill 0\n", &ev), 0);
	CHECK_EQ_INT(ev.high, 12);
	CHECK_EQ_INT(ev.max, 7);
	CHECK_EQ_INT(ev.oom, 3);
	CHECK_EQ_INT(ev.oom_kill, 2);
	/* older kernels: no oom_kill line; unknown keys and junk skipped */
	CHECK_EQ_INT(parse_memory_events("future_key 99\noom 1\nbogus\nmax x\nhigh 4 extra\n", &ev), 0);
	CHECK_EQ_INT(ev.oom, 1);
	CHECK_EQ_INT(ev.oom_kill, 0);
	CHECK_EQ_INT(ev.max, 0);
	CHECK_EQ_INT(ev.high, 0);
	/* "oom_kill" is not "oom": whole keys only */
	CHECK_EQ_INT(parse_memory_events("oom_kill 5\n", &ev), 0);
	CHECK_EQ_INT(ev.oom, 0);
	CHECK_EQ_INT(ev.oom_kill, 5);
	/* huge values: the largest fits, one more is junk */
	CHECK_EQ_INT(parse_memory_events("max 18446744073709551615\noom 18446744073709551616\n", &ev), 0);
	CHECK(ev.max == UINT64_MAX);
	CHECK_EQ_INT(ev.oom, 0);
	CHECK_EQ_INT(parse_memory_events("", &ev), -1);
	CHECK_EQ_INT(parse_memory_events("nothing here\n", &ev), -1);
}

static void test_parse_oom_control(void)
{
	struct cgroup_events ev;

	CHECK_EQ_INT(parse_oom_control("oom_kill_disable 0\nunder_oom 0\noom_kill 4\n", &ev), 0);
	CHECK_EQ_INT(ev.oom_kill, 4);
	CHECK_EQ_INT(ev.oom, 4);
	CHECK_EQ_INT(ev.max, 0);
	/* kernels before 4.13 have no oom_kill line */
	CHECK_EQ_INT(parse_oom_control("oom_kill_disable 0\nunder_oom 1\n", &ev), 0);
	CHECK_EQ_INT(ev.oom_kill, 0);
	CHECK_EQ_INT(parse_oom_control("", &ev), -1);
	CHECK_EQ_INT(parse_oom_control("max 3\nhigh 2\n", &ev), -1);   /* v2 text */
}

/* ---- fixture trees -------------------------------------------------------- */

static void test_fixture_v1_reads(void)
{
	struct job_cgroup cg = { .version = 1, .has_memory = true };
	struct cgroup_events ev;
	uint64_t bytes = 0;

	fmt(cg.dir, sizeof(cg.dir), "%s/tree-v1/sys fs/memory/inner", fixture_dir());
	CHECK_EQ_INT(cgroup_usage(&cg, &bytes), 0);
	CHECK_EQ_INT(bytes, 123456789);
	CHECK_EQ_INT(cgroup_read_events(&cg, &ev), 0);
	CHECK_EQ_INT(ev.oom_kill, 2);
	CHECK_EQ_INT(ev.oom, 2);
	CHECK_EQ_INT(ev.max, 17);   /* failcnt */
	CHECK_EQ_INT(ev.high, 0);
	/* 3 pids and a 0 (a process of another pid namespace) */
	CHECK_EQ_INT(cgroup_nprocs(&cg), 4);

	proc_root_for_tree("tree-v1");
	/* 2 GiB at the mount, 1.5 GiB above it (memory.stat) */
	CHECK_EQ_INT(cgroup_self_limit(), 1536 * MiB);
	remove_scratch();
}

static void test_fixture_v2_reads(void)
{
	struct job_cgroup cg = { .version = 2, .has_memory = true };
	struct cgroup_events ev;
	uint64_t bytes = 0;

	fmt(cg.dir, sizeof(cg.dir), "%s/tree-v2/cgroup/user.slice/user-1000.slice/"
	         "user@1000.service/app.slice/run.scope", fixture_dir());
	CHECK_EQ_INT(cgroup_usage(&cg, &bytes), 0);
	CHECK_EQ_INT(bytes, 987654321);
	CHECK_EQ_INT(cgroup_read_events(&cg, &ev), 0);
	CHECK_EQ_INT(ev.oom, 3);
	CHECK_EQ_INT(ev.oom_kill, 1);
	CHECK_EQ_INT(ev.max, 9);
	CHECK_EQ_INT(ev.high, 5);
	CHECK_EQ_INT(cgroup_nprocs(&cg), 2);

	/* without the memory controller: quiet -1, ENOTSUP */
	cg.has_memory = false;
	errno = 0;
	CHECK_EQ_INT(cgroup_usage(&cg, &bytes), -1);
	CHECK_EQ_INT(errno, ENOTSUP);
	CHECK_EQ_INT(cgroup_read_events(&cg, &ev), -1);
	CHECK_EQ_INT(cgroup_nprocs(&cg), 2);   /* cgroup.procs still works */

	proc_root_for_tree("tree-v2");
	CHECK_EQ_INT(cgroup_self_limit(), 4096 * MiB);   /* max, 8G, max, 4G, max */
	remove_scratch();
}

static void test_fixture_missing_files(void)
{
	struct job_cgroup cg = { .version = 2, .has_memory = true };
	struct cgroup_events ev;
	uint64_t bytes;

	fmt(cg.dir, sizeof(cg.dir), "%s/no-such-cgroup", fixture_dir());
	fprintf(stderr, "  (three error messages expected)\n");
	CHECK_EQ_INT(cgroup_usage(&cg, &bytes), -1);
	CHECK_EQ_INT(cgroup_read_events(&cg, &ev), -1);
	CHECK_EQ_INT(cgroup_nprocs(&cg), -1);
}

/* cgroup_of_process(): another process's cgroup, read from PROC/PID/cgroup
 * and resolved through our mounts; the root cgroup is none of its own. */
static void counted(pid_t pid, void *ctx)
{
	*(long long *)ctx += pid;
}

static void test_cgroup_of_process(void)
{
	struct job_cgroup cg;
	char why[256];
	long long sum = 0;

	proc_root_for_tree("tree-v2");
	char dir[PATH_MAX + 16];
	fmt(dir, sizeof(dir), "%s/4242", scratch);
	mkdir(dir, 0755);
	fmt(dir, sizeof(dir), "%s/4243", scratch);
	mkdir(dir, 0755);
	scratch_file("4242/cgroup", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope\n");
	scratch_file("4243/cgroup", "0::/\n");
	CHECK_EQ_INT(cgroup_of_process(4242, &cg, why, sizeof(why)), 0);
	CHECK_EQ_INT(cg.version, 2);
	CHECK(strstr(cg.dir, "/tree-v2/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope") != NULL);
	CHECK(cg.has_memory);
	CHECK_EQ_INT(cgroup_each_proc(&cg, counted, &sum), 2);
	CHECK_EQ_INT(sum, 4242 + 4243);
	CHECK_EQ_INT(cgroup_of_process(4243, &cg, why, sizeof(why)), -1);   /* the root: nobody's own */
	CHECK(strstr(why, "root cgroup") != NULL);
	CHECK_EQ_INT(cgroup_of_process(4244, &cg, why, sizeof(why)), -1);   /* no such process */
	CHECK(strstr(why, "4244/cgroup") != NULL);
	remove_scratch();
}

static void test_self_limit_unknown(void)
{
	make_scratch();
	cgroup_set_roots(scratch);
	CHECK_EQ_INT(cgroup_self_limit(), 0);   /* no proc files at all */
	scratch_file("self/cgroup", "0::/\n");
	scratch_file("self/mountinfo", "1 0 0:1 / / rw - ext4 /dev/sda rw\n");
	CHECK_EQ_INT(cgroup_self_limit(), 0);   /* nothing mounted */
	remove_scratch();
}

/* ---- creation and its fallbacks, on scratch trees -------------------------- */

static void test_create_fallbacks(void)
{
	struct job_cgroup cg;
	char why[512], text[PATH_MAX * 2];

	make_scratch();
	cgroup_set_roots(scratch);

	/* no PROC/self/cgroup */
	CHECK_EQ_INT(cgroup_create_job(&cg, why, sizeof(why)), -1);
	CHECK(strstr(why, "cannot read") != NULL);

	/* cgroups named, nothing mounted */
	scratch_file("self/cgroup", "4:memory:/a\n0::/a\n");
	scratch_file("self/mountinfo", "1 0 0:1 / / rw - ext4 /dev/sda rw\n");
	CHECK_EQ_INT(cgroup_create_job(&cg, why, sizeof(why)), -1);
	CHECK(strstr(why, "v2: no cgroup2 file system mounted") != NULL);
	CHECK(strstr(why, "v1: memory controller not mounted") != NULL);

	/* mounted where nothing exists: mkdir fails for both */
	fmt(text, sizeof(text),
	         "30 1 0:30 / %s/v1 rw - cgroup cgroup rw,memory\n"
	         "31 1 0:31 / %s/v2 rw - cgroup2 cgroup2 rw\n", scratch, scratch);
	scratch_file("self/mountinfo", text);
	CHECK_EQ_INT(cgroup_create_job(&cg, why, sizeof(why)), -1);
	CHECK(strstr(why, "v1: cannot create") != NULL);
	CHECK(strstr(why, "v2: cannot create") != NULL);
	CHECK_EQ_INT(cg.version, 0);

	/* own cgroup outside the mounted part of the hierarchy */
	fmt(text, sizeof(text),
	         "30 1 0:30 /docker/x %s/v1 rw - cgroup cgroup rw,memory\n", scratch);
	scratch_file("self/mountinfo", text);
	scratch_file("self/cgroup", "4:memory:/docker/xy\n");
	CHECK_EQ_INT(cgroup_create_job(&cg, why, sizeof(why)), -1);
	CHECK(strstr(why, "outside the mounted part") != NULL);
	/* a "/.." path from a foreign cgroup namespace */
	scratch_file("self/cgroup", "0::/../../sibling\n");
	fmt(text, sizeof(text), "31 1 0:31 / %s rw - cgroup2 cgroup2 rw\n", scratch);
	scratch_file("self/mountinfo", text);
	CHECK_EQ_INT(cgroup_create_job(&cg, why, sizeof(why)), -1);
	CHECK(strstr(why, "not visible") != NULL);

	/* a NULL why is allowed; a tiny one is truncated, not overrun */
	CHECK_EQ_INT(cgroup_create_job(&cg, NULL, 0), -1);
	char tiny[8] = "xxxxxxx";
	CHECK_EQ_INT(cgroup_create_job(&cg, tiny, 4), -1);
	CHECK_EQ_INT(strlen(tiny), 3);
	remove_scratch();
}

/* v2 on a plain directory tree: naming, placement below the own cgroup
 * (mount root stripped), no memory controller, removal. */
static void test_create_v2_scratch(void)
{
	struct job_cgroup cg, cg2;
	char why[512], text[PATH_MAX * 2], want[PATH_MAX * 2];

	make_scratch();
	cgroup_set_roots(scratch);
	fmt(text, sizeof(text), "%s/mnt point", scratch);
	mkdir(text, 0755);
	fmt(text, sizeof(text), "%s/mnt point/own", scratch);
	mkdir(text, 0755);
	struct strbuf mi = STRBUF_INIT;
	strbuf_addstr(&mi, "31 1 0:31 /delegated ");
	add_mountinfo_escaped(&mi, scratch);
	strbuf_addstr(&mi, "/mnt\\040point rw - cgroup2 cgroup2 rw\n");
	scratch_file("self/mountinfo", strbuf_str(&mi));
	strbuf_release(&mi);
	scratch_file("self/cgroup", "0::/delegated/own\n");

	CHECK_EQ_INT(cgroup_create_job(&cg, why, sizeof(why)), 0);
	CHECK_EQ_INT(cg.version, 2);
	CHECK(!cg.has_memory);
	CHECK(!cg.moved_self);
	CHECK(strstr(why, "v2: memory controller not delegated") != NULL);
	fmt(want, sizeof(want), "%s/mnt point/own/leakproof-%ld-", scratch, (long)getpid());
	CHECK(!strncmp(cg.dir, want, strlen(want)));
	CHECK(is_dir(cg.dir));
	/* a second job gets another name */
	CHECK_EQ_INT(cgroup_create_job(&cg2, why, sizeof(why)), 0);
	CHECK(strcmp(cg.dir, cg2.dir) != 0);
	CHECK_EQ_INT(cgroup_remove(&cg2), 0);
	CHECK_EQ_INT(cgroup_remove(&cg), 0);
	CHECK(!is_dir(cg.dir));
	CHECK_EQ_INT(cgroup_remove(&cg), 0);   /* already gone is fine */
	remove_scratch();
}

/* ---- real cgroups ------------------------------------------------------------ */

/* Read one byte the child sends when ready; 0 or -1. */
static int wait_ready(int fd)
{
	char c;
	ssize_t n;
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 && c == 'r' ? 0 : -1;
}

static void touch_bytes(size_t bytes)
{
	if (!tap_map_touched(bytes))
		_exit(4);
}

/* The machine's own cgroups: a job with a child that touches 32 MiB. */
static void test_real_job(void)
{
	struct job_cgroup cg;
	char why[1024];
	int pfd[2];

	alarm(REAL_TEST_TIMEOUT_S);   /* a kill that fails must not hang the suite */

	cgroup_set_roots(NULL);
	if (cgroup_create_job(&cg, why, sizeof(why)) < 0) {
		printf("# skip: no writable cgroup here: %s\n", why);
		CHECK(1);
		return;
	}
	printf("# job cgroup v%d at %s%s%s\n", cg.version, cg.dir,
	       cg.has_memory ? "" : " without memory: ", cg.has_memory ? "" : why);
	CHECK(is_dir(cg.dir));
	CHECK_EQ_INT(cgroup_nprocs(&cg), 0);
	uint64_t before = 0, after = 0;
	if (cg.has_memory)
		CHECK_EQ_INT(cgroup_usage(&cg, &before), 0);

	CHECK_EQ_INT(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);   /* nothing buffered twice */
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(pfd[0]);
		if (cgroup_enter(&cg, 0) < 0)   /* "0": the caller, v1 as v2 */
			_exit(3);
		touch_bytes(32 * MiB);
		if (write(pfd[1], "r", 1) != 1)
			_exit(5);
		for (;;)
			pause();
	}
	close(pfd[1]);
	CHECK(pid > 0);
	CHECK_EQ_INT(wait_ready(pfd[0]), 0);
	close(pfd[0]);

	CHECK_EQ_INT(cgroup_nprocs(&cg), 1);
	if (cg.has_memory) {
		CHECK_EQ_INT(cgroup_usage(&cg, &after), 0);
		printf("# usage %.1f MiB before, %.1f MiB with 32 MiB touched\n",
		       (double)before / MiB, (double)after / MiB);
		CHECK(after >= before + 31 * MiB);
		/* slack for page tables, per-cpu charge batches, and the
		 * shadow memory of valgrind, which is in the child too */
		CHECK(after <= before + 48 * MiB);
	} else {
		printf("# skip: usage (no memory controller)\n");
	}
	CHECK_EQ_INT(cgroup_signal_all(&cg, SIGKILL, 0), 1);
	int status = 0;
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK_EQ_INT(cgroup_remove(&cg), 0);
	CHECK(!is_dir(cg.dir));
	CHECK(access(cg.dir, F_OK) < 0 && errno == ENOENT);
}

/* Page cache outlives the processes that made it: the charges stay in the
 * cgroup, yet it can be removed (no memory.force_empty needed on v1). */
static void test_real_page_cache_remove(void)
{
	struct job_cgroup cg;
	char why[1024], path[PATH_MAX];

	alarm(REAL_TEST_TIMEOUT_S);   /* a kill that fails must not hang the suite */

	cgroup_set_roots(NULL);
	if (cgroup_create_job(&cg, why, sizeof(why)) < 0) {
		printf("# skip: no writable cgroup here: %s\n", why);
		CHECK(1);
		return;
	}
	make_scratch();
	fmt(path, sizeof(path), "%s/cache", scratch);
	fflush(NULL);   /* nothing buffered twice */
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (cgroup_enter(&cg, 0) < 0)
			_exit(3);
		static char block[MiB];
		memset(block, 1, sizeof(block));
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		for (int i = 0; i < 8; i++)
			if (fd < 0 || write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
				_exit(4);
		_exit(close(fd) < 0 ? 5 : 0);
	}
	int status = 0;
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ_INT(cgroup_nprocs(&cg), 0);
	if (cg.has_memory) {
		uint64_t bytes = 0;
		CHECK_EQ_INT(cgroup_usage(&cg, &bytes), 0);
		printf("# %.1f MiB still charged with no process left\n", (double)bytes / MiB);
		CHECK(bytes >= 7 * MiB);
	}
	CHECK_EQ_INT(cgroup_remove(&cg), 0);
	CHECK(!is_dir(cg.dir));
	remove_scratch();
}

/* A 64 MiB limit, a child that wants 256 MiB: the kernel's OOM killer
 * ends it and the events say so. */
static void test_real_limit_oom(void)
{
	struct job_cgroup cg;
	struct cgroup_events ev;
	char why[1024];

	alarm(REAL_TEST_TIMEOUT_S);   /* a kill that fails must not hang the suite */

	cgroup_set_roots(NULL);
	if (cgroup_create_job(&cg, why, sizeof(why)) < 0) {
		printf("# skip: no writable cgroup here: %s\n", why);
		CHECK(1);
		return;
	}
	if (!cg.has_memory) {
		printf("# skip: no memory controller in %s: %s\n", cg.dir, why);
		CHECK(1);
		CHECK_EQ_INT(cgroup_remove(&cg), 0);
		return;
	}
	CHECK_EQ_INT(cgroup_set_limit(&cg, 64 * MiB, 0), 0);
	/* no swap escape hatch: on v1 swappiness 0 keeps anon pages in */
	if (cg.version == 1) {
		char path[PATH_MAX + 32];
		fmt(path, sizeof(path), "%s/memory.swappiness", cg.dir);
		write_text(path, "0");
	} else {
		char path[PATH_MAX + 32];
		fmt(path, sizeof(path), "%s/memory.swap.max", cg.dir);
		write_text(path, "0");
	}
	fflush(NULL);   /* nothing buffered twice */
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (cgroup_enter(&cg, 0) < 0)
			_exit(3);
		for (int i = 0; i < 256; i++)
			touch_bytes(MiB);
		_exit(0);
	}
	CHECK(pid > 0);
	int status = 0;
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK_EQ_INT(cgroup_read_events(&cg, &ev), 0);
	printf("# v%d events: oom %llu, oom_kill %llu, max %llu, high %llu\n", cg.version,
	       (unsigned long long)ev.oom, (unsigned long long)ev.oom_kill,
	       (unsigned long long)ev.max, (unsigned long long)ev.high);
	CHECK(ev.oom_kill >= 1 || ev.max > 0);
	CHECK(ev.max > 0);
	CHECK_EQ_INT(cgroup_remove(&cg), 0);
	CHECK(!is_dir(cg.dir));
}

/* The cgroup2 hierarchy alone, memory or not: a fake proc root keeps only
 * the real "0::" line and the real cgroup2 mounts, so creation takes the
 * v2 path. Two processes (one escaped its process group), cgroup.procs,
 * cgroup.kill, the signal loop, removal. */
static void test_real_v2(void)
{
	struct job_cgroup cg;
	char why[1024], line[PATH_MAX];
	struct strbuf cgtext = STRBUF_INIT, mitext = STRBUF_INIT;
	FILE *f;

	alarm(REAL_TEST_TIMEOUT_S);   /* a kill that fails must not hang the suite */

	if ((f = fopen("/proc/self/cgroup", "r"))) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "0::/", 4))
				strbuf_addstr(&cgtext, line);
		fclose(f);
	}
	if ((f = fopen("/proc/self/mountinfo", "r"))) {
		while (fgets(line, sizeof(line), f))
			if (strstr(line, " - cgroup2 "))
				strbuf_addstr(&mitext, line);
		fclose(f);
	}
	if (!cgtext.len || !mitext.len) {
		printf("# skip: no cgroup2 hierarchy here\n");
		CHECK(1);
		goto out;
	}
	make_scratch();
	scratch_file("self/cgroup", strbuf_str(&cgtext));
	scratch_file("self/mountinfo", strbuf_str(&mitext));
	cgroup_set_roots(scratch);
	if (cgroup_create_job(&cg, why, sizeof(why)) < 0) {
		printf("# skip: cgroup2 not writable here: %s\n", why);
		CHECK(1);
		goto out;
	}
	cgroup_set_roots(NULL);
	CHECK_EQ_INT(cg.version, 2);
	printf("# v2 job cgroup at %s, memory %s%s\n", cg.dir, cg.has_memory ? "yes" : "no: ",
	       cg.has_memory ? "" : why);

	char kill_path[PATH_MAX + 16];
	fmt(kill_path, sizeof(kill_path), "%s/cgroup.kill", cg.dir);
	if (access(kill_path, F_OK) < 0)
		printf("# note: no cgroup.kill (kernel before 5.14): SIGKILL goes pid by pid\n");

	/* we reap the grandchild ourselves once its parent is gone */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	int pfd[2], gfd[2];
	CHECK_EQ_INT(pipe2(pfd, O_CLOEXEC), 0);
	CHECK_EQ_INT(pipe2(gfd, O_CLOEXEC), 0);
	fflush(NULL);   /* nothing buffered twice */
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(pfd[1]);
		close(gfd[0]);
		if (wait_ready(pfd[0]) < 0)   /* the parent moves us in */
			_exit(3);
		pid_t g = fork();
		if (g == 0) {
			setsid();   /* out of the job's process group and session */
			if (write(gfd[1], "r", 1) != 1)
				_exit(5);
			for (;;)
				pause();
		}
		if (g < 0)
			_exit(6);
		for (;;)
			pause();
	}
	close(pfd[0]);
	close(gfd[1]);
	CHECK(pid > 0);
	CHECK_EQ_INT(cgroup_enter(&cg, pid), 0);   /* an explicit pid */
	CHECK_EQ_INT(write(pfd[1], "r", 1), 1);
	close(pfd[1]);
	CHECK_EQ_INT(wait_ready(gfd[0]), 0);
	close(gfd[0]);

	CHECK_EQ_INT(cgroup_nprocs(&cg), 2);
	/* SIGCONT goes through the signal loop: both, each counted once */
	CHECK_EQ_INT(cgroup_signal_all(&cg, SIGCONT, 0), 2);
	/* leaving out the child's process group: only the setsid() grandchild */
	CHECK_EQ_INT(cgroup_signal_all(&cg, SIGCONT, getpgid(pid)), 1);
	/* a populated cgroup cannot be removed: -1 after about a second */
	fprintf(stderr, "  (one error message expected)\n");
	int64_t t0 = mono_ns();
	CHECK_EQ_INT(cgroup_remove(&cg), -1);
	CHECK(mono_ns() - t0 >= 900000000LL);
	CHECK(is_dir(cg.dir));

	CHECK_EQ_INT(cgroup_signal_all(&cg, SIGKILL, 0), 2);
	int reaped = 0, killed = 0, status;
	pid_t w;
	while (reaped < 2 && (w = waitpid(-1, &status, 0)) > 0) {
		reaped++;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
			killed++;
	}
	CHECK_EQ_INT(reaped, 2);
	CHECK_EQ_INT(killed, 2);
	CHECK_EQ_INT(cgroup_nprocs(&cg), 0);
	CHECK_EQ_INT(cgroup_remove(&cg), 0);
	CHECK(!is_dir(cg.dir));
	prctl(PR_SET_CHILD_SUBREAPER, 0);
out:
	strbuf_release(&cgtext);
	strbuf_release(&mitext);
	remove_scratch();
}

TEST_MAIN("cgroup",
	TEST(test_parse_proc_cgroup_hybrid),
	TEST(test_parse_proc_cgroup_v1_comounted),
	TEST(test_parse_proc_cgroup_v2),
	TEST(test_parse_proc_cgroup_hostile),
	TEST(test_parse_mounts_hybrid),
	TEST(test_parse_mounts_v2),
	TEST(test_parse_mounts_container),
	TEST(test_parse_mounts_hostile),
	TEST(test_parse_limit_value),
	TEST(test_parse_memory_events),
	TEST(test_parse_memory_stat),
	TEST(test_parse_oom_control),
	TEST(test_fixture_v1_reads),
	TEST(test_fixture_v2_reads),
	TEST(test_fixture_missing_files),
	TEST(test_self_limit_unknown),
	TEST(test_cgroup_of_process),
	TEST(test_create_fallbacks),
	TEST(test_create_v2_scratch),
	TEST(test_real_job),
	TEST(test_real_page_cache_remove),
	TEST(test_real_limit_oom),
	TEST(test_real_v2))

/*
 * test_proc.c — the /proc parsers on hostile text (names with ')' and
 * newlines, empty fields, cut files, overflowing numbers, meminfo without
 * MemAvailable, smaps without smaps_rollup), the readers on the fixture root
 * t/fixtures/proc/root, and the kernel behaviour the sampler depends on: a
 * pread at offset 0 of a kept statm descriptor returns fresh values, and
 * fails with ESRCH once the process is reaped.
 */
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/proc.h"
#include "util/util.h"

#define FIX "t/fixtures/proc/root"
#define KB 1024ull

/* Fields 3.. of a real stat line, after "PID (COMM)". */
#define STAT_REST " S 1 100 100 0 -1 4194304 141 0 1 0 7 3 0 0 20 0 1 0 155392 2990080 395 " \
	"18446744073709551615 94920090669056 94920090686985 140720806763152 0 0 0 0 6 0 1 0 0 17 1 0\n"

static void test_stat_names(void)
{
	struct proc_stat st;
	CHECK_EQ_INT(parse_proc_stat_buf("100 (a) Z (b)" STAT_REST, &st), 0);
	CHECK_EQ_INT(st.pid, 100);
	CHECK_STR(st.comm, "a) Z (b");
	CHECK(st.state == 'S');
	CHECK_EQ_INT(st.ppid, 1);
	CHECK_EQ_INT(st.pgrp, 100);
	CHECK_EQ_INT(st.flags, 4194304);
	CHECK(!(st.flags & PROC_PF_EXITING));
	CHECK_EQ_INT(st.minflt, 141);
	CHECK_EQ_INT(st.majflt, 1);
	CHECK_EQ_INT(st.utime_ticks, 7);
	CHECK_EQ_INT(st.stime_ticks, 3);
	CHECK_EQ_INT(st.starttime_ticks, 155392);
	CHECK_EQ_INT(st.rss_pages, 395);

	CHECK_EQ_INT(parse_proc_stat_buf("7 (Web Content)" STAT_REST, &st), 0);
	CHECK_STR(st.comm, "Web Content");
	CHECK_EQ_INT(parse_proc_stat_buf("7 (two\nlines)" STAT_REST, &st), 0);
	CHECK_STR(st.comm, "two\nlines");
	CHECK_EQ_INT(st.ppid, 1);
	/* A name that imitates the fields after it. */
	CHECK_EQ_INT(parse_proc_stat_buf("7 (x) R 99 99 (y)" STAT_REST, &st), 0);
	CHECK_STR(st.comm, "x) R 99 99 (y");
	CHECK(st.state == 'S');
	CHECK_EQ_INT(st.ppid, 1);
	CHECK_EQ_INT(parse_proc_stat_buf("7 ()" STAT_REST, &st), 0);
	CHECK_STR(st.comm, "");
	CHECK_EQ_INT(parse_proc_stat_buf("7 ())))" STAT_REST, &st), 0);
	CHECK_STR(st.comm, ")))");

	char line[512];
	snprintf(line, sizeof(line), "7 (%0100d)%s", 0, STAT_REST);
	CHECK_EQ_INT(parse_proc_stat_buf(line, &st), 0);
	CHECK_EQ_INT(strlen(st.comm), PROC_COMM_MAX - 1);
	CHECK_EQ_INT(st.rss_pages, 395);
	/* Zombies and kernel threads have a state and zero sizes. */
	CHECK_EQ_INT(parse_proc_stat_buf("9 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 "
	                                 "20 0 1 0 12 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0\n", &st), 0);
	CHECK(st.state == 'I');
	CHECK_EQ_INT(st.ppid, 2);
	CHECK_EQ_INT(st.flags, 69238880);
}

static void test_stat_garbage(void)
{
	static const char *const bad[] = {
		"",
		"\n",
		"hello world\n",
		"12 (x" STAT_REST,                      /* no ')' */
		"12 x) S 1 1 1\n",                      /* no '(' */
		"12 (x)S 1" STAT_REST,                  /* no space before the state */
		"12 (x) 1 1 100 100 0 -1 4 141 0 1 0 7 3 0 0 20 0 1 0 155392 2990080 395 0\n", /* no state */
		"-5 (x)" STAT_REST,
		"0 (x)" STAT_REST,
		"99999999999 (x)" STAT_REST,            /* PID beyond int */
		"12 (x) S  1 100 100 0 -1 4194304 141 0 1 0 7 3 0 0 20 0 1 0 155392 2990080 395 0\n", /* empty field */
		"12 (x) S -1 100 100 0 -1 4194304 141 0 1 0 7 3 0 0 20 0 1 0 155392 2990080 395 0\n", /* ppid < 0 */
		"12 (x) S 1 100 100 0 -1 4194304 184467440737095516160 0 1 0 7 3 0 0 20 0 1 0 1 2 3 0\n", /* overflow */
		"12 (x) S 1 100 100 0 -1 4194304 141 0 1 0 7 3 0 0 20 0 1 0 155392 2990080\n", /* no rss */
		"12 (x) S 1 100 100 0 -1 4194304 141 0 1 0 7 3 0 0 20 0 1 0 155392 2990080 39", /* cut in rss */
		"12 (x) S 1 100 100 0 -1 4194304 141 0 1 0 7 3 0 0 20 0 1 0 155392 2990080 3x5 0\n",
		"12 (x) S 1 100 100 0 -1 4194304 141 0 1 0 7 3 0 0 2a 0 1 0 155392 2990080 395 0\n",
		"12 (x) S 1 100",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct proc_stat st;
		errno = 0;
		int r = parse_proc_stat_buf(bad[i], &st);
		if (r != -1)
			fprintf(stderr, "  accepted bad stat #%zu\n", i);
		CHECK_EQ_INT(r, -1);
		CHECK_EQ_INT(errno, EINVAL);
	}
}

static void test_statm(void)
{
	struct proc_statm sm;
	CHECK_EQ_INT(parse_proc_statm_buf("730 438 411 5 0 89 0\n", &sm), 0);
	CHECK_EQ_INT(sm.size_pages, 730);
	CHECK_EQ_INT(sm.resident_pages, 438);
	CHECK_EQ_INT(sm.shared_pages, 411);
	CHECK_EQ_INT(parse_proc_statm_buf("0 0 0 0 0 0 0\n", &sm), 0);   /* a zombie */
	CHECK_EQ_INT(sm.size_pages, 0);
	CHECK_EQ_INT(parse_proc_statm_buf("1 2 3\n", &sm), 0);
	CHECK_EQ_INT(parse_proc_statm_buf("18446744073709551615 1 2 0 0 0 0\n", &sm), 0);
	CHECK(sm.size_pages == UINT64_MAX);

	CHECK_EQ_INT(parse_proc_statm_buf("", &sm), -1);
	CHECK_EQ_INT(parse_proc_statm_buf("730 438", &sm), -1);
	CHECK_EQ_INT(parse_proc_statm_buf("730 438 41", &sm), -1);     /* cut: 41 of 411? */
	CHECK_EQ_INT(parse_proc_statm_buf("730  438 411 5 0 89 0\n", &sm), -1);
	CHECK_EQ_INT(parse_proc_statm_buf("a b c\n", &sm), -1);
	CHECK_EQ_INT(parse_proc_statm_buf("-1 2 3\n", &sm), -1);
	CHECK_EQ_INT(parse_proc_statm_buf("18446744073709551616 1 2 0 0 0 0\n", &sm), -1);
}

static void test_smaps_rollup(void)
{
	char buf[8192];
	struct proc_smaps sm;
	CHECK(read_file_buf(FIX "/100/smaps_rollup", buf, sizeof(buf)) > 0);
	CHECK_EQ_INT(parse_smaps_rollup_buf(buf, &sm), 0);
	CHECK_EQ_INT(sm.rss_bytes, 1752 * KB);
	CHECK_EQ_INT(sm.pss_bytes, 246 * KB);
	CHECK(sm.has_pss_split);
	CHECK_EQ_INT(sm.pss_anon_bytes, 108 * KB);
	CHECK_EQ_INT(sm.pss_file_bytes, 138 * KB);
	CHECK_EQ_INT(sm.pss_shmem_bytes, 0);
	CHECK_EQ_INT(sm.shared_clean_bytes, 1608 * KB);
	CHECK_EQ_INT(sm.private_clean_bytes, 36 * KB);
	CHECK_EQ_INT(sm.private_dirty_bytes, 108 * KB);
	CHECK_EQ_INT(sm.swap_bytes, 12 * KB);
	CHECK_EQ_INT(proc_smaps_uss(&sm), (36 + 108) * KB);
	CHECK_EQ_INT(sm.anonymous_bytes, 108 * KB);   /* growth kinds: copy-on-write */

	/* A whole smaps (no smaps_rollup): every mapping summed, no Pss_* split. */
	static char big[65536];
	CHECK(read_file_buf(FIX "/200/smaps", big, sizeof(big)) > 20000);
	CHECK_EQ_INT(parse_smaps_rollup_buf(big, &sm), 0);
	CHECK_EQ_INT(sm.rss_bytes, 1752 * KB);
	CHECK_EQ_INT(sm.pss_bytes, 235 * KB);
	CHECK_EQ_INT(sm.shared_clean_bytes, 1608 * KB);
	CHECK_EQ_INT(proc_smaps_uss(&sm), (36 + 108) * KB);
	CHECK(!sm.has_pss_split);

	/* Older kernels: no Pss_Anon/File/Shmem in the rollup either. */
	CHECK_EQ_INT(parse_smaps_rollup_buf("Rss: 8 kB\nPss: 4 kB\nPss_Anon: 4 kB\n", &sm), 0);
	CHECK(!sm.has_pss_split);
	CHECK_EQ_INT(sm.pss_anon_bytes, 4 * KB);
}

static void test_smaps_hostile(void)
{
	static const char *const bad[] = {
		"",
		"\n",
		"Rss: 8 kB\nPss: 4 kB",                 /* cut: no final newline */
		"Rss: 8 kB\n",                          /* no Pss */
		"Pss: 4 kB\n",                          /* no Rss */
		"Rss: 8 MB\nPss: 4 kB\n",
		"Rss: kB\nPss: 4 kB\n",
		"Rss: 8\nPss: 4 kB\n",
		"Rss: -8 kB\nPss: 4 kB\n",
		"Rss: 8 kB junk\nPss: 4 kB\n",
		"Rss: 18446744073709551615 kB\nPss: 4 kB\n",   /* * 1024 overflows */
		"Rss: 99999999999999999999999 kB\nPss: 4 kB\n",
		"Rss: 9007199254740991 kB\nRss: 9007199254740991 kB\nRss: 9007199254740991 kB\nPss: 4 kB\n",
		"garbage\nmore garbage\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct proc_smaps sm;
		int r = parse_smaps_rollup_buf(bad[i], &sm);
		if (r != -1)
			fprintf(stderr, "  accepted bad smaps #%zu\n", i);
		CHECK_EQ_INT(r, -1);
	}
	/* Fields we do not read may say anything; headers and blank lines pass. */
	struct proc_smaps sm;
	CHECK_EQ_INT(parse_smaps_rollup_buf("00400000-0040b000 r-xp 00000000 fe:00 1 /bin/x (deleted)\n"
	                                    "\nTHPeligible:    0\nVmFlags: rd ex mr mw me\n"
	                                    "ProtectionKey: what\nRss:   8 kB\nPss:  3 kB\n"
	                                    "Swap: 18014398509481983 kB\n", &sm), 0);
	CHECK_EQ_INT(sm.rss_bytes, 8 * KB);
	CHECK_EQ_INT(sm.pss_bytes, 3 * KB);
	CHECK(sm.swap_bytes == 18014398509481983ull * KB);

	/* Streaming by lines gives the same as the whole text. */
	struct smaps_parser p;
	smaps_parser_begin(&p);
	smaps_parser_line(&p, "Rss: 8 kB", 9);
	smaps_parser_line(&p, "Pss: 2 kB trailing", 9);     /* only the first 9 bytes */
	CHECK_EQ_INT(smaps_parser_end(&p, &sm), 0);
	CHECK_EQ_INT(sm.pss_bytes, 2 * KB);
}

static void test_meminfo(void)
{
	char buf[16384];
	struct meminfo mi;
	CHECK(read_file_buf(FIX "/meminfo", buf, sizeof(buf)) > 0);
	CHECK_EQ_INT(parse_meminfo_buf(buf, &mi), 0);
	CHECK_EQ_INT(mi.mem_total_bytes, 24682416 * KB);
	CHECK_EQ_INT(mi.mem_available_bytes, 24209352 * KB);
	CHECK_EQ_INT(mi.cached_bytes, 272248 * KB);    /* not SwapCached */
	CHECK_EQ_INT(mi.swap_total_bytes, 0);
	CHECK(!mi.available_estimated);

	CHECK_EQ_INT(read_meminfo("t/fixtures/proc/old-kernel", &mi), 0);
	CHECK_EQ_INT(mi.mem_total_bytes, 2052356 * KB);
	CHECK(mi.available_estimated);
	CHECK_EQ_INT(mi.mem_available_bytes, (151364 + 101800 + 848644) * KB);
	CHECK_EQ_INT(mi.swap_total_bytes, 4194300 * KB);
	CHECK_EQ_INT(mi.swap_free_bytes, 4161624 * KB);

	CHECK_EQ_INT(parse_meminfo_buf("", &mi), -1);
	CHECK_EQ_INT(parse_meminfo_buf("MemFree: 10 kB\nMemAvailable: 20 kB\n", &mi), -1);
	CHECK_EQ_INT(parse_meminfo_buf("MemTotal: lots\n", &mi), -1);
	CHECK_EQ_INT(parse_meminfo_buf("MemTotal: 100 kB\nMemAvailable: 18446744073709551615 kB\n", &mi), -1);
	/* Huge but representable; a cut final line without "kB" is refused. */
	CHECK_EQ_INT(parse_meminfo_buf("MemTotal: 18014398509481983 kB\nMemFree: 1 kB\n"
	                               "Buffers: 18014398509481983 kB\nCached: 18014398509481983 kB\n", &mi), 0);
	CHECK(mi.available_estimated && mi.mem_available_bytes == UINT64_MAX);   /* saturates */
	CHECK_EQ_INT(parse_meminfo_buf("MemTotal: 100 kB\nMemAvailable: 5", &mi), -1);
}

static void test_pid_list(void)
{
	pid_t v[4];
	CHECK_EQ_INT(parse_pid_list_buf("12\n7\n\n12\n", v, 4), 3);
	CHECK_EQ_INT(v[0], 12);
	CHECK_EQ_INT(v[1], 7);
	CHECK_EQ_INT(v[2], 12);
	CHECK_EQ_INT(parse_pid_list_buf("", v, 4), 0);
	CHECK_EQ_INT(parse_pid_list_buf("1\n2\n3\n4\n5\n6\n", v, 4), 6);  /* counted beyond max */
	CHECK_EQ_INT(v[3], 4);
	CHECK_EQ_INT(parse_pid_list_buf("12a\n", v, 4), -1);
	CHECK_EQ_INT(parse_pid_list_buf("0\n5\n0\n", v, 4), 1);    /* 0: not in our namespace */
	CHECK_EQ_INT(v[0], 5);
	CHECK_EQ_INT(parse_pid_list_buf("-5\n", v, 4), -1);
	CHECK_EQ_INT(parse_pid_list_buf(" 5\n", v, 4), -1);
	CHECK_EQ_INT(parse_pid_list_buf("99999999999\n", v, 4), -1);
}

static void test_loadavg(void)
{
	pid_t pid = 0;
	CHECK_EQ_INT(parse_loadavg_last_pid("0.52 0.58 0.59 3/210 81723\n", &pid), 0);
	CHECK_EQ_INT(pid, 81723);
	CHECK_EQ_INT(parse_loadavg_last_pid("0.52 0.58 0.59 3/210 81723", &pid), -1);   /* cut */
	CHECK_EQ_INT(parse_loadavg_last_pid("0.52 0.58 0.59 3/210 8172x\n", &pid), -1);
	CHECK_EQ_INT(parse_loadavg_last_pid("81723\n", &pid), -1);
	CHECK_EQ_INT(parse_loadavg_last_pid("0.5 1/2 \n", &pid), -1);
	CHECK_EQ_INT(parse_loadavg_last_pid("", &pid), -1);
	/* The real one moves at every fork. */
	char buf[128];
	pid_t before, after;
	CHECK(read_file_buf("/proc/loadavg", buf, sizeof(buf)) > 0);
	CHECK_EQ_INT(parse_loadavg_last_pid(buf, &before), 0);
	fflush(NULL);
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	CHECK(read_file_buf("/proc/loadavg", buf, sizeof(buf)) > 0);
	CHECK_EQ_INT(parse_loadavg_last_pid(buf, &after), 0);
	CHECK(after != before);
	CHECK(waitpid(child, NULL, 0) == child);
}

static void test_readers_fixture(void)
{
	struct proc_stat st;
	CHECK_EQ_INT(read_proc_stat(FIX, 100, &st), 0);
	CHECK_STR(st.comm, "a) Z (b");
	CHECK_EQ_INT(read_proc_stat(FIX, 300, &st), 0);
	CHECK_STR(st.comm, "two\nlines");
	CHECK_EQ_INT(st.ppid, 200);
	errno = 0;
	CHECK_EQ_INT(read_proc_stat(FIX, 400, &st), -1);
	CHECK_EQ_INT(errno, EINVAL);
	errno = 0;
	CHECK_EQ_INT(read_proc_stat(FIX, 4242, &st), -1);
	CHECK_EQ_INT(errno, ENOENT);

	struct proc_statm sm;
	CHECK_EQ_INT(read_proc_statm(FIX, 200, &sm), 0);
	CHECK_EQ_INT(sm.resident_pages, 1000);

	struct proc_smaps sp;
	CHECK_EQ_INT(read_proc_smaps(FIX, 100, &sp), 0);           /* smaps_rollup */
	CHECK_EQ_INT(sp.pss_bytes, 246 * KB);
	CHECK_EQ_INT(read_proc_smaps(FIX, 200, &sp), 0);           /* falls back to smaps */
	CHECK_EQ_INT(sp.pss_bytes, 235 * KB);
	CHECK_EQ_INT(sp.rss_bytes, 1752 * KB);
	CHECK_EQ_INT(read_proc_smaps(FIX, 600, &sp), 0);           /* a 10 kB header line */
	CHECK_EQ_INT(sp.rss_bytes, (1752 + 4) * KB);
	CHECK_EQ_INT(sp.pss_bytes, (235 + 4) * KB);
	CHECK_EQ_INT(sp.private_dirty_bytes, (108 + 4) * KB);
	errno = 0;
	CHECK_EQ_INT(read_proc_smaps(FIX, 4242, &sp), -1);
	CHECK_EQ_INT(errno, ENOENT);

	struct meminfo mi;
	CHECK_EQ_INT(read_meminfo(FIX, &mi), 0);
	CHECK_EQ_INT(mi.mem_free_bytes, 24109120 * KB);
	CHECK_EQ_INT(read_meminfo("t/fixtures/proc/nonexistent", &mi), -1);

	/* whether a process's memory maps can be read: the errno, and the path tried */
	char path[128];
	CHECK_EQ_INT(proc_maps_readable(FIX, 100, path, sizeof(path)), 0);
	CHECK_STR(path, FIX "/100/smaps_rollup");
	CHECK_EQ_INT(proc_maps_readable(FIX, 4242, path, sizeof(path)), ENOENT);
	CHECK_EQ_INT(proc_maps_readable(FIX, 100, path, 8), ENAMETOOLONG);
}

static void test_scan_fixture(void)
{
	struct proc_list list = PROC_LIST_INIT;
	CHECK_EQ_INT(proc_scan(FIX, &list), 6);            /* 400 is cut, sys/version skipped */
	bool seen[7] = { false };
	for (size_t i = 0; i < list.n; i++) {
		int k = list.v[i].pid == 1 ? 0 : list.v[i].pid / 100;
		CHECK(k >= 0 && k <= 6 && k != 4);
		if (k >= 0 && k <= 6)
			seen[k] = true;
		if (list.v[i].pid == 300)
			CHECK_EQ_INT(list.v[i].ppid, 200);
	}
	CHECK(seen[0] && seen[1] && seen[2] && seen[3] && seen[5] && seen[6]);
	CHECK(proc_list_descends(&list, 300, 100));
	CHECK(proc_list_descends(&list, 200, 100));
	CHECK(proc_list_descends(&list, 300, 1));
	CHECK(!proc_list_descends(&list, 100, 100));
	CHECK(!proc_list_descends(&list, 500, 100));
	CHECK(!proc_list_descends(&list, 4242, 1));
	/* The storage is reused. */
	struct proc_entry *v = list.v;
	CHECK_EQ_INT(proc_scan(FIX, &list), 6);
	CHECK(list.v == v);
	proc_list_release(&list);
	CHECK(list.v == NULL && list.n == 0);
	CHECK_EQ_INT(proc_scan("t/fixtures/proc/nonexistent", &list), -1);

	/* readdir's inode is the directory's inode. */
	DIR *d = proc_opendir(FIX);
	CHECK(d != NULL);
	if (!d)
		return;
	pid_t pid;
	uint64_t ino;
	int n = 0;
	while (proc_readdir(d, &pid, &ino) > 0) {
		char path[256];
		struct stat sb;
		snprintf(path, sizeof(path), FIX "/%d", (int)pid);
		CHECK(stat(path, &sb) == 0 && (uint64_t)sb.st_ino == ino);
		n++;
	}
	CHECK_EQ_INT(n, 7);
	closedir(d);
}

/* The kernel behaviour the sampler is built on. */
static void test_real_statm_pread(void)
{
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	struct proc_statm a, b;
	CHECK_EQ_INT(pread_proc_statm(fd, &a), 0);
	size_t len = 32u << 20;
	char *p = tap_map_touched(len);
	CHECK(p != NULL);
	CHECK_EQ_INT(pread_proc_statm(fd, &b), 0);
	long page = sysconf(_SC_PAGESIZE);
	double grew = (double)(b.resident_pages - a.resident_pages) * (double)page;
	CHECK_NEAR(grew, (double)len, 2e6);
	munmap(p, len);
	CHECK_EQ_INT(pread_proc_statm(fd, &b), 0);
	CHECK_NEAR((double)b.resident_pages * (double)page, (double)a.resident_pages * (double)page, 2e6);
	close(fd);

	/* A child: zombie reads as zeros, reaped fails with ESRCH. */
	int go[2];
	CHECK(pipe(go) == 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(go[0]);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ_INT(pread_proc_statm(fd, &a), 0);
	CHECK(a.size_pages > 0 && a.resident_pages > 0);
	close(go[1]);                       /* let it exit */
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) == 0);
	CHECK_EQ_INT(pread_proc_statm(fd, &a), 0);
	CHECK_EQ_INT(a.size_pages, 0);     /* zombie: no mm */
	CHECK_EQ_INT(waitpid(pid, NULL, 0), pid);
	errno = 0;
	CHECK_EQ_INT(pread_proc_statm(fd, &a), -1);
	CHECK_EQ_INT(errno, ESRCH);
	close(fd);
}

/* A real process's environment: whole entries only, wherever the reads
 * cut them (one entry is longer than the reader's buffer). */
static void test_real_environ(void)
{
	static char big[10000];
	memset(big, 'x', sizeof(big) - 1);
	memcpy(big, "BIG=", 4);
	char *env[] = { "A=1", big, "LEAKPROOF_RUN=7", "LEAKPROOF_RUN=8x", NULL };
	int ready[2];
	CHECK_EQ_INT(pipe2(ready, O_CLOEXEC), 0);
	pid_t pid = fork();
	if (pid == 0) {
		execle("/bin/sleep", "sleep", "60", (char *)NULL, env);
		_exit(127);
	}
	close(ready[1]);
	char c;
	CHECK_EQ_INT(read(ready[0], &c, 1), 0);   /* end of file: exec'd (or failed) */
	close(ready[0]);
	CHECK(proc_environ_has(NULL, pid, "A=1"));
	CHECK(proc_environ_has(NULL, pid, big));
	CHECK(proc_environ_has(NULL, pid, "LEAKPROOF_RUN=7"));
	CHECK(!proc_environ_has(NULL, pid, "LEAKPROOF_RUN=70"));
	CHECK(!proc_environ_has(NULL, pid, "LEAKPROOF_RUN="));
	CHECK(!proc_environ_has(NULL, pid, "LEAKPROOF_RUN=8"));
	CHECK(!proc_environ_has(NULL, pid, "A=1x"));
	CHECK(!proc_environ_has(NULL, pid, "BIG=xx"));
	kill(pid, SIGKILL);
	CHECK_EQ_INT(waitpid(pid, NULL, 0), pid);
	CHECK(!proc_environ_has(NULL, pid, "A=1"));   /* gone */
}

static void test_real_readers(void)
{
	struct proc_stat st;
	CHECK_EQ_INT(read_proc_stat(NULL, getpid(), &st), 0);
	CHECK_EQ_INT(st.pid, getpid());
	CHECK_EQ_INT(st.ppid, getppid());
	struct proc_smaps sm;
	CHECK_EQ_INT(read_proc_smaps(NULL, getpid(), &sm), 0);
	CHECK(sm.rss_bytes > 0 && sm.pss_bytes > 0 && sm.pss_bytes <= sm.rss_bytes);
	CHECK(proc_smaps_uss(&sm) <= sm.pss_bytes);
	struct meminfo mi;
	CHECK_EQ_INT(read_meminfo(NULL, &mi), 0);
	CHECK(mi.mem_total_bytes > 0 && mi.mem_available_bytes <= mi.mem_total_bytes);
	struct proc_list list = PROC_LIST_INIT;
	CHECK(proc_scan(NULL, &list) > 1);
	CHECK(proc_list_descends(&list, getpid(), getppid()));
	proc_list_release(&list);
}

TEST_MAIN("proc",
	TEST(test_stat_names),
	TEST(test_stat_garbage),
	TEST(test_statm),
	TEST(test_smaps_rollup),
	TEST(test_smaps_hostile),
	TEST(test_meminfo),
	TEST(test_pid_list),
	TEST(test_loadavg),
	TEST(test_readers_fixture),
	TEST(test_scan_fixture),
	TEST(test_real_statm_pread),
	TEST(test_real_readers),
	TEST(test_real_environ))

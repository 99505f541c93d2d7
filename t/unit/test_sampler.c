/*
 * test_sampler.c — the process-tree sampler.
 *
 * On a fake proc root written into a scratch directory (so every number is
 * known): membership with and without the root, grandchildren, processes
 * that appear, vanish or reuse a PID between walks, the walk skipped while
 * no fork happened, the PSS estimate between smaps_rollup reads and the CPU
 * budget that spaces them, what triggers a re-read, quiet sources read every
 * 100 ms, membership from a cgroup.procs (duplicates, usage v1/v2), and GPU
 * memory through the fake NVML (matched by PID, or the device totals when
 * no PID matches in a PID namespace of our own).
 *
 * On the real /proc: children that touch 64 MiB raise the tree's RSS and
 * PSS by that much; a buffer touched before fork() counts about once in
 * PSS and four times in RSS; a parent read before it forks is re-read after;
 * a child that dies mid-run is dropped without an error; grandchildren and
 * orphans (reparented to this process, a subreaper) are found. Last, the CPU
 * cost of sampling 5 processes is measured and printed, not asserted.
 */
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/sampler.h"
#include "platform/cgroup.h"
#include "platform/nvml.h"
#include "platform/proc.h"
#include "util/util.h"

#define MIB (1024.0 * 1024.0)
#define MS 1000000LL
#define SEC 1000000000LL
#define SCAN (200 * MS)   /* the default membership interval (tree_scan_interval_ns) */

static uint64_t page;

/* ---- a fake proc root ---------------------------------------------------- */

static char fake[64];

static void put(const char *rel, const char *text)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", fake, rel);
	for (char *slash = path + strlen(fake) + 1; (slash = strchr(slash, '/')); slash++) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	/* Rewritten in place (same inode), as the kernel's files change under a
	 * kept descriptor. */
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void put_stat(pid_t pid, const char *name, pid_t ppid, uint64_t minflt)
{
	char rel[64], text[512];
	snprintf(rel, sizeof(rel), "%d/stat", (int)pid);
	snprintf(text, sizeof(text), "%d (%s) S %d %d 1 0 -1 4194304 %llu 0 0 0 1 1 0 0 20 0 1 0 100 "
	         "1000000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
	         (int)pid, name, (int)ppid, (int)ppid, (unsigned long long)minflt);
	put(rel, text);
}

static void put_statm(pid_t pid, uint64_t size_pages, uint64_t resident_pages, uint64_t shared_pages)
{
	char rel[64], text[128];
	snprintf(rel, sizeof(rel), "%d/statm", (int)pid);
	snprintf(text, sizeof(text), "%llu %llu %llu 1 0 100 0\n", (unsigned long long)size_pages,
	         (unsigned long long)resident_pages, (unsigned long long)shared_pages);
	put(rel, text);
}

/* Sizes in kB, as the kernel writes them; anon_kb: its anonymous memory
 * (a fork child shares Anonymous - Private_Dirty of it with its parent);
 * file_kb: of its PSS, mapped files' pages. */
static void put_rollup_of(pid_t pid, unsigned rss_kb, unsigned pss_kb, unsigned priv_kb, unsigned swap_kb,
                          unsigned anon_kb, unsigned file_kb)
{
	char rel[64], text[1024];
	snprintf(rel, sizeof(rel), "%d/smaps_rollup", (int)pid);
	snprintf(text, sizeof(text),
	         "00400000-7fff0000 ---p 00000000 00:00 0 [rollup]\n"
	         "Rss: %u kB\nPss: %u kB\nPss_Anon: %u kB\nPss_File: %u kB\nPss_Shmem: 0 kB\n"
	         "Shared_Clean: %u kB\nShared_Dirty: 0 kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: %u kB\n"
	         "Anonymous: %u kB\nSwap: %u kB\nSwapPss: %u kB\n",
	         rss_kb, pss_kb, pss_kb - file_kb, file_kb, rss_kb - priv_kb, priv_kb, anon_kb, swap_kb, swap_kb);
	put(rel, text);
}

static void put_rollup_anon(pid_t pid, unsigned rss_kb, unsigned pss_kb, unsigned priv_kb, unsigned swap_kb,
                            unsigned anon_kb)
{
	put_rollup_of(pid, rss_kb, pss_kb, priv_kb, swap_kb, anon_kb, 0);
}

static void put_rollup(pid_t pid, unsigned rss_kb, unsigned pss_kb, unsigned priv_kb, unsigned swap_kb)
{
	put_rollup_anon(pid, rss_kb, pss_kb, priv_kb, swap_kb, 0);
}

static void put_rollup_file(pid_t pid, unsigned rss_kb, unsigned pss_kb, unsigned priv_kb, unsigned file_kb)
{
	put_rollup_of(pid, rss_kb, pss_kb, priv_kb, 0, priv_kb, file_kb);
}

/* A process of the fake root: RSS rss_kb, of which priv_kb private. */
static void put_proc(pid_t pid, const char *name, pid_t ppid, unsigned rss_kb, unsigned pss_kb, unsigned priv_kb)
{
	put_stat(pid, name, ppid, 100);
	put_statm(pid, 10000, rss_kb * 1024 / page, (rss_kb - priv_kb) * 1024 / page);
	put_rollup(pid, rss_kb, pss_kb, priv_kb, 0);
}

static void rm_proc(pid_t pid)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/%d'", fake, (int)pid);
	CHECK(system(cmd) == 0);
}

static void fake_setup(void)
{
	snprintf(fake, sizeof(fake), "/tmp/lp-sampler-XXXXXX");
	CHECK(mkdtemp(fake) != NULL);
	put("meminfo", "MemTotal: 1000 kB\n");
	put("sys/kernel/pid_max", "32768\n");
	put_proc(1, "init", 0, 4000, 1000, 500);
	put_proc(10, "leakproof", 1, 2000, 1000, 800);     /* the supervisor */
	put_proc(11, "python", 10, 40000, 30000, 28000);   /* the job */
	put_proc(12, "pt_data_worker", 11, 20000, 8000, 4000);
	put_proc(13, "worker", 12, 8000, 4000, 2000);      /* great-grandchild */
	put_proc(20, "sshd", 1, 6000, 2000, 1000);         /* not ours */
}

static void fake_teardown(void)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fake);
	CHECK(system(cmd) == 0);
}

/* A sampler's configuration for the fake tree: the supervisor is pid 10. */
static void fake_config(struct sampler_config *cfg)
{
	sampler_config_init(cfg);
	cfg->proc_root = fake;
	cfg->root_pid = 10;
	cfg->exclude_root = true;
}

static const struct proc_mem *find_proc(struct sampler *s, pid_t pid)
{
	const struct proc_mem *pm;
	size_t n = sampler_procs(s, &pm);
	for (size_t i = 0; i < n; i++)
		if (pm[i].pid == pid)
			return &pm[i];
	return NULL;
}

static void test_fake_membership(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	struct sampler *s = sampler_new(&cfg);
	CHECK(s != NULL);
	if (!s)
		return;
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	CHECK_EQ_INT(ms.nprocs, 3);
	CHECK_EQ_INT(ms.rss, (40000 + 20000 + 8000) * 1024);
	CHECK_EQ_INT(ms.pss, (30000 + 8000 + 4000) * 1024);
	CHECK_EQ_INT(ms.uss, (28000 + 4000 + 2000) * 1024);
	CHECK(ms.pss_exact);
	CHECK(!ms.has_cgroup && !ms.has_gpu);
	const struct proc_mem *p = find_proc(s, 13);
	CHECK(p != NULL);
	if (p) {
		CHECK_STR(p->name, "worker");
		CHECK_EQ_INT(p->ppid, 12);
		CHECK_EQ_INT(p->pss, 4000 * 1024);
	}
	CHECK(find_proc(s, 10) == NULL && find_proc(s, 20) == NULL && find_proc(s, 1) == NULL);

	/* A new process shows at the next scan, not before. */
	put_proc(14, "worker", 11, 1000, 500, 400);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &ms), 3);
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 4);
	CHECK_EQ_INT(ms.pss, (30000 + 8000 + 4000 + 500) * 1024);
	/* One that vanished (its directory gone) is dropped at the scan. */
	rm_proc(12);
	put_stat(13, "worker", 10, 100);      /* reparented to the subreaper */
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 3);
	CHECK(find_proc(s, 12) == NULL && find_proc(s, 13) != NULL);
	/* A PID reused by a process outside the tree is not ours. */
	put_proc(12, "bash", 1, 3000, 3000, 3000);
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 3);
	CHECK(find_proc(s, 12) == NULL);
	/* An outsider's PID reused by a child of ours between two walks: its
	 * /proc/PID has a new inode, so its stat is read again. (Built beside
	 * the old directory, so the filesystem cannot hand back its inode.) */
	put_proc(21, "worker", 11, 1000, 500, 400);
	char from[160], to[160];
	snprintf(from, sizeof(from), "%s/21", fake);
	snprintf(to, sizeof(to), "%s/20", fake);
	rm_proc(20);
	CHECK(rename(from, to) == 0);
	put_stat(20, "worker", 11, 100);
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 4);
	CHECK(find_proc(s, 20) != NULL);
	sampler_free(s);

	/* With the root included. */
	cfg.exclude_root = false;
	s = sampler_new(&cfg);
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 5);  /* 10, 11, 13, 14, 20 */
	CHECK(find_proc(s, 10) != NULL);
	sampler_free(s);

	/* A root without descendants: empty, not an error. */
	cfg.root_pid = 14;
	cfg.exclude_root = true;
	s = sampler_new(&cfg);
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 0);
	CHECK(!ms.pss_exact && ms.rss == 0);
	sampler_free(s);

	cfg.root_pid = 0;
	CHECK(sampler_new(&cfg) == NULL);
	cfg.root_pid = 10;
	cfg.proc_root = "/nonexistent-proc-root";
	CHECK(sampler_new(&cfg) == NULL);
	fake_teardown();
}

/* A walk of /proc happens only when loadavg's last PID moved (a fork). */
static void test_fake_fork_gate(void)
{
	fake_setup();
	put("loadavg", "0.00 0.01 0.05 1/6 20\n");
	struct sampler_config cfg;
	fake_config(&cfg);
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	put_proc(16, "worker", 11, 1000, 500, 400);
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 3);   /* no fork seen */
	put("loadavg", "0.00 0.01 0.05 1/7 16\n");
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &ms), 3);    /* not yet time */
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 4);
	/* force_exact walks anyway. */
	put_proc(17, "worker", 11, 1000, 500, 400);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, true, &ms), 5);
	/* An unreadable loadavg means: walk every time. */
	put("loadavg", "garbage\n");
	put_proc(18, "worker", 11, 1000, 500, 400);
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 6);
	sampler_free(s);
	fake_teardown();
}

static void test_fake_estimate_budget(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	cfg.pss_cpu_budget = 1e-9;     /* one rollup read, then ~a day of debt */
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;

	/* The budget allows one read before it is spent: the other new
	 * processes are bounded by RSS (PSS) and resident anonymous (USS). */
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	CHECK(!ms.pss_exact);
	int exact = 0;
	const struct proc_mem *pm;
	size_t n = sampler_procs(s, &pm);
	for (size_t i = 0; i < n; i++) {
		uint64_t rss = pm[i].rss;
		CHECK(pm[i].pss <= rss && pm[i].uss <= pm[i].pss);
		exact += pm[i].pss < rss;
	}
	CHECK_EQ_INT(exact, 1);
	int64_t spent = sampler_rollup_ns(s);
	CHECK(spent > 0);

	/* force_exact reads every rollup whatever the budget. */
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, true, &ms), 3);
	CHECK(ms.pss_exact);
	CHECK_EQ_INT(ms.pss, (30000 + 8000 + 4000) * 1024);
	CHECK(sampler_rollup_ns(s) > spent);
	spent = sampler_rollup_ns(s);

	/* 11 grows by 10 MiB of RSS (25% > pss_refresh_fraction) but the budget
	 * is in debt: PSS and USS are estimated as exact + growth. */
	put_statm(11, 10000, (40000 + 10240) * 1024 / page, 12000 * 1024 / page);
	put_rollup(11, 50240, 40240, 38240, 0);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &ms), 3);
	CHECK(!ms.pss_exact);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);
	const struct proc_mem *p = find_proc(s, 11);
	CHECK(p && p->pss == (30000 + 10240) * 1024ull && p->uss == (28000 + 10240) * 1024ull);
	CHECK_EQ_INT(ms.pss, (30000 + 10240 + 8000 + 4000) * 1024);

	/* Shrinking: the estimate falls as RSS does, and clamps at 0. */
	put_statm(13, 10000, 7000 * 1024 / page, 0);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &ms), 3);
	p = find_proc(s, 13);
	CHECK(p && p->pss == 3000 * 1024 && p->uss == 1000 * 1024);
	put_statm(13, 10000, 1000 * 1024 / page, 0);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &ms), 3);
	p = find_proc(s, 13);
	CHECK(p && p->pss == 0 && p->uss == 0);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);
	put_statm(13, 10000, 8000 * 1024 / page, 6000 * 1024 / page);

	/* Once the debt is repaid (budget x time), the moved process is read
	 * again, and only it: the others did not move. */
	t += 10000000 * SEC;
	put_rollup(12, 20000, 9999, 4000, 0);     /* changed, but its RSS did not move */
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	p = find_proc(s, 11);
	CHECK(p && p->pss == 40240 * 1024ull);
	CHECK(find_proc(s, 12)->pss == 8000 * 1024ull);
	CHECK(sampler_rollup_ns(s) > spent);
	sampler_free(s);
	fake_teardown();
}

static void test_fake_refresh_triggers(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	CHECK(ms.pss_exact);

	/* Quiet: nothing moved, nothing is read, PSS is the estimate. */
	int64_t spent = sampler_rollup_ns(s);
	put_rollup(12, 20000, 9000, 4000, 0);
	for (int i = 0; i < 50; i++)
		sampler_sample(s, t += 10 * MS, false, &ms);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);
	CHECK(!ms.pss_exact);
	CHECK_EQ_INT(find_proc(s, 12)->pss, 8000 * 1024);

	/* RSS moves by less than 2%: still nothing. (12 is quiet by now, so
	 * its statm is read within 100 ms.) */
	put_statm(12, 10000, (20000 + 200) * 1024 / page, 16000 * 1024 / page);
	sampler_sample(s, t += 100 * MS, false, &ms);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);
	CHECK_EQ_INT(find_proc(s, 12)->pss, (8000 + 200) * 1024);

	/* Page faults worth more than 2% of RSS (copy on write moves PSS, not
	 * RSS): read at a stat refresh (once a second), at most every 10 s. */
	put_stat(12, "pt_data_worker", 11, 100 + 20000 * 1024 / page);
	t += 1 * SEC;
	sampler_sample(s, t, false, &ms);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);
	CHECK_EQ_INT(find_proc(s, 12)->pss, (8000 + 200) * 1024);
	t += 10 * SEC;
	sampler_sample(s, t, false, &ms);
	CHECK(sampler_rollup_ns(s) > spent);
	CHECK_EQ_INT(find_proc(s, 12)->pss, 9000 * 1024);
	CHECK(find_proc(s, 11)->pss == 30000 * 1024);

	/* Faults taken before a read are in it: a process that filled memory
	 * (RSS +10%, read at once) is not read again 10 s later for the
	 * faults of that filling, which its stat showed only afterwards. */
	put_stat(12, "pt_data_worker", 11, 100 + 40000 * 1024 / page);
	put_statm(12, 10000, 22000 * 1024 / page, 16000 * 1024 / page);
	put_rollup(12, 22000, 11000, 6000, 0);
	spent = sampler_rollup_ns(s);
	sampler_sample(s, t += 100 * MS, false, &ms);
	CHECK(sampler_rollup_ns(s) > spent);
	CHECK_EQ_INT(find_proc(s, 12)->pss, 11000 * 1024);
	spent = sampler_rollup_ns(s);
	for (int i = 0; i < 12; i++)
		sampler_sample(s, t += 1 * SEC, false, &ms);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);

	/* Membership changes: a new child makes its parent's PSS stale (fork
	 * shares its memory), and members that share pages are re-read. */
	put_rollup(11, 40000, 20000, 10000, 0);
	put_rollup(13, 8000, 3000, 2000, 100);
	put_proc(15, "python", 11, 40000, 20000, 10000);
	sampler_sample(s, t += SCAN, false, &ms);
	CHECK_EQ_INT(ms.nprocs, 4);
	CHECK(ms.pss_exact);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 20000 * 1024);
	CHECK_EQ_INT(find_proc(s, 13)->pss, 3000 * 1024);
	CHECK_EQ_INT(find_proc(s, 13)->swap, 100 * 1024);
	CHECK_EQ_INT(ms.swap, 100 * 1024);
	CHECK_EQ_INT(ms.pss, (20000 + 11000 + 3000 + 20000) * 1024);

	/* A renamed process (exec) shows its new name within a second (or
	 * sooner: a rollup read re-reads the stat too). */
	put_stat(15, "torchrun", 11, 100);
	sampler_sample(s, t += 100 * MS, false, &ms);
	sampler_sample(s, t += 1 * SEC, false, &ms);
	CHECK_STR(find_proc(s, 15)->name, "torchrun");

	/* A zombie (no mm: statm all zeros) is not counted. */
	put_statm(15, 0, 0, 0);
	CHECK_EQ_INT(sampler_sample(s, t += 100 * MS, false, &ms), 3);
	CHECK(find_proc(s, 15) == NULL);
	sampler_free(s);
	fake_teardown();
}

/* The fake tree read whole at t, 11 holding 40000 kB (38000 of them
 * anonymous, all its own); then 11 forks 15, and each holds half of it.
 * Returns the tree's PSS before the fork. */
static uint64_t read_then_fork(struct sampler *s, int64_t t)
{
	struct mem_sample ms;
	put_statm(11, 10000, 40000 * 1024 / page, 2000 * 1024 / page);
	put_rollup_anon(11, 40000, 40000, 38000, 0, 38000);
	CHECK_EQ_INT(sampler_sample(s, t, true, &ms), 3);
	CHECK(ms.pss_exact);
	put_stat(15, "python", 11, 100);
	put_statm(15, 10000, 40000 * 1024 / page, 2000 * 1024 / page);
	put_rollup_anon(15, 40000, 20000, 0, 0, 38000);
	put_rollup_anon(11, 40000, 20000, 0, 0, 38000);
	return ms.pss;
}

/* A fork moves the PSS of the parent and of the child at once, but the
 * budget reads them one at a time: until both are read, the samples show
 * the tree as before the fork (a fork adds no memory), never the child's
 * new share next to the parent's old whole (the buffer counted 1.5 times),
 * and then both at once. */
static void test_fake_fork_settles_whole(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	cfg.pss_cpu_budget = 1e-9;     /* one rollup read, then ~a day of debt */
	cfg.settle_max_ns = INT64_MAX / 4;  /* far beyond the debts below */
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	const uint64_t before = read_then_fork(s, t);
	CHECK_EQ_INT(before, (40000 + 8000 + 4000) * 1024);
	int reads = 0;
	for (int i = 0; i < 16 && !(find_proc(s, 15) && find_proc(s, 15)->pss); i++) {
		int64_t spent = sampler_rollup_ns(s);
		t += 10000000 * SEC;   /* the debt repaid: one more read */
		CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 4);
		reads += sampler_rollup_ns(s) > spent;
		CHECK_EQ_INT(ms.pss, before);
		if (!find_proc(s, 15)->pss)      /* shown as its parent's, still */
			CHECK_EQ_INT(find_proc(s, 11)->pss, 40000 * 1024);
	}
	/* both forked processes read (and the other sharers re-read, one at a
	 * time), then shown at once */
	CHECK(reads >= 2);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 20000 * 1024);
	CHECK_EQ_INT(find_proc(s, 15)->pss, 20000 * 1024);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, true, &ms), 4);
	CHECK_EQ_INT(ms.pss, before);
	sampler_free(s);
	fake_teardown();
}

/* A tree whose sharing does not settle within settle_max_ns is shown as
 * read. */
static void test_fake_unsettled_is_shown_in_time(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	cfg.pss_cpu_budget = 1e-9;
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	read_then_fork(s, t);
	t += 10000000 * SEC;           /* one read: the new child */
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 4);
	CHECK_EQ_INT(find_proc(s, 15)->pss, 0);
	/* the parent's read never comes (no credit), but by settle_max_ns the
	 * child is shown as read */
	sampler_sample(s, t += cfg.settle_max_ns, false, &ms);
	CHECK_EQ_INT(find_proc(s, 15)->pss, 20000 * 1024);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 40000 * 1024);
	sampler_free(s);
	fake_teardown();
}

/* At a step boundary a move under 2% of RSS (but of 256 KiB or more) is
 * worth a rollup, at most once a second per member; without steps it is
 * not. */
static void test_fake_step_boundary(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	for (int i = 0; i < 100; i++)
		sampler_sample(s, t += 10 * MS, false, &ms);

	/* +300 KiB: under 2% of 20000 KiB, over the 256 KiB floor */
	put_statm(12, 10000, (20000 + 300) * 1024 / page, 16000 * 1024 / page);
	put_rollup(12, 20300, 8300, 4300, 0);
	int64_t spent = sampler_rollup_ns(s);
	sampler_sample(s, t += 100 * MS, false, &ms);
	sampler_sample(s, t += 100 * MS, false, &ms);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);          /* no step: estimated */
	CHECK(!ms.pss_exact);

	sampler_mark_step(s);
	sampler_sample(s, t += 10 * MS, false, &ms);
	CHECK(sampler_rollup_ns(s) > spent);                /* a step: read */
	CHECK_EQ_INT(find_proc(s, 12)->pss, 8300 * 1024);

	/* again within a second: not read again, even at a step */
	put_statm(12, 10000, (20000 + 600) * 1024 / page, 16000 * 1024 / page);
	put_rollup(12, 20600, 8650, 4600, 0);
	spent = sampler_rollup_ns(s);
	sampler_mark_step(s);
	sampler_sample(s, t += 100 * MS, false, &ms);
	CHECK_EQ_INT(sampler_rollup_ns(s), spent);
	CHECK_EQ_INT(find_proc(s, 12)->pss, (8300 + 300) * 1024);   /* the estimate */
	sampler_mark_step(s);
	sampler_sample(s, t += 900 * MS, false, &ms);
	CHECK(sampler_rollup_ns(s) > spent);
	CHECK_EQ_INT(find_proc(s, 12)->pss, 8650 * 1024);
	sampler_free(s);
	fake_teardown();
}

static void test_fake_cgroup(void)
{
	fake_setup();
	char cg[128];
	snprintf(cg, sizeof(cg), "%s/cg", fake);
	put("cg/cgroup.procs", "11\n13\n11\n10\n20\n");   /* v1 may repeat PIDs */
	put("cg/memory.usage_in_bytes", "123456789\n");
	struct sampler_config cfg;
	fake_config(&cfg);
	cfg.cgroup_dir = cg;
	cfg.cgroup_version = 1;
	struct sampler *s = sampler_new(&cfg);
	CHECK(s != NULL);
	if (!s)
		return;
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	/* Whatever is in the cgroup counts, in the tree or not (20 escaped it). */
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	CHECK(find_proc(s, 11) && find_proc(s, 13) && find_proc(s, 20) && !find_proc(s, 12));
	CHECK(ms.has_cgroup);
	CHECK_EQ_INT(ms.cgroup, 123456789);
	CHECK_EQ_INT(ms.rss, (40000 + 8000 + 6000) * 1024);

	put("cg/cgroup.procs", "13\n");
	put("cg/memory.usage_in_bytes", "1000\n");
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &ms), 3);   /* until the next scan */
	CHECK_EQ_INT(ms.cgroup, 1000);                                   /* usage every tick */
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 1);
	CHECK(find_proc(s, 13) && !find_proc(s, 11));
	put("cg/memory.usage_in_bytes", "garbage\n");
	sampler_sample(s, t += 10 * MS, false, &ms);
	CHECK(!ms.has_cgroup);
	/* More PIDs than the first buffers hold. */
	struct strbuf sb = STRBUF_INIT;
	for (int i = 0; i < 3000; i++)
		strbuf_addf(&sb, "%d\n", i % 2 ? 13 : 11);
	put("cg/cgroup.procs", strbuf_str(&sb));
	strbuf_release(&sb);
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 2);
	sampler_free(s);

	/* v2 reads memory.current; a cgroup without the memory controller
	 * still gives membership. */
	put("cg/memory.current", "4096\n");
	cfg.cgroup_version = 2;
	s = sampler_new(&cfg);
	sampler_sample(s, t, false, &ms);
	CHECK(ms.has_cgroup && ms.cgroup == 4096);
	sampler_free(s);
	char path[160];
	snprintf(path, sizeof(path), "%s/memory.current", cg);
	unlink(path);
	s = sampler_new(&cfg);
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 2);
	CHECK(!ms.has_cgroup);
	sampler_free(s);
	cfg.cgroup_version = 3;
	CHECK(sampler_new(&cfg) == NULL);
	cfg.cgroup_version = 2;
	cfg.cgroup_dir = "/nonexistent-cgroup";
	CHECK(sampler_new(&cfg) == NULL);
	fake_teardown();
}

/* A SLURM job's cgroup (attach --slurm-job): its members are in the
 * cgroups below it (job_5/step_batch/task_0, job_5/step_0/task_0), there
 * is no root process, and slurmstepd, in step_batch itself, is no member. */
static void test_fake_cgroup_tree(void)
{
	fake_setup();
	char cg[128];
	snprintf(cg, sizeof(cg), "%s/job_5", fake);
	put_proc(30, "slurmstepd", 1, 9000, 9000, 9000);
	put("30/comm", "slurmstepd\n");
	put("11/comm", "python\n");
	put("12/comm", "pt_data_worker\n");
	put("13/comm", "worker\n");
	put("job_5/cgroup.procs", "");
	put("job_5/memory.usage_in_bytes", "7777\n");
	put("job_5/step_batch/cgroup.procs", "30\n");
	put("job_5/step_batch/task_0/cgroup.procs", "11\n13\n");
	put("job_5/step_0/cgroup.procs", "30\n");
	put("job_5/step_0/task_0/cgroup.procs", "12\n");
	struct sampler_config cfg;
	sampler_config_init(&cfg);
	cfg.proc_root = fake;
	cfg.cgroup_dir = cg;
	cfg.cgroup_version = 1;
	CHECK(sampler_new(&cfg) == NULL);   /* no root process, one cgroup: refused */
	cfg.cgroup_tree = true;
	cfg.skip_comm = "slurmstepd";
	struct sampler *s = sampler_new(&cfg);
	CHECK(s != NULL);
	if (!s)
		return;
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 3);
	CHECK(find_proc(s, 11) && find_proc(s, 12) && find_proc(s, 13) && !find_proc(s, 30));
	CHECK_EQ_INT(ms.rss, (40000 + 20000 + 8000) * 1024);
	CHECK(ms.has_cgroup && ms.cgroup == 7777);   /* the job's whole usage, at its top */
	/* the step ends: its cgroups go */
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/step_0'", cg);
	CHECK(system(cmd) == 0);
	CHECK_EQ_INT(sampler_sample(s, t += 2 * SEC, false, &ms), 2);
	CHECK(!find_proc(s, 12));
	/* a new task joins */
	put("job_5/step_1/task_0/cgroup.procs", "20\n");
	CHECK_EQ_INT(sampler_sample(s, t += 2 * SEC, false, &ms), 3);
	CHECK(find_proc(s, 20) != NULL);
	sampler_free(s);
	fake_teardown();
}

/* A source whose value has not moved for 500 ms is read every 100 ms, not
 * every tick; cgroup.procs is read after a fork, or every second. */
static void test_fake_quiet(void)
{
	fake_setup();
	char cg[128];
	snprintf(cg, sizeof(cg), "%s/cg", fake);
	put("cg/cgroup.procs", "11\n12\n");
	put("cg/memory.current", "1000000\n");
	put("loadavg", "0.00 0.01 0.05 1/6 20\n");
	struct sampler_config cfg;
	fake_config(&cfg);
	cfg.cgroup_dir = cg;
	cfg.cgroup_version = 2;
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 2);
	CHECK_EQ_INT(ms.rss, 60000 * 1024);

	/* Not quiet yet: every tick is read. */
	put_statm(11, 10000, 50000 * 1024 / page, 12000 * 1024 / page);
	put("cg/memory.current", "2000000\n");
	sampler_sample(s, t += 10 * MS, false, &ms);
	CHECK_EQ_INT(ms.rss, 70000 * 1024);
	CHECK_EQ_INT(ms.cgroup, 2000000);
	/* Unchanged for 500 ms: quiet, read every 100 ms. */
	for (int i = 0; i < 60; i++)
		sampler_sample(s, t += 10 * MS, false, &ms);
	put_statm(11, 10000, 45000 * 1024 / page, 12000 * 1024 / page);
	put("cg/memory.current", "3000000\n");
	int ticks = 0;
	while (ms.rss != 65000 * 1024 && ticks < 20) {
		sampler_sample(s, t += 10 * MS, false, &ms);
		ticks++;
	}
	CHECK(ticks > 1 && ticks <= 10);
	CHECK_EQ_INT(ms.rss, 65000 * 1024);
	CHECK_EQ_INT(ms.cgroup, 3000000);
	/* Moving again: read at every tick. */
	put_statm(11, 10000, 44000 * 1024 / page, 12000 * 1024 / page);
	sampler_sample(s, t += 10 * MS, false, &ms);
	CHECK_EQ_INT(ms.rss, 64000 * 1024);
	/* force_exact reads everything. */
	for (int i = 0; i < 60; i++)
		sampler_sample(s, t += 10 * MS, false, &ms);
	put_statm(11, 10000, 40000 * 1024 / page, 12000 * 1024 / page);
	sampler_sample(s, t += 10 * MS, true, &ms);
	CHECK_EQ_INT(ms.rss, 60000 * 1024);

	/* A process moved into the cgroup without a fork shows within a
	 * second; after a fork, at the next scan. */
	put("cg/cgroup.procs", "11\n12\n13\n");
	CHECK_EQ_INT(sampler_sample(s, t += 200 * MS, false, &ms), 2);
	CHECK_EQ_INT(sampler_sample(s, t += 900 * MS, false, &ms), 3);
	put("cg/cgroup.procs", "11\n12\n13\n14\n");
	put_proc(14, "worker", 13, 1000, 500, 400);
	put("loadavg", "0.00 0.01 0.05 1/7 14\n");
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &ms), 4);
	sampler_free(s);
	fake_teardown();
}

/* ---- GPU through the fake NVML ----------------------------------------- */

static char nvml_data[96];

static void nvml_write(const char *text)
{
	char tmp[128];
	snprintf(tmp, sizeof(tmp), "%s.new", nvml_data);
	FILE *f = fopen(tmp, "w");
	if (f) {
		/* The device count is fixed when NVML opens: always name 3. */
		fprintf(f, "%s%s", text, strstr(text, "device 2 ") ? "" : "device 2 total 1000000 used 0\n");
		fclose(f);
	}
	CHECK(rename(tmp, nvml_data) == 0);
}

static struct nvml *open_fake_nvml(void)
{
	char lib[PATH_MAX], exe[PATH_MAX];
	const char *env = getenv("LEAKPROOF_NVML_LIB");
	if (!env || !*env) {
		ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		lib[0] = '\0';
		if (len > 0) {
			exe[len] = '\0';
			snprintf(lib, sizeof(lib), "%s/libnvidia-ml.so.1", dirname(exe));
		}
		if (!lib[0] || access(lib, R_OK))
			snprintf(lib, sizeof(lib), "build/t/libnvidia-ml.so.1");
		if (access(lib, R_OK))
			return NULL;
		setenv("LEAKPROOF_NVML_LIB", lib, 1);
	}
	snprintf(nvml_data, sizeof(nvml_data), "/tmp/lp-sampler-nvml-%d.txt", (int)getpid());
	setenv("FAKE_NVML_FILE", nvml_data, 1);
	nvml_write("");
	const char *why = NULL;
	return nvml_open(&why);
}

static void test_fake_gpu(void)
{
	struct nvml *nv = open_fake_nvml();
	if (!nv) {
		printf("# skip: no fake NVML library (build it with make)\n");
		return;
	}
	fake_setup();
	nvml_write("process 0 11 5000\nprocess 1 13 700\nprocess 0 999 100000\n"
	           "device 0 total 1000000 used 300000\n");
	struct sampler_config cfg;
	fake_config(&cfg);
	cfg.nvml = nv;
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	sampler_sample(s, t, false, &ms);
	CHECK(ms.has_gpu);
	CHECK_EQ_INT(ms.gpu, 5700);
	CHECK(!sampler_gpu_is_device_total(s));
	CHECK_EQ_INT(find_proc(s, 11)->gpu, 5000);
	CHECK_EQ_INT(find_proc(s, 13)->gpu, 700);

	/* NVML is asked again only every gpu_interval_ns. */
	nvml_write("process 0 11 9000\n");
	sampler_sample(s, t += 100 * MS, false, &ms);
	CHECK_EQ_INT(ms.gpu, 5700);
	sampler_sample(s, t += 500 * MS, false, &ms);
	CHECK_EQ_INT(ms.gpu, 9000);
	CHECK_EQ_INT(find_proc(s, 13)->gpu, 0);
	/* A failing query keeps the last figure. */
	nvml_write("process 0 11 1\nfail processes\n");
	sampler_sample(s, t += 500 * MS, false, &ms);
	CHECK(ms.has_gpu);
	CHECK_EQ_INT(ms.gpu, 9000);

	/* Processes listed, none of ours (another PID namespace): the totals of
	 * the devices they are on. */
	nvml_write("process 1 4242 100\nprocess 2 4343 100\ndevice 0 total 1000000 used 1\n"
	           "device 1 total 1000000 used 300000\ndevice 2 total 1000000 used 50000\n");
	sampler_sample(s, t += 500 * MS, false, &ms);
	CHECK(ms.has_gpu);
	CHECK(sampler_gpu_is_device_total(s));
	CHECK_EQ_INT(ms.gpu, 350000);
	CHECK_EQ_INT(find_proc(s, 11)->gpu, 0);

	/* The same seen from the host's PID namespace: somebody else's. */
	struct sampler *host;
	char link[160];
	put("self/ns/.keep", "");
	snprintf(link, sizeof(link), "%s/self/ns/pid", fake);
	CHECK(symlink("pid:[4026531836]", link) == 0);
	host = sampler_new(&cfg);
	sampler_sample(host, t, false, &ms);
	CHECK(!sampler_gpu_is_device_total(host));
	CHECK(ms.has_gpu && ms.gpu == 0);
	sampler_free(host);
	unlink(link);

	/* Ours, but without sizes (NVML_VALUE_NOT_AVAILABLE): the devices too. */
	nvml_write("process 0 11 unknown\ndevice 0 total 1000000 used 4444\n");
	sampler_sample(s, t += 500 * MS, false, &ms);
	CHECK(sampler_gpu_is_device_total(s));
	CHECK_EQ_INT(ms.gpu, 4444);
	/* No process at all: 0, not the device totals. */
	nvml_write("device 0 total 1000000 used 12345\n");
	sampler_sample(s, t += 500 * MS, false, &ms);
	CHECK(!sampler_gpu_is_device_total(s));
	CHECK_EQ_INT(ms.gpu, 0);
	sampler_free(s);
	nvml_close(nv);
	unlink(nvml_data);
	fake_teardown();
}

/* ---- real processes ------------------------------------------------------ */

struct kid {
	pid_t pid;
	int quit_w;                 /* close it to let the child exit */
};

/* Waits for one byte from fd (a child saying it is ready). */
static void wait_ready(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static void touch(size_t bytes)
{
	if (!tap_map_touched(bytes))
		_exit(2);
}

/*
 * A child that touches before_fork bytes, forks nkids children of its own
 * (which touch nothing more), says "ready" once all are up, touches
 * after_ready bytes when it reads a byte, says "ready" again, and exits with
 * its children when its quit pipe closes.
 */
static struct kid spawn(size_t before_fork, int nkids, int *go_w_out, int *ready_r_out)
{
	int ready[2], quit[2], go[2];
	if (pipe(ready) || pipe(quit) || pipe(go))
		abort();
	struct kid k;
	fflush(NULL);
	k.pid = fork();
	if (k.pid == 0) {
		close(ready[0]);
		close(quit[1]);
		close(go[1]);
		if (before_fork)
			touch(before_fork);
		for (int i = 0; i < nkids; i++) {
			if (fork() == 0) {
				char c;
				if (write(ready[1], "k", 1) < 0 || read(quit[0], &c, 1) < 0)
					_exit(1);
				_exit(0);
			}
		}
		if (write(ready[1], "r", 1) < 0)
			_exit(1);
		char c;
		if (read(go[0], &c, 1) == 1) {
			touch(64u << 20);
			if (write(ready[1], "t", 1) < 0)
				_exit(1);
			if (read(quit[0], &c, 1) < 0)
				_exit(1);
		}
		while (wait(NULL) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(quit[0]);
	close(go[0]);
	for (int i = 0; i < nkids + 1; i++)
		wait_ready(ready[0]);
	k.quit_w = quit[1];
	*ready_r_out = ready[0];
	*go_w_out = go[1];
	return k;
}

static void reap(struct kid *k, int ready_r, int go_w)
{
	close(go_w);
	close(k->quit_w);
	close(ready_r);
	CHECK_EQ_INT(waitpid(k->pid, NULL, 0), k->pid);
}

static struct sampler *real_sampler(void)
{
	struct sampler_config cfg;
	sampler_config_init(&cfg);
	cfg.root_pid = getpid();
	cfg.exclude_root = true;
	return sampler_new(&cfg);
}

static void test_real_private(void)
{
	int go, ready;
	struct kid k = spawn(0, 0, &go, &ready);
	struct sampler *s = real_sampler();
	struct mem_sample a, b, c;
	int64_t t = mono_ns();
	CHECK_EQ_INT(sampler_sample(s, t, true, &a), 1);
	CHECK(a.pss_exact && a.rss > 0 && a.pss > 0 && a.pss <= a.rss && a.uss <= a.pss);
	const struct proc_mem *p = find_proc(s, k.pid);
	CHECK(p && p->ppid == getpid());
	CHECK(write(go, "g", 1) == 1);
	wait_ready(ready);
	/* Through the estimate path: RSS moved far past 2%, the budget has
	 * credit, so the rollup is read again; and through force_exact. */
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &b), 1);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, true, &c), 1);
	printf("# private 64 MiB: rss +%.1f MiB, pss +%.1f MiB, uss +%.1f MiB\n",
	       ((double)c.rss - (double)a.rss) / MIB, ((double)c.pss - (double)a.pss) / MIB,
	       ((double)c.uss - (double)a.uss) / MIB);
	CHECK_NEAR(((double)b.rss - (double)a.rss) / MIB, 64, 3);
	CHECK_NEAR(((double)b.pss - (double)a.pss) / MIB, 64, 3);
	CHECK_NEAR(((double)c.pss - (double)a.pss) / MIB, 64, 3);
	CHECK_NEAR(((double)c.uss - (double)a.uss) / MIB, 64, 3);
	reap(&k, ready, go);
	/* Reaped: gone from the next sample without an error. */
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &a), 0);
	sampler_free(s);
}

/* A parent that touched 64 MiB before forking 3 children: the buffer is in
 * all 4 RSS, but once in PSS. Compared with the same tree without the
 * buffer, so the baseline (and any tool's overhead) cancels. */
static void cow_tree(size_t bytes, bool force, struct mem_sample *out)
{
	int go, ready;
	struct kid k = spawn(bytes, 3, &go, &ready);
	struct sampler *s = real_sampler();
	int64_t t = mono_ns();
	for (int i = 0; i < 3; i++)
		sampler_sample(s, t += 10 * MS, force, out);
	CHECK_EQ_INT(out->nprocs, 4);
	reap(&k, ready, go);
	sampler_free(s);
}

static void test_real_cow(void)
{
	struct mem_sample base, big, est;
	cow_tree(0, true, &base);
	cow_tree(64u << 20, true, &big);
	cow_tree(64u << 20, false, &est);
	double rss = ((double)big.rss - (double)base.rss) / MIB;
	double pss = ((double)big.pss - (double)base.pss) / MIB;
	double uss = ((double)big.uss - (double)base.uss) / MIB;
	double pss_est = ((double)est.pss - (double)base.pss) / MIB;
	printf("# 64 MiB shared by fork with 3 children: rss +%.1f MiB, pss +%.1f MiB "
	       "(budgeted path +%.1f), uss +%.1f MiB\n", rss, pss, pss_est, uss);
	CHECK_NEAR(rss, 4 * 64, 6);
	CHECK_NEAR(pss, 64, 3);
	CHECK_NEAR(pss_est, 64, 3);
	CHECK_NEAR(uss, 0, 3);
}

/* The parent's PSS drops when it forks: the sampler must re-read it. */
static void test_real_fork_after_read(void)
{
	int go[2], ready[2], quit[2];
	CHECK(pipe(go) == 0 && pipe(ready) == 0 && pipe(quit) == 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(go[1]);
		close(ready[0]);
		close(quit[1]);
		touch(64u << 20);
		if (write(ready[1], "r", 1) < 0 || read(go[0], &c, 1) < 0)
			_exit(1);
		for (int i = 0; i < 3; i++)
			if (fork() == 0) {
				if (read(quit[0], &c, 1) < 0)
					_exit(1);
				_exit(0);
			}
		if (write(ready[1], "f", 1) < 0 || read(quit[0], &c, 1) < 0)
			_exit(1);
		while (wait(NULL) > 0)
			;
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	close(quit[0]);
	wait_ready(ready[0]);
	struct sampler *s = real_sampler();
	struct mem_sample a, b, c;
	int64_t t = mono_ns();
	CHECK_EQ_INT(sampler_sample(s, t, false, &a), 1);
	CHECK(a.pss_exact);
	CHECK(write(go[1], "g", 1) == 1);
	wait_ready(ready[0]);
	CHECK_EQ_INT(sampler_sample(s, t += SCAN, false, &b), 4);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, true, &c), 4);
	printf("# parent alone: pss %.1f MiB; after forking 3: pss %.1f MiB (exact %.1f), rss %.1f MiB\n",
	       (double)a.pss / MIB, (double)b.pss / MIB, (double)c.pss / MIB, (double)b.rss / MIB);
	/* Without re-reading the parent, the 64 MiB would count 1 + 3/4 times. */
	CHECK(b.pss_exact);
	CHECK_NEAR(((double)b.pss - (double)c.pss) / MIB, 0, 2);
	CHECK(b.pss < a.pss + (uint64_t)(24 * MIB));
	close(go[1]);
	close(quit[1]);
	close(ready[0]);
	CHECK_EQ_INT(waitpid(pid, NULL, 0), pid);
	sampler_free(s);
}

/* Grandchildren count; a child killed mid-run is dropped; an orphan
 * reparented to this process (a subreaper, like the supervisor) stays. */
static void test_real_tree_changes(void)
{
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	int p2c[2], c2p[2];
	CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		close(p2c[1]);
		close(c2p[0]);
		pid_t gc = fork();
		if (gc == 0) {
			char c;
			touch(32u << 20);
			if (write(c2p[1], "g", 1) < 0 || read(p2c[0], &c, 1) < 0)
				_exit(1);
			_exit(0);
		}
		char c;
		if (write(c2p[1], "c", 1) < 0 || read(p2c[0], &c, 1) < 0)
			_exit(1);
		_exit(0);               /* leaves gc an orphan when told to end */
	}
	close(p2c[0]);
	close(c2p[1]);
	wait_ready(c2p[0]);
	wait_ready(c2p[0]);
	struct sampler *s = real_sampler();
	struct mem_sample ms;
	int64_t t = mono_ns();
	CHECK_EQ_INT(sampler_sample(s, t, false, &ms), 2);
	const struct proc_mem *pm;
	size_t n = sampler_procs(s, &pm);
	pid_t gc = 0;
	for (size_t i = 0; i < n; i++)
		if (pm[i].ppid == child)
			gc = pm[i].pid;
	CHECK(gc > 0);
	CHECK(ms.rss > (uint64_t)(32 * MIB));

	/* The child dies: dropped at the next tick, the orphan is ours. */
	CHECK(kill(child, SIGKILL) == 0);
	CHECK_EQ_INT(waitpid(child, NULL, 0), child);
	CHECK_EQ_INT(sampler_sample(s, t += 10 * MS, false, &ms), 1);
	CHECK(find_proc(s, child) == NULL && find_proc(s, gc) != NULL);
	for (int i = 0; i < 100 && find_proc(s, gc) && find_proc(s, gc)->ppid != getpid(); i++) {
		usleep(10000);
		sampler_sample(s, t += 1 * SEC, false, &ms);
	}
	CHECK(find_proc(s, gc) && find_proc(s, gc)->ppid == getpid());
	CHECK_EQ_INT(sampler_sample(s, t += 200 * MS, false, &ms), 1);

	/* The orphan, quiet by now (read every 100 ms), dies and is reaped. */
	close(p2c[1]);
	CHECK_EQ_INT(waitpid(gc, NULL, 0), gc);
	CHECK_EQ_INT(sampler_sample(s, t += 100 * MS, false, &ms), 0);
	CHECK_EQ_INT(sampler_sample(s, t += 200 * MS, false, &ms), 0);
	close(c2p[0]);
	sampler_free(s);
}

/* ---- a real cgroup, where this machine lets us make one -------------------- */

/* The directory of our own cgroup in the v2 hierarchy (version 2) or the v1
 * memory hierarchy (version 1), from mountinfo and /proc/self/cgroup. */
static bool own_cgroup_dir(int version, char *dir, size_t dirsz)
{
	static char mi[65536], cg[8192];
	if (read_file_buf("/proc/self/mountinfo", mi, sizeof(mi)) < 0 ||
	    read_file_buf("/proc/self/cgroup", cg, sizeof(cg)) < 0)
		return false;
	char mnt[1024] = "", root[1024] = "", path[1024] = "";
	for (char *line = strtok(mi, "\n"); line; line = strtok(NULL, "\n")) {
		char r[1024], m[1024], fstype[64], super[512];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", r, m) != 2 ||
		    sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
			continue;
		bool want = version == 2 ? !strcmp(fstype, "cgroup2") :
		            !strcmp(fstype, "cgroup") && strstr(super, "memory");
		if (want) {
			snprintf(mnt, sizeof(mnt), "%s", m);
			snprintf(root, sizeof(root), "%s", r);
			break;
		}
	}
	for (char *line = strtok(cg, "\n"); line; line = strtok(NULL, "\n")) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		bool want = version == 2 ? !strcmp(c1 + 1, "") : strstr(c1 + 1, "memory") != NULL;
		if (want)
			snprintf(path, sizeof(path), "%s", c2 + 1);
	}
	if (!mnt[0] || !path[0])
		return false;
	size_t rl = strcmp(root, "/") ? strlen(root) : 0;
	if (rl && strncmp(path, root, rl))
		return false;
	snprintf(dir, dirsz, "%s%s", mnt, path + rl);
	return true;
}

static void enter_cgroup(const char *dir, pid_t pid)
{
	char path[4200], text[32];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(text, sizeof(text), "%d\n", (int)pid);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	if (fd >= 0)
		close(fd);
}

/* Membership from a real cgroup.procs keeps up with processes that join it:
 * v1 serves a cached PID list to a descriptor read within a second. */
static void test_real_cgroup(void)
{
	for (int version = 2; version >= 1; version--) {
		char parent[2048], dir[4096];
		if (!own_cgroup_dir(version, parent, sizeof(parent))) {
			printf("# skip: no cgroup v%d hierarchy here\n", version);
			continue;
		}
		snprintf(dir, sizeof(dir), "%s/lp-sampler-test-%d", parent, (int)getpid());
		if (mkdir(dir, 0755) < 0) {
			printf("# skip: cannot make a cgroup v%d here: %s\n", version, strerror(errno));
			continue;
		}
		pid_t pids[2];
		struct sampler_config cfg;
		sampler_config_init(&cfg);
		cfg.root_pid = getpid();
		cfg.exclude_root = true;
		cfg.cgroup_dir = dir;
		cfg.cgroup_version = version;
		struct sampler *s = sampler_new(&cfg);
		CHECK(s != NULL);
		struct mem_sample ms;
		int n[2] = { -1, -1 };
		for (int i = 0; i < 2; i++) {
			fflush(NULL);
			pids[i] = fork();
			if (pids[i] == 0) {
				for (;;)
					pause();
			}
			enter_cgroup(dir, pids[i]);
			usleep(300000);   /* past the membership interval */
			n[i] = s ? sampler_sample(s, mono_ns(), false, &ms) : -1;
		}
		printf("# cgroup v%d: %d then %d processes; usage %s\n", version, n[0], n[1],
		       ms.has_cgroup ? "read" : "absent (no memory controller)");
		CHECK_EQ_INT(n[0], 1);
		CHECK_EQ_INT(n[1], 2);
		for (int i = 0; i < 2; i++) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
		sampler_free(s);
		for (int tries = 0; rmdir(dir) < 0 && errno == EBUSY && tries < 100; tries++)
			usleep(10000);
	}
}

/*
 * Memory that moves fast has its memory.stat read as it moves: a child in
 * the job's cgroup gains 1 MiB (touched) before each of 10 samples 10 ms
 * apart in sampler time; memory.stat is read at most every 200 ms when the
 * usage moves slowly, but a move of 256 KiB or more reads it at once (on
 * the rollups' budget, 5 ms apart at most): nearly every sample sees a new
 * reading, and the last one holds the child's growth.
 */
static void memstat_follows_fast_growth(int version)
{
	char parent[2048], dir[4096];
	if (!own_cgroup_dir(version, parent, sizeof(parent))) {
		printf("# skip: no cgroup v%d hierarchy here\n", version);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/lp-sampler-fast-%d", parent, (int)getpid());
	if (mkdir(dir, 0755) < 0) {
		printf("# skip: cannot make a cgroup here: %s\n", strerror(errno));
		return;
	}
	int go[2], done[2];
	if (pipe(go) < 0 || pipe(done) < 0) {
		CHECK(0);
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(go[1]);
		close(done[0]);
		while (read(go[0], &c, 1) == 1) {
			char *p = malloc(1 << 20);
			for (size_t i = 0; p && i < (1u << 20); i += 4096)
				p[i] = 1;
			if (write(done[1], "k", 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	close(go[0]);
	close(done[1]);
	enter_cgroup(dir, pid);
	struct sampler_config cfg;
	sampler_config_init(&cfg);
	cfg.root_pid = getpid();
	cfg.exclude_root = true;
	cfg.cgroup_dir = dir;
	cfg.cgroup_version = version;
	struct sampler *s = sampler_new(&cfg);
	CHECK(s != NULL);
	struct mem_sample ms;
	struct cgroup_memstat st;
	memset(&st, 0, sizeof(st));
	int64_t t = mono_ns();
	usleep(300000);                          /* past the membership interval */
	t += 300000000;
	sampler_sample(s, t, false, &ms);
	uint64_t first = sampler_job_kinds(s, &st), last = first;
	uint64_t anon0 = st.anon_bytes;
	int fresh = 0;
	for (int i = 0; i < 10; i++) {
		char c;
		if (write(go[1], "g", 1) != 1 || read(done[0], &c, 1) != 1)
			break;
		t += 10000000;
		sampler_sample(s, t, false, &ms);
		uint64_t r = sampler_job_kinds(s, &st);
		fresh += r != last;
		last = r;
	}
	printf("# cgroup v%d: memory.stat read at %d of 10 samples 10 ms apart, each after 1 MiB more;"
	       " its anon %llu -> %llu KiB\n", version, fresh, (unsigned long long)(anon0 >> 10),
	       (unsigned long long)(st.anon_bytes >> 10));
	if (first) {
		CHECK(fresh >= 8);
		CHECK(st.anon_bytes >= anon0 + (8u << 20));
	} else {
		printf("# skip: no memory.stat in cgroup v%d (no memory controller)\n", version);
	}
	close(go[1]);
	waitpid(pid, NULL, 0);
	close(done[0]);
	sampler_free(s);
	for (int tries = 0; rmdir(dir) < 0 && errno == EBUSY && tries < 100; tries++)
		usleep(10000);
}

static void test_real_cgroup_memstat_follows_fast_growth(void)
{
	memstat_follows_fast_growth(2);
	memstat_follows_fast_growth(1);
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* 5 processes: idle (blocked in pause()), or busy (each touches and gives
 * back one page every millisecond, so its RSS is never the same twice). */
static void spawn_five(pid_t pids[5], bool busy)
{
	int ready[2];
	if (pipe(ready))
		abort();
	for (int i = 0; i < 5; i++) {
		fflush(NULL);
		pids[i] = fork();
		if (pids[i] == 0) {
			touch(8u << 20);
			if (write(ready[1], "r", 1) < 0)
				_exit(1);
			char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			while (busy && p != MAP_FAILED) {
				p[0] = 1;
				usleep(1000);
				madvise(p, 4096, MADV_DONTNEED);
				usleep(1000);
			}
			for (;;)
				pause();
		}
	}
	close(ready[1]);
	for (int i = 0; i < 5; i++)
		wait_ready(ready[0]);
	close(ready[0]);
}

static void kill_five(pid_t pids[5])
{
	for (int i = 0; i < 5; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
}

/*
 * A real 100 Hz loop for one second (absolute sleeps, like a timerfd): the
 * thread's CPU time per tick, the sleeping and waking included, with or
 * without a sampler_sample() per tick; and the sampler's share alone.
 */
static void real_loop(struct sampler *s, int64_t *tick_ns, int64_t *sample_ns)
{
	enum { HZ = 100, N = 100 };
	struct mem_sample ms;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	int64_t in = 0, c0 = thread_cpu_ns();
	for (int i = 0; i < N; i++) {
		next.tv_nsec += 1000000000 / HZ;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (s) {
			int64_t a = thread_cpu_ns();
			sampler_sample(s, mono_ns(), false, &ms);
			in += thread_cpu_ns() - a;
		}
	}
	*tick_ns = (thread_cpu_ns() - c0) / N;
	*sample_ns = in / N;
}

/* Not a pass/fail check: the CPU cost of sampling 5 processes. */
static void test_real_tick_cost(void)
{
	pid_t pids[5];
	spawn_five(pids, false);
	struct sampler *s = real_sampler();
	struct mem_sample ms;
	int64_t t = mono_ns();
	for (int i = 0; i < 100; i++)
		sampler_sample(s, t += 10 * MS, false, &ms);
	CHECK_EQ_INT(ms.nprocs, 5);
	int64_t rollups = sampler_rollup_ns(s);
	enum { TICKS = 3000 };
	int64_t c0 = thread_cpu_ns();
	for (int i = 0; i < TICKS; i++)
		sampler_sample(s, t += 10 * MS, false, &ms);
	int64_t c1 = thread_cpu_ns();
	/* Idle processes: no smaps_rollup in the steady state. */
	CHECK_EQ_INT(sampler_rollup_ns(s), rollups);
	printf("# tick cost, 5 idle processes, back to back, 10 ms apart in sampler time: %lld ns\n",
	       (long long)((c1 - c0) / TICKS));
	c0 = thread_cpu_ns();
	for (int i = 0; i < 100; i++)
		sampler_sample(s, t += 10 * MS, true, &ms);
	c1 = thread_cpu_ns();
	printf("# force_exact sample, 5 processes of ~10 MiB: %lld ns\n", (long long)((c1 - c0) / 100));

	sampler_free(s);

	/* Real time from here: a fresh sampler, its sources quiet after 0.5 s. */
	int64_t bare, none, idle_tick, idle_in, busy_tick, busy_in;
	s = real_sampler();
	sampler_sample(s, mono_ns(), false, &ms);
	real_loop(NULL, &bare, &none);
	real_loop(s, &idle_tick, &idle_in);        /* the first 0.5 s: not quiet yet */
	real_loop(s, &idle_tick, &idle_in);
	CHECK_EQ_INT(ms.nprocs, 5);
	sampler_free(s);
	kill_five(pids);

	spawn_five(pids, true);
	s = real_sampler();
	sampler_sample(s, mono_ns(), false, &ms);
	real_loop(s, &busy_tick, &busy_in);
	CHECK_EQ_INT(ms.nprocs, 5);
	sampler_free(s);
	kill_five(pids);
	/* The whole loop's CPU is noisy under a hypervisor; the sampler's own
	 * share is steady, so the ratio is (bare + share) / bare. */
	printf("# real 100 Hz loop, CPU per tick: bare %lld ns; 5 idle processes %lld ns, of which "
	       "sampler %lld ns (x%.2f); 5 busy %lld ns, of which sampler %lld ns (x%.2f)\n",
	       (long long)bare, (long long)idle_tick, (long long)idle_in,
	       (double)(bare + idle_in) / (double)bare, (long long)busy_tick, (long long)busy_in,
	       (double)(bare + busy_in) / (double)bare);
}

/*
 * A process outside the tree that maps the same files as the job (another
 * PyTorch process on the machine) starts or ends: the job's Pss_File moves
 * though nothing in the tree did. The samples hold still. The same move
 * that comes with a sibling mapping those pages, or with a member coming
 * or going, is the tree's own, and shown as read.
 */
static void test_fake_outsiders_sharing_is_not_the_jobs(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	put_rollup_file(11, 40000, 30000, 28000, 10000);
	CHECK_EQ_INT(sampler_sample(s, t, true, &ms), 3);
	const uint64_t before = ms.pss;
	CHECK_EQ_INT(find_proc(s, 11)->pss, 30000 * 1024);

	/* the outsider ends: 11's share of the files doubles, nobody's
	 * resident pages moved */
	put_rollup_file(11, 40000, 40000, 28000, 20000);
	sampler_sample(s, t += SEC, true, &ms);
	CHECK_EQ_INT(ms.pss, before);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 30000 * 1024);
	CHECK_EQ_INT(find_proc(s, 11)->file, 10000 * 1024);
	/* and starts again: back where it was, still the same */
	put_rollup_file(11, 40000, 30000, 28000, 10000);
	sampler_sample(s, t += SEC, true, &ms);
	CHECK_EQ_INT(ms.pss, before);

	/* the job maps 4000 kB more of the files itself, shared with the
	 * outsider: its own resident pages moved, so its PSS is as read */
	put_statm(11, 10000, 44000 * 1024 / page, 16000 * 1024 / page);
	put_rollup_file(11, 44000, 32000, 28000, 12000);
	sampler_sample(s, t += SEC, true, &ms);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 32000 * 1024);

	/* a sibling (12) maps 8000 kB of the job's files: 11's share falls
	 * by 4000 kB without its own pages moving, but 12's moved; shown as
	 * read */
	put_statm(12, 10000, 28000 * 1024 / page, 24000 * 1024 / page);
	put_rollup_file(12, 28000, 12000, 4000, 4000);
	put_rollup_file(11, 44000, 28000, 28000, 8000);
	sampler_sample(s, t += SEC, true, &ms);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 28000 * 1024);
	CHECK_EQ_INT(find_proc(s, 12)->pss, 12000 * 1024);

	/* a member ends (13): whatever moved with it is the tree's */
	rm_proc(13);
	put_rollup_file(11, 44000, 30000, 28000, 10000);
	sampler_sample(s, t += SEC, true, &ms);
	CHECK_EQ_INT(ms.nprocs, 2);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 30000 * 1024);
	sampler_free(s);
	fake_teardown();
}

/* the share an outsider left goes with the pages when the job unmaps them */
static void test_fake_outsiders_share_leaves_with_the_pages(void)
{
	fake_setup();
	struct sampler_config cfg;
	fake_config(&cfg);
	struct sampler *s = sampler_new(&cfg);
	struct mem_sample ms;
	int64_t t = 5 * SEC;
	put_rollup_file(11, 40000, 30000, 28000, 10000);
	sampler_sample(s, t, true, &ms);
	put_rollup_file(11, 40000, 40000, 28000, 20000);   /* the outsider ends */
	sampler_sample(s, t += SEC, true, &ms);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 30000 * 1024);
	/* the job unmaps its files: only its private 28000 kB are left */
	put_statm(11, 10000, 28000 * 1024 / page, 0);
	put_rollup_file(11, 28000, 28000, 28000, 0);
	sampler_sample(s, t += SEC, true, &ms);
	CHECK_EQ_INT(find_proc(s, 11)->pss, 28000 * 1024);
	sampler_free(s);
	fake_teardown();
}

static void setup(void)
{
	page = (uint64_t)sysconf(_SC_PAGESIZE);
}

static void test_setup(void) { setup(); CHECK(page >= 4096); }

TEST_MAIN("sampler",
	TEST(test_setup),
	TEST(test_fake_membership),
	TEST(test_fake_fork_gate),
	TEST(test_fake_estimate_budget),
	TEST(test_fake_fork_settles_whole),
	TEST(test_fake_unsettled_is_shown_in_time),
	TEST(test_fake_refresh_triggers),
	TEST(test_fake_step_boundary),
	TEST(test_fake_cgroup),
	TEST(test_fake_cgroup_tree),
	TEST(test_fake_quiet),
	TEST(test_fake_outsiders_sharing_is_not_the_jobs),
	TEST(test_fake_outsiders_share_leaves_with_the_pages),
	TEST(test_fake_gpu),
	TEST(test_real_private),
	TEST(test_real_cow),
	TEST(test_real_fork_after_read),
	TEST(test_real_tree_changes),
	TEST(test_real_cgroup),
	TEST(test_real_cgroup_memstat_follows_fast_growth),
	TEST(test_real_tick_cost))

/*
 * test_store_faults.c — store faults lose nothing silently. A failing
 * SQLite VFS, registered as the default in this test alone, wraps the
 * system's ("unix") and fails the Nth write, sync or truncate of any file
 * SQLite writes (the store, its write-ahead log, temporary files), once or
 * from then on (a full disk). A small run is written through the store's
 * interface as the supervisor writes it, for every N up to the number of
 * writes it makes, and each must end in the data written, or a message
 * and, where the run began, a run that no reader takes for whole: marked
 * partial, or not ended. Never a crash (the ASan build runs it too), never
 * a refusal without a message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store.h"
#include "util/util.h"
#include "tap.h"

/* ---- the failing VFS ------------------------------------------------------ */

static sqlite3_vfs *real_vfs;
static long fault_writes;    /* writes, syncs and truncates seen */
static long fault_at;        /* the one that fails (1-based); 0: none */
static bool fault_sticky;    /* and every one after it */
static int fault_rc;         /* SQLITE_IOERR_WRITE or SQLITE_FULL */

struct faulty_file {
	sqlite3_file base;
	sqlite3_file *real;   /* of real_vfs->szOsFile bytes, after this */
};

static bool fault_now(void)
{
	fault_writes++;
	return fault_at && (fault_writes == fault_at || (fault_sticky && fault_writes > fault_at));
}

#define REAL(f) (((struct faulty_file *)(f))->real)

static int f_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int f_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xRead(REAL(f), b, n, o); }
/* A full disk (SQLITE_FULL, sticky) fails only what needs more space:
 * writes past the end of a file; writing over what a file holds, and
 * syncing, still work, as on a real file system. */
static bool grows(sqlite3_file *f, sqlite3_int64 end)
{
	sqlite3_int64 size = 0;
	return REAL(f)->pMethods->xFileSize(REAL(f), &size) != SQLITE_OK || end > size;
}
static int f_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	bool full_disk = fault_rc == SQLITE_FULL && fault_sticky;
	if (fault_now() && (!full_disk || grows(f, o + n)))
		return fault_rc;
	return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	bool full_disk = fault_rc == SQLITE_FULL && fault_sticky;
	if (fault_now() && (!full_disk || grows(f, size)))
		return full_disk ? SQLITE_FULL : SQLITE_IOERR_TRUNCATE;
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags)
{
	bool full_disk = fault_rc == SQLITE_FULL && fault_sticky;
	if (fault_now() && !full_disk)
		return SQLITE_IOERR_FSYNC;
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *s) { return REAL(f)->pMethods->xFileSize(REAL(f), s); }
static int f_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int f_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int f_check(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int f_fcntl(sqlite3_file *f, int op, void *a) { return REAL(f)->pMethods->xFileControl(REAL(f), op, a); }
static int f_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int f_devchar(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int f_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **p)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, p);
}
static int f_shmlock(sqlite3_file *f, int off, int n, int flags) { return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags); }
static void f_shmbarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int f_shmunmap(sqlite3_file *f, int del) { return REAL(f)->pMethods->xShmUnmap(REAL(f), del); }

/* Version 2 methods: no mmap of the file, so every write is an xWrite. */
static const sqlite3_io_methods faulty_methods = {
	2, f_close, f_read, f_write, f_truncate, f_sync, f_size, f_lock, f_unlock, f_check,
	f_fcntl, f_sector, f_devchar, f_shmmap, f_shmlock, f_shmbarrier, f_shmunmap, NULL, NULL,
};

static int f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
	(void)vfs;
	struct faulty_file *ff = (struct faulty_file *)f;
	ff->real = (sqlite3_file *)(ff + 1);
	int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out);
	ff->base.pMethods = rc == SQLITE_OK && ff->real->pMethods ? &faulty_methods : NULL;
	return rc;
}

static int v_delete(sqlite3_vfs *v, const char *n, int s) { (void)v; return real_vfs->xDelete(real_vfs, n, s); }
static int v_access(sqlite3_vfs *v, const char *n, int fl, int *r) { (void)v; return real_vfs->xAccess(real_vfs, n, fl, r); }
static int v_full(sqlite3_vfs *v, const char *n, int sz, char *o) { (void)v; return real_vfs->xFullPathname(real_vfs, n, sz, o); }
static void *v_dlopen(sqlite3_vfs *v, const char *n) { (void)v; return real_vfs->xDlOpen(real_vfs, n); }
static void v_dlerror(sqlite3_vfs *v, int n, char *m) { (void)v; real_vfs->xDlError(real_vfs, n, m); }
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *s))(void) { (void)v; return real_vfs->xDlSym(real_vfs, h, s); }
static void v_dlclose(sqlite3_vfs *v, void *h) { (void)v; real_vfs->xDlClose(real_vfs, h); }
static int v_random(sqlite3_vfs *v, int n, char *o) { (void)v; return real_vfs->xRandomness(real_vfs, n, o); }
static int v_sleep(sqlite3_vfs *v, int us) { (void)v; return real_vfs->xSleep(real_vfs, us); }
static int v_time(sqlite3_vfs *v, double *t) { (void)v; return real_vfs->xCurrentTime(real_vfs, t); }
static int v_lasterr(sqlite3_vfs *v, int n, char *m) { (void)v; return real_vfs->xGetLastError(real_vfs, n, m); }

static sqlite3_vfs faulty_vfs = {
	1, 0, 0, NULL, "faulty", NULL,
	f_open, v_delete, v_access, v_full, v_dlopen, v_dlerror, v_dlsym, v_dlclose,
	v_random, v_sleep, v_time, v_lasterr, NULL, NULL, NULL, NULL,
};

static void faulty_register(void)
{
	if (real_vfs)
		return;
	sqlite3_initialize();
	real_vfs = sqlite3_vfs_find("unix");
	faulty_vfs.szOsFile = (int)sizeof(struct faulty_file) + real_vfs->szOsFile;
	faulty_vfs.mxPathname = real_vfs->mxPathname;
	sqlite3_vfs_register(&faulty_vfs, 1);   /* the default from now on */
}

/* ---- the run ------------------------------------------------------------- */

static char tmpdir[64];

#define NSAMPLES 300
#define NSTEPS 60
#define FLUSH_EVERY 100     /* samples: three flushes, as three seconds would */

/* What writing the run came to. */
struct outcome {
	bool opened, begun;
	int64_t run_id;
	bool said;               /* a message on stderr */
	bool said_end;           /* that the run's end could not be written */
	char said_text[512];
};

/* Write a small run to a new store at path, as the supervisor does. */
static void write_run(const char *path, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	capture_begin();
	struct store *st = store_open(path);
	if (st) {
		o->opened = true;
		struct run_begin rb = {
			.started_at = 1700000000, .command_json = "[\"train\"]", .cwd = "/", .hostname = "h",
			.measure = MEASURE_PSS, .interval_ns = 10000000, .limit_source = "machine",
			.cgroup_mode = "none",
		};
		o->run_id = store_run_begin(st, &rb);
		o->begun = o->run_id > 0;
	}
	if (o->begun) {
		int64_t steps = 0;
		for (int i = 0; i < NSAMPLES; i++) {
			struct mem_sample m = { .t = i * 0.01, .nprocs = 1, .rss = 1000 + (uint64_t)i,
			                        .pss = 900 + (uint64_t)i, .uss = 800, .pss_exact = true };
			store_add_sample(st, o->run_id, &m);
			if (i % (NSAMPLES / NSTEPS) == 0) {
				struct step_rec r = { .step = steps++, .epoch = -1, .mem = m };
				store_add_step(st, o->run_id, &r);
				store_add_metric(st, o->run_id, r.step, m.t, "loss", 1.0 / (double)(i + 1));
			}
			if (i % 50 == 0)
				store_add_proc_sample(st, o->run_id, m.t, 10, 1, "python3", 1, 2, 3, 4, 0);
			if (i % FLUSH_EVERY == FLUSH_EVERY - 1)
				store_flush(st);
		}
		store_add_event(st, o->run_id, 3.0, "exit", "code 0");
		store_add_result(st, o->run_id, "accuracy", 0.9);
		store_flush(st);
		struct run_end re = { .ended_at = 1700000003, .status = RUN_DONE, .step_source = STEP_SOURCE_REGEX,
		                      .steps = steps, .verdict = "no-leak" };
		store_run_end(st, o->run_id, &re);
	}
	store_close(st);
	const char *err = capture_end();
	o->said = strstr(err, "leakproof: ") != NULL;
	o->said_end = strstr(err, "leakproof: cannot write the end of run ") != NULL;
	snprintf(o->said_text, sizeof(o->said_text), "%.500s", err);
}

/* Read the run back with no fault and check the rule. Returns false when
 * broken (with a diagnostic). */
static bool check_run(const char *path, const struct outcome *o, const char *how)
{
	if (!o->opened || !o->begun) {
		if (o->said)
			return true;
		fprintf(stderr, "  %s: the run was refused without a message\n", how);
		return false;
	}
	capture_begin();
	struct store *st = store_open_readonly(path);
	struct run_row r;
	int got = st ? store_get_run(st, o->run_id, &r) : -1;
	struct mem_sample *samples = NULL;
	struct step_rec *steps = NULL;
	size_t nsamples = 0, nsteps = 0;
	if (got == 0) {
		store_load_samples(st, o->run_id, &samples, &nsamples);
		store_load_steps(st, o->run_id, &steps, &nsteps);
	}
	const char *err = capture_end();
	bool ok = true;
	if (got != 0) {
		/* the run's beginning was committed: it must be there */
		fprintf(stderr, "  %s: the run cannot be read back (%d): %s\n", how, got, err);
		ok = false;
	} else if (r.ended_at <= 0) {
		/* not ended: `ls` says running, nobody takes it for whole */
		if (!o->said_end) {
			fprintf(stderr, "  %s: the run's end was lost without saying so\n", how);
			ok = false;
		}
	} else if (!r.lost[0]) {
		if (nsamples != NSAMPLES || nsteps != NSTEPS) {
			fprintf(stderr, "  %s: a run presented as whole holds %zu of %d samples, %zu of %d steps\n",
			        how, nsamples, NSAMPLES, nsteps, NSTEPS);
			ok = false;
		}
	} else if (!o->said) {
		fprintf(stderr, "  %s: marked partial without a message\n", how);
		ok = false;
	} else if (nsteps < NSTEPS && !strstr(r.lost, "steps")) {
		fprintf(stderr, "  %s: %zu of %d steps, but lost says '%s'\n", how, nsteps, NSTEPS, r.lost);
		ok = false;
	}
	if (got == 0)
		run_row_release(&r);
	free(samples);
	free(steps);
	store_close(st);
	return ok;
}

/* $LEAKPROOF_FAULT_STRIDE=K fails every Kth write only (the first, the
 * K+1th, ...; from the second one on when the failure sticks, so the two
 * loops cover other writes): the valgrind pass of scripts/test, where one
 * run of the store costs a second; AddressSanitizer fails every one. */
static long fault_stride(void)
{
	const char *e = getenv("LEAKPROOF_FAULT_STRIDE");
	long k = e ? strtol(e, NULL, 10) : 1;
	return k >= 1 ? k : 1;
}

/* Every write of the run failing in turn: once, then from there on. */
static void run_faults(int rc, const char *rcname)
{
	char path[128];
	struct outcome o;
	faulty_register();

	snprintf(path, sizeof(path), "%s/count-%d.db", tmpdir, rc);
	fault_at = 0;
	fault_writes = 0;
	write_run(path, &o);
	long total = fault_writes;
	CHECK(o.begun && !o.said);
	CHECK(check_run(path, &o, "no fault"));
	CHECK(total > 20);

	int whole = 0, partial = 0, refused = 0, unended = 0, broken = 0;
	long stride = fault_stride();
	for (int sticky = 0; sticky <= 1; sticky++) {
		for (long n = 1 + sticky % stride; n <= total; n += stride) {
			char how[96];
			snprintf(how, sizeof(how), "%s at write %ld of %ld%s", rcname, n, total, sticky ? " and after" : "");
			snprintf(path, sizeof(path), "%s/f-%d-%d-%ld.db", tmpdir, rc, sticky, n);
			fault_at = n;
			fault_sticky = sticky;
			fault_rc = rc;
			fault_writes = 0;
			write_run(path, &o);
			fault_at = 0;
			if (!check_run(path, &o, how)) {
				broken++;
				fprintf(stderr, "    (stderr: %s)\n", o.said_text);
				continue;
			}
			if (!o.opened || !o.begun) {
				refused++;
				continue;
			}
			struct store *st = store_open_readonly(path);
			struct run_row r;
			if (st && store_get_run(st, o.run_id, &r) == 0) {
				if (r.ended_at <= 0)
					unended++;
				else if (r.lost[0])
					partial++;
				else
					whole++;
				run_row_release(&r);
			}
			store_close(st);
		}
	}
	CHECK_EQ_INT(broken, 0);
	CHECK(partial > 0);
	CHECK(refused > 0);
	if (rc == SQLITE_FULL)   /* room made by a checkpoint: most runs end whole */
		CHECK(whole > partial);
	printf("# %s: %ld writes; of %d faults: %d whole, %d partial, %d not ended, %d refused with a message\n",
	       rcname, total, whole + partial + unended + refused, whole, partial, unended, refused);
}

static void test_io_errors(void)
{
	run_faults(SQLITE_IOERR_WRITE, "I/O error");
}

static void test_disk_full(void)
{
	run_faults(SQLITE_FULL, "disk full");
}

/* A partial run says what is missing, in words a reader can act on. */
static void test_partial_says_what(void)
{
	char path[128];
	struct outcome o;
	faulty_register();
	snprintf(path, sizeof(path), "%s/count2.db", tmpdir);
	fault_at = 0;
	fault_writes = 0;
	write_run(path, &o);
	long total = fault_writes;
	/* a write fails in the last flush of rows: find a fault that leaves
	 * the run ended and partial, with steps stored before it */
	bool found = false;
	for (long n = total; n > 0 && !found; n--) {
		snprintf(path, sizeof(path), "%s/p-%ld.db", tmpdir, n);
		fault_at = n;
		fault_sticky = false;
		fault_rc = SQLITE_IOERR_WRITE;
		fault_writes = 0;
		write_run(path, &o);
		fault_at = 0;
		struct store *st = o.begun ? store_open_readonly(path) : NULL;
		struct run_row r;
		if (st && store_get_run(st, o.run_id, &r) == 0) {
			if (r.ended_at > 0 && strstr(r.lost, "steps after ")) {
				found = true;
				CHECK(strstr(r.lost, "were not stored (") != NULL);
				CHECK(strstr(r.lost, "disk I/O error") != NULL);
				CHECK(strstr(o.said_text, "the run will be marked partial") != NULL);
				printf("# lost: %s\n", r.lost);
			}
			run_row_release(&r);
		}
		store_close(st);
	}
	CHECK(found);
}

int main(void)
{
	/* in memory where there is a tmpfs: a thousand stores, each synced */
	struct stat sb;
	snprintf(tmpdir, sizeof(tmpdir), "%s/lp-faults-XXXXXX", stat("/dev/shm", &sb) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(tmpdir))
		return 1;
	static const struct tap_test tests[] = {
		TEST(test_io_errors),
		TEST(test_disk_full),
		TEST(test_partial_says_what),
	};
	int rc = tap_run("store_faults", tests, (int)(sizeof(tests) / sizeof(tests[0])));
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}

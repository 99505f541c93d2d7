/*
 * schema.c — the store's schema: its versions, the migrations that take a
 * store from one to the next, and the check that a store is one this build
 * can use.
 *
 * The schema version is kept by the backend (SQLite: PRAGMA user_version;
 * see db.h get_version). migrations[] holds the SQL that takes version i to
 * i + 1 and is only ever appended to; opening a store for writing runs the
 * missing ones, each in its own transaction that also writes the new
 * version. An empty store is version 0: creating a store is migrating it
 * from nothing. The SQL is shared by every backend; what one must translate
 * is in docs/internals/store.md. Layout and contracts: the same file.
 */
#include "store/internal.h"

#include <stdio.h>

/*
 * migrations[i] takes a store from user_version i to i + 1. Append only:
 * never edit a released entry, never drop user data.
 */
static const char *const migrations[] = {
	/* 1: the first schema */
	"CREATE TABLE runs ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  started_at REAL NOT NULL,"
	"  ended_at REAL,"                       /* NULL while running */
	"  command TEXT NOT NULL,"               /* JSON array of the argv */
	"  cwd TEXT,"
	"  hostname TEXT,"
	"  measure TEXT NOT NULL,"               /* pss, rss, uss, cgroup, gpu */
	"  interval_ns INTEGER NOT NULL DEFAULT 0,"
	"  limit_bytes INTEGER NOT NULL DEFAULT 0,"
	"  limit_source TEXT,"
	"  mem_total_bytes INTEGER NOT NULL DEFAULT 0,"
	"  cgroup_mode TEXT,"
	"  step_regex TEXT,"
	"  status TEXT NOT NULL DEFAULT 'running',"
	"  exit_code INTEGER,"
	"  exit_signal INTEGER,"
	"  step_source TEXT NOT NULL DEFAULT 'none',"
	"  steps INTEGER NOT NULL DEFAULT 0,"
	"  bad_lines INTEGER NOT NULL DEFAULT 0,"
	"  long_lines INTEGER NOT NULL DEFAULT 0,"
	"  peak_bytes INTEGER NOT NULL DEFAULT 0,"
	"  verdict TEXT,"
	"  growth_bytes_per_step REAL"
	");"
	"CREATE TABLE segments ("
	"  run_id INTEGER NOT NULL REFERENCES runs(id),"
	"  seq INTEGER NOT NULL,"                /* 0 for the first start */
	"  pid INTEGER,"
	"  started_at REAL NOT NULL,"
	"  ended_at REAL,"
	"  exit_code INTEGER,"
	"  exit_signal INTEGER,"
	"  cause TEXT,"                          /* why it ended: exit, signal, oom, ... */
	"  evidence TEXT,"
	"  PRIMARY KEY (run_id, seq)"
	");"
	"CREATE TABLE samples ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  nprocs INTEGER NOT NULL,"
	"  rss INTEGER NOT NULL, pss INTEGER NOT NULL, uss INTEGER NOT NULL, swap INTEGER NOT NULL,"
	"  cgroup INTEGER,"                      /* NULL when not measured */
	"  gpu INTEGER,"                         /* NULL when not measured */
	"  pss_exact INTEGER NOT NULL DEFAULT 1"
	");"
	"CREATE INDEX samples_run ON samples(run_id, t);"
	"CREATE TABLE proc_samples ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  pid INTEGER NOT NULL, ppid INTEGER NOT NULL, name TEXT NOT NULL,"
	"  rss INTEGER NOT NULL, pss INTEGER NOT NULL, uss INTEGER NOT NULL, swap INTEGER NOT NULL,"
	"  gpu INTEGER NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX proc_samples_run ON proc_samples(run_id, t);"
	"CREATE TABLE steps ("
	"  run_id INTEGER NOT NULL,"
	"  step INTEGER NOT NULL,"
	"  epoch INTEGER,"                       /* NULL when unknown */
	"  t REAL NOT NULL,"
	"  nprocs INTEGER NOT NULL,"
	"  rss INTEGER NOT NULL, pss INTEGER NOT NULL, uss INTEGER NOT NULL, swap INTEGER NOT NULL,"
	"  cgroup INTEGER, gpu INTEGER,"
	"  pss_exact INTEGER NOT NULL DEFAULT 1"
	");"
	"CREATE INDEX steps_run ON steps(run_id, t);"
	"CREATE TABLE metrics ("
	"  run_id INTEGER NOT NULL,"
	"  step INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  name TEXT NOT NULL,"
	"  value REAL"
	");"
	"CREATE INDEX metrics_run ON metrics(run_id, t);"
	"CREATE TABLE events ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  detail TEXT"
	");"
	"CREATE INDEX events_run ON events(run_id, t);"
	"CREATE TABLE results ("
	"  run_id INTEGER NOT NULL,"
	"  name TEXT NOT NULL,"
	"  value REAL,"
	"  PRIMARY KEY (run_id, name)"
	");",
	/* 2: what each segment ended on, and why the next one started */
	"ALTER TABLE segments ADD COLUMN end_step INTEGER;"      /* last step marked; NULL: none */
	"ALTER TABLE segments ADD COLUMN memory_bytes INTEGER;"  /* the measure at the end */
	"ALTER TABLE segments ADD COLUMN restart TEXT;",         /* why it was restarted; NULL: it was not */
	/* 3: sweeps, their trials, and what a sweep's table needs of each run */
	"CREATE TABLE sweeps ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  started_at REAL NOT NULL,"
	"  ended_at REAL,"
	"  file TEXT NOT NULL,"                  /* the sweep file, as given */
	"  spec TEXT NOT NULL,"                  /* its text when the sweep began */
	"  method TEXT NOT NULL,"
	"  metric TEXT,"                         /* NULL: none */
	"  maximize INTEGER NOT NULL DEFAULT 0,"
	"  status TEXT NOT NULL DEFAULT 'running',"  /* running, done, interrupted */
	"  pid INTEGER,"                         /* the sweep process while running */
	"  optuna_storage TEXT, optuna_study TEXT"
	");"
	"CREATE TABLE trials ("
	"  sweep_id INTEGER NOT NULL REFERENCES sweeps(id),"
	"  idx INTEGER NOT NULL,"                /* the trial's number in the sweep */
	"  attempt INTEGER NOT NULL,"            /* 0; more for retries and re-runs */
	"  params TEXT NOT NULL,"                /* JSON object */
	"  vals TEXT NOT NULL DEFAULT '',"       /* the values in the spec's order, 0x1f-separated */
	"  env TEXT NOT NULL,"                   /* JSON object */
	"  argv TEXT NOT NULL,"                  /* JSON array */
	"  status TEXT NOT NULL,"                /* running, ok, failed, oom, interrupted, skipped */
	"  run_id INTEGER,"
	"  cause TEXT,"
	"  metric REAL,"
	"  optuna_number INTEGER,"
	"  started_at REAL, ended_at REAL,"
	"  note TEXT,"
	"  PRIMARY KEY (sweep_id, idx, attempt)"
	");"
	"ALTER TABLE runs ADD COLUMN sweep_id INTEGER;"
	"ALTER TABLE runs ADD COLUMN trial_idx INTEGER;"
	"ALTER TABLE runs ADD COLUMN trial_attempt INTEGER;"
	"ALTER TABLE runs ADD COLUMN step_q0 REAL;"       /* per-step change quantiles, */
	"ALTER TABLE runs ADD COLUMN step_q1 REAL;"       /* kept at the end of the run */
	"ALTER TABLE runs ADD COLUMN step_q2 REAL;"       /* so a sweep's table needs */
	"ALTER TABLE runs ADD COLUMN step_q3 REAL;"       /* no re-analysis */
	"ALTER TABLE runs ADD COLUMN step_q4 REAL;"
	"ALTER TABLE runs ADD COLUMN steps_per_second REAL;"
	"CREATE INDEX runs_trial ON runs(sweep_id, trial_idx, trial_attempt);",
	/* 4: allocation sites of traced runs (store/trace.c) */
	"ALTER TABLE runs ADD COLUMN trace_mean INTEGER;"   /* sampling mean, bytes; NULL: not traced */
	"CREATE TABLE trace_sites ("
	"  run_id INTEGER NOT NULL,"
	"  site INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"                  /* m heap, a anonymous mmap */
	"  frames TEXT NOT NULL,"                /* PATH\tVADDR\tSYMBOL per line, innermost first */
	"  python TEXT,"                         /* LINE:FUNCTION:FILE, tab-separated, innermost first */
	"  symbols TEXT,"                        /* FUNCTION\tFILE:LINE per frame; NULL: not yet */
	"  live INTEGER, allocs INTEGER, frees INTEGER,"   /* at the end */
	"  PRIMARY KEY (run_id, site)"
	") WITHOUT ROWID;"
	"CREATE TABLE trace_live ("              /* a site's live bytes, when they changed */
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  site INTEGER NOT NULL,"
	"  step INTEGER,"                        /* the last step marked by then; NULL: none */
	"  live INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, t, site)"
	") WITHOUT ROWID;",
	/* 5: what of a run its writer could not store (NULL: it is whole) */
	"ALTER TABLE runs ADD COLUMN lost TEXT;",
	/* 6: who supervises a running run, to tell one whose supervisor died */
	"ALTER TABLE runs ADD COLUMN supervisor_pid INTEGER;"     /* NULL: unknown */
	"ALTER TABLE runs ADD COLUMN supervisor_start INTEGER;",  /* its /proc starttime, clock ticks */
	/* 7: trials claimed by workers (sweeps.c): a pending trial is claimed
	 * once, under a lease its worker renews; the worker's SLURM array job
	 * and task; and how a sweep runs its trials */
	"ALTER TABLE trials ADD COLUMN worker TEXT;"          /* HOST:PID of the worker that claimed it */
	"ALTER TABLE trials ADD COLUMN lease_until REAL;"     /* claimed until (wall seconds); NULL: none */
	"ALTER TABLE trials ADD COLUMN slurm_job INTEGER;"    /* the worker's array job id; NULL: not SLURM */
	"ALTER TABLE trials ADD COLUMN slurm_task INTEGER;"   /* its array task id */
	"CREATE INDEX trials_status ON trials(sweep_id, status, idx);"
	"ALTER TABLE sweeps ADD COLUMN executor TEXT;"        /* NULL: local; slurm */
	"ALTER TABLE sweeps ADD COLUMN slurm_job INTEGER;",   /* the array job last submitted */
	/* 8: the object census of Python jobs (core/observe.c, judge/census.c) */
	"CREATE TABLE census ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  step INTEGER,"                        /* the last step marked by then; NULL: none */
	"  seq INTEGER NOT NULL,"                /* the census's number in the job */
	"  type TEXT NOT NULL,"                  /* '*': the census itself */
	"  count INTEGER NOT NULL,"              /* objects ('*': all it looked at) */
	"  bytes INTEGER,"                       /* NULL: unknown */
	"  holder TEXT,"                         /* what holds the new ones; NULL: none found */
	"  cost_us INTEGER"                      /* '*': the census's time in the job */
	");"
	"CREATE INDEX census_run ON census(run_id, t);",
	/* 9: memory by kind, per process (growth kinds; pid 0: the job's cgroup) */
	"CREATE TABLE kind_samples ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  pid INTEGER NOT NULL, ppid INTEGER NOT NULL, name TEXT NOT NULL,"
	"  anon INTEGER NOT NULL,"              /* resident anonymous; cgroup: anon */
	"  cow INTEGER NOT NULL,"               /* parent's pages copied by a forked child */
	"  cow_base INTEGER NOT NULL,"          /* ... out of this many shared at first sight */
	"  file INTEGER NOT NULL,"              /* file-backed mapped (PSS); cgroup: page cache */
	"  shmem INTEGER NOT NULL,"             /* shared memory (PSS); cgroup: shmem */
	"  gpu INTEGER NOT NULL"
	");"
	"CREATE INDEX kind_samples_run ON kind_samples(run_id, t);",
	/* 10: where a run ran: its allocation, and its rank in a job of several
	 * (base/placement.h); no row: nothing known beyond runs.hostname. And
	 * runs.gpu_peak_bytes. */
	"CREATE TABLE placements ("
	"  run_id INTEGER PRIMARY KEY,"
	"  slurm_job_id TEXT, slurm_array_job_id TEXT, slurm_array_task_id TEXT, slurm_step_id TEXT,"
	"  alloc_mem_bytes INTEGER,"             /* the allocation's memory; NULL unknown */
	"  gpus TEXT,"                           /* CUDA_VISIBLE_DEVICES or SLURM's GPU list */
	"  launcher TEXT,"                       /* slurm, torchrun; NULL: a lone run */
	"  job_key TEXT,"                        /* shared by the ranks of one job */
	"  job_rank INTEGER, local_rank INTEGER, world_size INTEGER, node_id INTEGER"
	");"
	"CREATE INDEX placements_job ON placements(job_key, job_rank);"
	/* the most GPU memory at one sample, kept at the run's end so that a
	 * sweep's table does not read every sample of every trial; NULL:
	 * not ended (or older), read from samples */
	"ALTER TABLE runs ADD COLUMN gpu_peak_bytes INTEGER;",
	/* 11: what a sweep's memory model predicted of a trial when it was
	 * started or skipped (sweep/memmodel.c); bytes, NULL: unknown */
	"CREATE TABLE trial_predictions ("
	"  sweep_id INTEGER NOT NULL,"
	"  idx INTEGER NOT NULL,"
	"  attempt INTEGER NOT NULL,"
	"  peak REAL, peak_lo REAL, peak_hi REAL,"   /* host: point, 95% lower and upper bounds */
	"  gpu REAL, gpu_lo REAL, gpu_hi REAL,"      /* GPU, the same */
	"  growth REAL,"                             /* bytes per step */
	"  PRIMARY KEY (sweep_id, idx, attempt)"
	");",
	/* 12: what a start of the job left, so that the next writer can end a
	 * job whose supervisor and guard were both killed (core/supervise.c):
	 * the leader's start time and the job's cgroup */
	"ALTER TABLE segments ADD COLUMN pid_start INTEGER;"   /* /proc starttime of pid, ticks */
	"ALTER TABLE segments ADD COLUMN cgroup TEXT;"         /* its directory; NULL: none */
	"ALTER TABLE segments ADD COLUMN also TEXT;",          /* "PID:START ...": outside its group */
	/* 13: where the supervisor's pid means that process: a writer in
	 * another PID namespace (a container with the host's name), or after
	 * a reboot, reads another process under it (store/runs.c); whether
	 * what an interrupted run's job left still wants ending; and the
	 * directory a sweep's trials run in, whoever runs them (a worker) */
	"ALTER TABLE runs ADD COLUMN supervisor_pidns INTEGER;"  /* inode of its /proc/self/ns/pid */
	"ALTER TABLE runs ADD COLUMN boot_id TEXT;"              /* /proc/sys/kernel/random/boot_id */
	"ALTER TABLE runs ADD COLUMN left_pending INTEGER;"      /* 1: interrupted, its job's leftovers not yet ended */
	"ALTER TABLE sweeps ADD COLUMN cwd TEXT;",               /* where its trials run; NULL: unknown (older) */
	/* 14: the version of the judgment that wrote a run's verdict, so that
	 * `ls` says which stored verdicts an older one wrote; NULL: older */
	"ALTER TABLE runs ADD COLUMN judge_version INTEGER;",   /* JUDGE_VERSION of its verdict; NULL: older */
	/* 15: the memory a pending trial needs of its worker (on_oom resize
	 * with executor slurm: the worker's size class, sweep/cluster.c) */
	"ALTER TABLE trials ADD COLUMN need_bytes INTEGER;",   /* NULL: the smallest worker's */
};
#define SCHEMA_VERSION ((int64_t)(sizeof(migrations) / sizeof(migrations[0])))

int64_t store_schema_version(void)
{
	return SCHEMA_VERSION;
}

/* Whether a store at version (foreign: a database of something else) is
 * one this build can use. 0, or -1 with the reason in why. */
static int check_version(int64_t version, bool foreign, char *why, size_t whysz)
{
	if (foreign) {
		snprintf(why, whysz, "not a leakproof store (a database of something else)");
		return -1;
	}
	if (version < 0) {
		snprintf(why, whysz, "not a valid leakproof store (schema version %lld)", (long long)version);
		return -1;
	}
	if (version > SCHEMA_VERSION) {
		snprintf(why, whysz, "made by a newer leakproof (schema version %lld; this one knows up to %lld)",
		         (long long)version, (long long)SCHEMA_VERSION);
		return -1;
	}
	return 0;
}

int store_schema_check(struct store *st, int64_t *version, char *why, size_t whysz)
{
	bool foreign = false;
	if (db_get_version(st->db, version, &foreign) != DB_OK) {
		snprintf(why, whysz, "%s", db_errmsg(st->db));
		return -1;
	}
	return check_version(*version, foreign, why, whysz);
}

/*
 * Each step in its own transaction, which takes the write lock first and
 * then reads the version again: another writer may have migrated the store
 * since it was checked (eight runs started at once on a new store), and a
 * migration must never run twice.
 */
int store_schema_migrate(struct store *st, int64_t version, char *why, size_t whysz)
{
	while (version < SCHEMA_VERSION) {
		bool foreign = false;
		if (db_begin(st->db, true) != DB_OK)
			goto fail;
		if (db_get_version(st->db, &version, &foreign) != DB_OK)
			goto fail_rollback;
		if (check_version(version, foreign, why, whysz) < 0) {
			db_rollback(st->db);
			return -1;
		}
		if (version < SCHEMA_VERSION) {
			if (db_exec(st->db, migrations[version]) != DB_OK ||
			    db_set_version(st->db, version + 1) != DB_OK)
				goto fail_rollback;
			version++;
		}
		if (db_commit(st->db) != DB_OK)
			goto fail_rollback;
	}
	return 0;
fail_rollback:
	snprintf(why, whysz, "cannot migrate the schema to version %lld: %s", (long long)SCHEMA_VERSION,
	         db_errmsg(st->db));
	if (db_in_transaction(st->db))
		db_rollback(st->db);
	return -1;
fail:
	snprintf(why, whysz, "%s", db_errmsg(st->db));
	return -1;
}

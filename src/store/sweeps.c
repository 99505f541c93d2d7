/*
 * sweeps.c — sweeps and trials in the store. Every statement runs on its own
 * (autocommit): a sweep is written a few rows per trial, and each row must
 * be durable the moment it is written, since a sweep killed with SIGKILL
 * resumes from what is here.
 */
#include "store/sweeps.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"
#include "util/util.h"

static int sweep_error(struct store *st, const char *what)
{
	return error("store: cannot %s: %s", what, db_errmsg(st->db));
}

static struct db_stmt *prepare(struct store *st, const char *sql, const char *what)
{
	struct db_stmt *s = NULL;
	if (db_prepare(st->db, sql, false, &s) != DB_OK) {
		sweep_error(st, what);
		return NULL;
	}
	return s;
}

/* Step a statement that returns no rows, then finalize it. 0 or -1. */
static int finish(struct store *st, struct db_stmt *s, const char *what)
{
	int r = db_step(s) == DB_DONE ? 0 : sweep_error(st, what);
	db_finalize(s);
	return r;
}

/* NaN and infinities bind NULL. */
static void bind_num(struct db_stmt *s, int i, double v)
{
	if (isfinite(v))
		db_bind_double(s, i, v);
	else
		db_bind_null(s, i);
}

static double col_num(struct db_stmt *s, int i)
{
	return db_column_is_null(s, i) ? NAN : db_column_double(s, i);
}

int64_t store_sweep_begin(struct store *st, const struct sweep_begin *b)
{
	struct db_stmt *s = prepare(st, "INSERT INTO sweeps (started_at, file, spec, method, metric, maximize, pid,"
	                          " optuna_storage, optuna_study, executor, cwd) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
	                          " ?10, ?11)",
	                          "record the sweep");
	if (!s)
		return -1;
	db_bind_double(s, 1, b->started_at);
	db_bind_text(s, 2, b->file);
	db_bind_text(s, 3, b->text ? b->text : "");
	db_bind_text(s, 4, b->method);
	db_bind_text(s, 5, b->metric);
	db_bind_int64(s, 6, b->maximize);
	db_bind_int64(s, 7, b->pid);
	db_bind_text(s, 8, b->optuna_storage);
	db_bind_text(s, 9, b->optuna_study);
	db_bind_text(s, 10, b->executor);
	db_bind_text(s, 11, b->cwd);
	if (finish(st, s, "record the sweep") < 0)
		return -1;
	return db_last_insert_id(st->db);
}

int store_sweep_set_optuna(struct store *st, int64_t id, const char *storage, const char *study)
{
	struct db_stmt *s = prepare(st, "UPDATE sweeps SET optuna_storage = ?2, optuna_study = ?3 WHERE id = ?1",
	                          "update the sweep");
	if (!s)
		return -1;
	db_bind_int64(s, 1, id);
	db_bind_text(s, 2, storage);
	db_bind_text(s, 3, study);
	return finish(st, s, "update the sweep");
}

int store_sweep_set_status(struct store *st, int64_t id, enum sweep_status status, double ended_at, int pid)
{
	struct db_stmt *s = prepare(st, "UPDATE sweeps SET status = ?2, ended_at = ?3, pid = ?4 WHERE id = ?1",
	                          "update the sweep");
	if (!s)
		return -1;
	db_bind_int64(s, 1, id);
	db_bind_text(s, 2, sweep_status_name(status));
	bind_num(s, 3, ended_at > 0 ? ended_at : NAN);
	db_bind_int64(s, 4, pid);
	return finish(st, s, "update the sweep");
}

int store_get_sweep(struct store *st, int64_t id, struct sweep_row *out)
{
	memset(out, 0, sizeof(*out));
#define SWEEP_COLUMNS "id, started_at, coalesce(ended_at, 0), file, spec, method, metric, status," \
	" optuna_storage, optuna_study, maximize, coalesce(pid, 0), executor, coalesce(slurm_job, 0), "
	bool cwd = st->version >= PIDNS_VERSION;
	struct db_stmt *s = prepare(st, id ? (cwd ? "SELECT " SWEEP_COLUMNS "cwd FROM sweeps WHERE id = ?1"
	                                          : "SELECT " SWEEP_COLUMNS "NULL FROM sweeps WHERE id = ?1")
	                                   : (cwd ? "SELECT " SWEEP_COLUMNS "cwd FROM sweeps ORDER BY id DESC LIMIT 1"
	                                          : "SELECT " SWEEP_COLUMNS "NULL FROM sweeps ORDER BY id DESC LIMIT 1"),
	                            "read the sweep");
#undef SWEEP_COLUMNS
	if (!s)
		return -1;
	if (id)
		db_bind_int64(s, 1, id);
	int rc = db_step(s), ret = 0;
	if (rc == DB_ROW) {
		out->id = db_column_int64(s, 0);
		out->started_at = db_column_double(s, 1);
		out->ended_at = db_column_double(s, 2);
		out->file = col_strdup(s, 3);
		out->text = col_strdup(s, 4);
		out->method = col_strdup(s, 5);
		out->metric = col_strdup(s, 6);
		out->status = sweep_status_parse(db_column_text(s, 7));
		out->optuna_storage = col_strdup(s, 8);
		out->optuna_study = col_strdup(s, 9);
		out->maximize = db_column_int(s, 10) != 0;
		out->pid = db_column_int(s, 11);
		out->executor = col_strdup(s, 12);
		out->slurm_job = db_column_int64(s, 13);
		out->cwd = col_strdup(s, 14);
	} else if (rc == DB_DONE) {
		ret = 1;
	} else {
		ret = sweep_error(st, "read the sweep");
	}
	db_finalize(s);
	return ret;
}

void sweep_row_release(struct sweep_row *r)
{
	free(r->file);
	free(r->text);
	free(r->method);
	free(r->metric);
	free(r->optuna_storage);
	free(r->optuna_study);
	free(r->executor);
	free(r->cwd);
	memset(r, 0, sizeof(*r));
}

/* One integer from a query with one int64 parameter; 0 when no row. */
static int64_t one_int(struct store *st, const char *sql, int64_t a, int64_t b, int64_t c, int nparams,
                       const char *what)
{
	struct db_stmt *s = prepare(st, sql, what);
	if (!s)
		return -1;
	int64_t p[3] = { a, b, c };
	for (int i = 0; i < nparams; i++)
		db_bind_int64(s, i + 1, p[i]);
	int rc = db_step(s);
	int64_t v = 0;
	if (rc == DB_ROW)
		v = db_column_int64(s, 0);
	else if (rc != DB_DONE)
		v = sweep_error(st, what);
	db_finalize(s);
	return v;
}

int64_t store_sweep_of_run(struct store *st, int64_t run_id)
{
	return one_int(st, "SELECT coalesce(sweep_id, 0) FROM runs WHERE id = ?1", run_id, 0, 0, 1,
	               "read a run's sweep");
}

int64_t store_trial_run(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt)
{
	return one_int(st, "SELECT id FROM runs WHERE sweep_id = ?1 AND trial_idx = ?2 AND trial_attempt = ?3"
	               " ORDER BY id DESC LIMIT 1", sweep_id, idx, attempt, 3, "find a trial's run");
}

/* A trial's claim into ?i .. ?i+3: worker, lease, SLURM job and task. */
static void bind_claim(struct db_stmt *s, int i, const struct trial_row *t)
{
	db_bind_text(s, i, t->worker && *t->worker ? t->worker : NULL);
	bind_num(s, i + 1, t->lease_until > 0 ? t->lease_until : NAN);
	if (t->slurm_job > 0) {
		db_bind_int64(s, i + 2, t->slurm_job);
		db_bind_int64(s, i + 3, t->slurm_task);
	} else {
		db_bind_null(s, i + 2);
		db_bind_null(s, i + 3);
	}
}

#define TRIAL_PUT_SQL \
	"INSERT OR REPLACE INTO trials (sweep_id, idx, attempt, params, env, argv, status, run_id, cause," \
	" metric, optuna_number, started_at, ended_at, note, vals, worker, lease_until, slurm_job, slurm_task," \
	" need_bytes)" \
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"

static void bind_trial(struct db_stmt *s, const struct trial_row *t)
{
	db_bind_int64(s, 1, t->sweep_id);
	db_bind_int64(s, 2, t->idx);
	db_bind_int64(s, 3, t->attempt);
	db_bind_text(s, 4, t->params ? t->params : "{}");
	db_bind_text(s, 5, t->env ? t->env : "{}");
	db_bind_text(s, 6, t->argv ? t->argv : "[]");
	db_bind_text(s, 7, trial_status_name(t->status));
	if (t->run_id > 0)
		db_bind_int64(s, 8, t->run_id);
	else
		db_bind_null(s, 8);
	db_bind_text(s, 9, t->cause != CAUSE_NONE ? cause_name(t->cause) : NULL);
	bind_num(s, 10, t->has_metric ? t->metric : NAN);
	if (t->optuna_number >= 0)
		db_bind_int64(s, 11, t->optuna_number);
	else
		db_bind_null(s, 11);
	bind_num(s, 12, t->started_at > 0 ? t->started_at : NAN);
	bind_num(s, 13, t->ended_at > 0 ? t->ended_at : NAN);
	db_bind_text(s, 14, t->note && *t->note ? t->note : NULL);
	db_bind_text(s, 15, t->vals ? t->vals : "");
	bind_claim(s, 16, t);
	if (t->need_bytes)
		db_bind_int64(s, 20, u64_to_db(t->need_bytes));
	else
		db_bind_null(s, 20);
}

int store_trial_put(struct store *st, const struct trial_row *t)
{
	struct db_stmt *s = prepare(st, TRIAL_PUT_SQL, "record a trial");
	if (!s)
		return -1;
	bind_trial(s, t);
	return finish(st, s, "record a trial");
}

static void read_trial(struct db_stmt *s, void *row)
{
	struct trial_row *t = row;
	t->sweep_id = db_column_int64(s, 0);
	t->idx = db_column_int64(s, 1);
	t->attempt = db_column_int64(s, 2);
	t->params = col_strdup(s, 3);
	t->env = col_strdup(s, 4);
	t->argv = col_strdup(s, 5);
	t->status = trial_status_parse(db_column_text(s, 6));
	t->cause = cause_read(db_column_text(s, 7));
	t->note = col_strdup(s, 8);
	t->run_id = db_column_int64(s, 9);
	t->metric = col_num(s, 10);
	t->has_metric = isfinite(t->metric);
	t->optuna_number = db_column_int64(s, 11);
	t->started_at = db_column_double(s, 12);
	t->ended_at = db_column_double(s, 13);
	t->verdict = col_strdup(s, 14);
	t->growth_bytes_per_step = col_num(s, 15);
	for (int i = 0; i < 5; i++)
		t->q[i] = col_num(s, 16 + i);
	t->steps_per_second = col_num(s, 21);
	t->peak_bytes = (uint64_t)db_column_int64(s, 22);
	t->steps = db_column_int64(s, 23);
	t->vals = col_strdup(s, 24);
	t->gpu_peak_bytes = (uint64_t)db_column_int64(s, 25);
	t->worker = col_strdup(s, 26);
	t->lease_until = db_column_double(s, 27);
	t->slurm_job = db_column_int64(s, 28);
	t->slurm_task = db_column_int64(s, 29);
	t->host = col_strdup(s, 30);
	t->judge_version = db_column_int(s, 31);
	t->limit_bytes = db_to_u64(db_column_int64(s, 32));
	t->need_bytes = db_to_u64(db_column_int64(s, 33));
}

static void drop_trials(void *rows, size_t n)
{
	trial_rows_free(rows, n);
}

/* Trials of a sweep, all of them (idx < 0) or one attempt. */
static int load_trials(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt,
                       struct trial_row **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	char sql[2048];
	/* the GPU peak kept at the run's end (schema 10), else read from its samples */
	const char *gpu = st->version >= PLACEMENT_VERSION ? "coalesce(r.gpu_peak_bytes,"
	                  " (SELECT coalesce(max(gpu), 0) FROM samples WHERE run_id = t.run_id))"
	                                   : "(SELECT coalesce(max(gpu), 0) FROM samples WHERE run_id = t.run_id)";
	/* its allocation: what --max-mem gave its run, else (a SLURM job
	 * step) its job's memory */
#define MAXMEM_LIMIT "CASE WHEN r.limit_source = 'max-mem' THEN coalesce(r.limit_bytes, 0) ELSE 0 END"
#define ALLOC_LIMIT "CASE WHEN r.limit_source = 'max-mem' THEN coalesce(r.limit_bytes, 0) ELSE coalesce((SELECT" \
	" p.alloc_mem_bytes FROM placements p WHERE p.run_id = r.id AND p.slurm_job_id IS NOT NULL), 0) END"
	const char *host = st->version >= NEED_VERSION ? ", r.hostname, coalesce(r.judge_version, 0), " ALLOC_LIMIT
	                   ", coalesce(t.need_bytes, 0)"
	                   : st->version >= JUDGE_VERSION_COLUMN ? ", r.hostname, coalesce(r.judge_version, 0), "
	                   ALLOC_LIMIT ", 0"
	                   : st->version >= PLACEMENT_VERSION ? ", r.hostname, 0, " ALLOC_LIMIT ", 0"
	                   : ", NULL, 0, " MAXMEM_LIMIT ", 0";
#undef MAXMEM_LIMIT
#undef ALLOC_LIMIT
	snprintf(sql, sizeof(sql), "%s%s%s%s%s%s ORDER BY t.idx, t.attempt",
	        "SELECT t.sweep_id, t.idx, t.attempt, t.params, t.env, t.argv, t.status, t.cause, t.note,"
	        " coalesce(t.run_id, 0), t.metric, coalesce(t.optuna_number, -1), coalesce(t.started_at, 0),"
	        " coalesce(t.ended_at, 0), r.verdict, r.growth_bytes_per_step, r.step_q0, r.step_q1, r.step_q2,"
	        " r.step_q3, r.step_q4, r.steps_per_second, coalesce(r.peak_bytes, 0), coalesce(r.steps, 0), t.vals, ",
	        gpu, ", t.worker, coalesce(t.lease_until, 0), coalesce(t.slurm_job, 0), coalesce(t.slurm_task, -1)",
	        host, " FROM trials t LEFT JOIN runs r ON r.id = t.run_id WHERE t.sweep_id = ?1",
	        idx >= 0 ? " AND t.idx = ?2 AND t.attempt = ?3" : "");
	struct db_stmt *s = prepare(st, sql, "read the trials");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	if (idx >= 0) {
		db_bind_int64(s, 2, idx);
		db_bind_int64(s, 3, attempt);
	}
	int rc;
	*out = store_load_rows(st, s, sizeof(**out), read_trial, drop_trials, n, &rc);
	return rc;
}

int store_load_trials(struct store *st, int64_t sweep_id, struct trial_row **out, size_t *n)
{
	return load_trials(st, sweep_id, -1, 0, out, n);
}

int store_load_trial(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt, struct trial_row *out)
{
	struct trial_row *v;
	size_t n;
	if (load_trials(st, sweep_id, idx, attempt, &v, &n) < 0)
		return -1;
	if (!n) {
		free(v);
		return 1;
	}
	*out = v[0];
	for (size_t i = 1; i < n; i++)
		trial_row_release(&v[i]);
	free(v);
	return 0;
}

void trial_row_release(struct trial_row *t)
{
	free(t->params);
	free(t->env);
	free(t->argv);
	free(t->note);
	free(t->verdict);
	free(t->vals);
	free(t->worker);
	free(t->host);
	memset(t, 0, sizeof(*t));
}

void trial_rows_free(struct trial_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		trial_row_release(&rows[i]);
	free(rows);
}

int store_run_set_trial(struct store *st, int64_t run_id, int64_t sweep_id, int64_t idx, int64_t attempt)
{
	struct db_stmt *s = prepare(st, "UPDATE runs SET sweep_id = ?2, trial_idx = ?3, trial_attempt = ?4 WHERE id = ?1",
	                          "link a run to its trial");
	if (!s)
		return -1;
	db_bind_int64(s, 1, run_id);
	db_bind_int64(s, 2, sweep_id);
	db_bind_int64(s, 3, idx);
	db_bind_int64(s, 4, attempt);
	return finish(st, s, "link a run to its trial");
}

int store_run_set_summary(struct store *st, int64_t run_id, const double q[5], double steps_per_second)
{
	struct db_stmt *s = prepare(st, "UPDATE runs SET step_q0 = ?2, step_q1 = ?3, step_q2 = ?4, step_q3 = ?5,"
	                          " step_q4 = ?6, steps_per_second = ?7 WHERE id = ?1", "keep a run's summary");
	if (!s)
		return -1;
	db_bind_int64(s, 1, run_id);
	for (int i = 0; i < 5; i++)
		bind_num(s, 2 + i, q[i]);
	bind_num(s, 7, steps_per_second > 0 ? steps_per_second : NAN);
	return finish(st, s, "keep a run's summary");
}

double store_run_last_memory(struct store *st, int64_t run_id, enum measure m)
{
	static const char *const col[MEASURE_COUNT] = {
		[MEASURE_PSS] = "pss", [MEASURE_RSS] = "rss", [MEASURE_USS] = "uss",
		[MEASURE_CGROUP] = "cgroup", [MEASURE_GPU] = "gpu",
	};
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT %s FROM samples WHERE run_id = ?1 ORDER BY rowid DESC LIMIT 1",
	         col[m < MEASURE_COUNT ? m : MEASURE_PSS]);
	struct db_stmt *s = prepare(st, sql, "read a run's memory");
	if (!s)
		return -1;
	db_bind_int64(s, 1, run_id);
	double v = -1;
	if (db_step(s) == DB_ROW && !db_column_is_null(s, 0))
		v = db_column_double(s, 0);
	db_finalize(s);
	return v;
}

int store_trial_prediction_put(struct store *st, int64_t sweep_id, const struct trial_prediction *p)
{
	struct db_stmt *s = prepare(st, "INSERT OR REPLACE INTO trial_predictions (sweep_id, idx, attempt, peak, peak_lo,"
	                          " peak_hi, gpu, gpu_lo, gpu_hi, growth) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	                          "record a trial's prediction");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	db_bind_int64(s, 2, p->idx);
	db_bind_int64(s, 3, p->attempt);
	for (int i = 0; i < 3; i++) {
		bind_num(s, 4 + i, p->peak[i]);
		bind_num(s, 7 + i, p->gpu[i]);
	}
	bind_num(s, 10, p->growth);
	return finish(st, s, "record a trial's prediction");
}

static void read_prediction(struct db_stmt *s, void *row)
{
	struct trial_prediction *p = row;
	p->idx = db_column_int64(s, 0);
	p->attempt = db_column_int64(s, 1);
	for (int i = 0; i < 3; i++) {
		p->peak[i] = col_num(s, 2 + i);
		p->gpu[i] = col_num(s, 5 + i);
	}
	p->growth = col_num(s, 8);
}

int store_load_trial_predictions(struct store *st, int64_t sweep_id, struct trial_prediction **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	struct db_stmt *s = prepare(st, "SELECT idx, attempt, peak, peak_lo, peak_hi, gpu, gpu_lo, gpu_hi, growth"
	                          " FROM trial_predictions WHERE sweep_id = ?1 ORDER BY idx, attempt",
	                          "read the trials' predictions");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	int rc;
	*out = store_load_rows(st, s, sizeof(**out), read_prediction, NULL, n, &rc);
	return rc;
}

/* ---- trials claimed by workers ----------------------------------------------- */

int store_sweep_set_executor(struct store *st, int64_t id, const char *executor, int64_t slurm_job)
{
	struct db_stmt *s = prepare(st, "UPDATE sweeps SET executor = ?2, slurm_job = ?3 WHERE id = ?1",
	                          "update the sweep");
	if (!s)
		return -1;
	db_bind_int64(s, 1, id);
	db_bind_text(s, 2, executor);
	if (slurm_job > 0)
		db_bind_int64(s, 3, slurm_job);
	else
		db_bind_null(s, 3);
	return finish(st, s, "update the sweep");
}

/* Roll back what a failed transaction did; -1 after the message. */
static int tx_fail(struct store *st, const char *what)
{
	int r = sweep_error(st, what);
	if (db_in_transaction(st->db))
		db_rollback(st->db);
	return r;
}

int store_trials_put_many(struct store *st, const struct trial_row *rows, size_t n)
{
	if (db_begin(st->db, true) != DB_OK)
		return sweep_error(st, "record the trials");
	struct db_stmt *s = NULL;
	if (db_prepare(st->db, TRIAL_PUT_SQL, false, &s) != DB_OK)
		return tx_fail(st, "record the trials");
	for (size_t i = 0; i < n; i++) {
		bind_trial(s, &rows[i]);
		if (db_step_done(s) != DB_OK) {
			db_finalize(s);
			return tx_fail(st, "record the trials");
		}
	}
	db_finalize(s);
	if (db_commit(st->db) != DB_OK)
		return tx_fail(st, "record the trials");
	return 0;
}

/* The requeue of one attempt, inside the caller's transaction or not. */
static int requeue(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt, const char *note)
{
	/* it needs what it needed (schema 15: need_bytes) */
	struct db_stmt *s = prepare(st, st->version >= NEED_VERSION ? "INSERT OR IGNORE INTO trials (sweep_id, idx,"
	                          " attempt, params, vals, env, argv, status, optuna_number, note, need_bytes) SELECT"
	                          " sweep_id, idx, attempt + 1, params, vals, env, argv, 'pending', optuna_number, ?4,"
	                          " need_bytes FROM trials WHERE sweep_id = ?1 AND idx = ?2 AND attempt = ?3"
	                          : "INSERT OR IGNORE INTO trials (sweep_id, idx, attempt, params, vals, env,"
	                          " argv, status, optuna_number, note) SELECT sweep_id, idx, attempt + 1, params,"
	                          " vals, env, argv, 'pending', optuna_number, ?4 FROM trials"
	                          " WHERE sweep_id = ?1 AND idx = ?2 AND attempt = ?3", "put a trial back");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	db_bind_int64(s, 2, idx);
	db_bind_int64(s, 3, attempt);
	db_bind_text(s, 4, note);
	return finish(st, s, "put a trial back");
}

int store_trial_requeue(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt, const char *note)
{
	return requeue(st, sweep_id, idx, attempt, note);
}

/* Expired leases into interrupted attempts and pending successors, inside
 * the caller's transaction. The number, or -1 (the caller rolls back). */
static int expire(struct store *st, int64_t sweep_id, double now)
{
	struct db_stmt *s = prepare(st, "UPDATE trials SET status = 'interrupted', lease_until = NULL,"
	                          " ended_at = ?2, note = 'lease expired: worker ' || coalesce(worker, '?') ||"
	                          " ' stopped renewing it (killed, or its node lost)', run_id = (SELECT max(r.id)"
	                          " FROM runs r WHERE r.sweep_id = ?1 AND r.trial_idx = trials.idx AND"
	                          " r.trial_attempt = trials.attempt) WHERE sweep_id = ?1 AND status = 'running'"
	                          " AND lease_until IS NOT NULL AND lease_until < ?2 RETURNING idx, attempt",
	                          "end expired leases");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	db_bind_double(s, 2, now);
	int64_t (*v)[2] = NULL;
	size_t n = 0, cap = 0;
	int rc;
	while ((rc = db_step(s)) == DB_ROW) {
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[n][0] = db_column_int64(s, 0);
		v[n][1] = db_column_int64(s, 1);
		n++;
	}
	db_finalize(s);
	if (rc != DB_DONE) {
		free(v);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char note[96];
		snprintf(note, sizeof(note), "run again: attempt %lld lost its worker", (long long)v[i][1]);
		if (requeue(st, sweep_id, v[i][0], v[i][1], note) < 0) {
			free(v);
			return -1;
		}
	}
	free(v);
	return (int)n;
}

int store_trials_expire(struct store *st, int64_t sweep_id, double now)
{
	if (db_begin(st->db, true) != DB_OK)
		return sweep_error(st, "end expired leases");
	int n = expire(st, sweep_id, now);
	if (n < 0)
		return tx_fail(st, "end expired leases");
	if (db_commit(st->db) != DB_OK)
		return tx_fail(st, "end expired leases");
	return n;
}

int store_trial_claim(struct store *st, int64_t sweep_id, const struct trial_claimer *who, double now,
                      double lease_s, struct trial_row *out)
{
	memset(out, 0, sizeof(*out));
	/* PostgreSQL: a row another claim holds is skipped, not waited for */
	bool server = !strcmp(st->db->drv->name, "postgresql");
	if (db_begin(st->db, true) != DB_OK)
		return sweep_error(st, "claim a trial");
	if (expire(st, sweep_id, now) < 0)
		return tx_fail(st, "claim a trial");
	/* a worker of a size class takes the largest need that fits it, so
	 * that a large worker is not spent on small trials while large ones
	 * wait (docs/internals/sweeps.md) */
#define NEXT_PENDING "SELECT idx, attempt FROM trials WHERE sweep_id = ?1 AND status = 'pending'"
#define BY_INDEX " ORDER BY idx, attempt LIMIT 1"
#define BY_NEED " AND coalesce(need_bytes, 0) <= ?2 ORDER BY coalesce(need_bytes, 0) DESC, idx, attempt LIMIT 1"
	bool by_need = who->class_bytes && st->version >= NEED_VERSION;
	const char *sql = by_need ? (server ? NEXT_PENDING BY_NEED " FOR UPDATE SKIP LOCKED" : NEXT_PENDING BY_NEED)
	                          : (server ? NEXT_PENDING BY_INDEX " FOR UPDATE SKIP LOCKED" : NEXT_PENDING BY_INDEX);
#undef NEXT_PENDING
#undef BY_INDEX
#undef BY_NEED
	struct db_stmt *s = prepare(st, sql, "claim a trial");
	if (!s)
		return tx_fail(st, "claim a trial");
	db_bind_int64(s, 1, sweep_id);
	if (by_need)
		db_bind_int64(s, 2, u64_to_db(who->class_bytes));
	int rc = db_step(s);
	int64_t idx = db_column_int64(s, 0), attempt = db_column_int64(s, 1);
	db_finalize(s);
	if (rc == DB_DONE) {
		if (db_commit(st->db) != DB_OK)
			return tx_fail(st, "claim a trial");
		return 1;
	}
	if (rc != DB_ROW)
		return tx_fail(st, "claim a trial");
	s = prepare(st, "UPDATE trials SET status = 'running', worker = ?4, lease_until = ?5, started_at = ?6,"
	            " slurm_job = ?7, slurm_task = ?8 WHERE sweep_id = ?1 AND idx = ?2 AND attempt = ?3"
	            " AND status = 'pending'", "claim a trial");
	if (!s)
		return tx_fail(st, "claim a trial");
	db_bind_int64(s, 1, sweep_id);
	db_bind_int64(s, 2, idx);
	db_bind_int64(s, 3, attempt);
	db_bind_text(s, 4, who->worker);
	db_bind_double(s, 5, now + lease_s);
	db_bind_double(s, 6, now);
	if (who->slurm_job > 0) {
		db_bind_int64(s, 7, who->slurm_job);
		db_bind_int64(s, 8, who->slurm_task);
	} else {
		db_bind_null(s, 7);
		db_bind_null(s, 8);
	}
	if (db_step(s) != DB_DONE || db_changes(st->db) != 1) {
		db_finalize(s);
		return tx_fail(st, "claim a trial");
	}
	db_finalize(s);
	if (db_commit(st->db) != DB_OK)
		return tx_fail(st, "claim a trial");
	rc = store_load_trial(st, sweep_id, idx, attempt, out);
	return rc == 0 ? 0 : -1;
}

int store_trial_renew(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt, const char *worker,
                      double lease_until)
{
	struct db_stmt *s = prepare(st, "UPDATE trials SET lease_until = ?4 WHERE sweep_id = ?1 AND idx = ?2"
	                          " AND attempt = ?3 AND status = 'running' AND worker = ?5", "renew a lease");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	db_bind_int64(s, 2, idx);
	db_bind_int64(s, 3, attempt);
	db_bind_double(s, 4, lease_until);
	db_bind_text(s, 5, worker);
	if (finish(st, s, "renew a lease") < 0)
		return -1;
	return db_changes(st->db) > 0 ? 0 : 1;
}

int store_trial_pending_needs(struct store *st, int64_t sweep_id, uint64_t *need, int64_t *count, size_t cap)
{
	struct db_stmt *s = prepare(st, st->version >= NEED_VERSION ? "SELECT coalesce(need_bytes, 0) AS n, count(*)"
	                          " FROM trials WHERE sweep_id = ?1 AND status = 'pending' GROUP BY n ORDER BY n DESC"
	                          : "SELECT 0, count(*) FROM trials WHERE sweep_id = ?1 AND status = 'pending'"
	                          " HAVING count(*) > 0", "count the pending trials");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	size_t n = 0;
	int rc;
	while ((rc = db_step(s)) == DB_ROW)
		if (n < cap) {
			need[n] = db_to_u64(db_column_int64(s, 0));
			count[n++] = db_column_int64(s, 1);
		}
	db_finalize(s);
	return rc == DB_DONE ? (int)n : sweep_error(st, "count the pending trials");
}

int store_trial_counts(struct store *st, int64_t sweep_id, struct trial_counts *out)
{
	memset(out, 0, sizeof(*out));
	struct db_stmt *s = prepare(st, "SELECT t.status, count(*) FROM trials t WHERE t.sweep_id = ?1 AND"
	                          " t.attempt = (SELECT max(u.attempt) FROM trials u WHERE u.sweep_id = t.sweep_id"
	                          " AND u.idx = t.idx) GROUP BY t.status", "count the trials");
	if (!s)
		return -1;
	db_bind_int64(s, 1, sweep_id);
	int rc;
	while ((rc = db_step(s)) == DB_ROW) {
		enum trial_status status = trial_status_parse(db_column_text(s, 0));
		int64_t n = db_column_int64(s, 1);
		if (status == TRIAL_PENDING)
			out->pending += n;
		else if (status == TRIAL_RUNNING)
			out->running += n;
		else if (status == TRIAL_INTERRUPTED)
			out->interrupted += n;
		else
			out->finished += n;
	}
	db_finalize(s);
	return rc == DB_DONE ? 0 : sweep_error(st, "count the trials");
}

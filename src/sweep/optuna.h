/*
 * optuna.h — the bridge between `leakproof sweep` (method: optuna) and
 * Optuna: one long-lived Optuna process per sweep (Python running Optuna's
 * own API, started with platform/spawn.h, no shell), asked and told
 * through one JSON request per line on a socket (docs/internals/optuna.md).
 * Python is never embedded.
 *
 * The study lives in Optuna's storage (by default an SQLite file next to the
 * leakproof store; with a PostgreSQL store, the same database); leakproof
 * keeps only the trial numbers Optuna gives.
 *
 * Errors follow util.h: -1 (or NULL) after printing one message; a request
 * the Optuna process refused is reported with its exception's type and
 * message.
 */
#ifndef LP_SWEEP_OPTUNA_H
#define LP_SWEEP_OPTUNA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sweep/spec.h"

struct optuna_study {
	const char *optuna;     /* the optuna program, whose "#!" names the Python to run;
	                           NULL: "optuna", found on PATH */
	const char *storage;    /* Optuna storage URL, "sqlite:////abs/optuna.db" */
	const char *name;       /* the study name */
	const char *sampler;    /* a class of optuna.samplers; NULL: "TPESampler" */
	uint64_t seed;          /* the sweep's seed (see optuna_ask_seed) */
	bool maximize;          /* direction; false: minimize */
	int timeout_ms;         /* per reply of the Optuna process; 0: 120000 */
	const char *sampler_kwargs; /* JSON object or NULL */
	const char *pruner;     /* a class of optuna.pruners or NULL */
	const char *pruner_kwargs;  /* JSON object or NULL */
	const char *password;   /* for the storage URL, which leaves it out; NULL: none
	                           (never on a command line) */
	const char *client_dir; /* the Python client's directory, which holds the Optuna
	                           process's leakproof/_optuna_worker.py (python_client_dir()
	                           of core/locate.h); NULL: none */
};
/* All pointers are the caller's and must outlive the calls. */

/*
 * The values a trial is asked with: *number gets Optuna's trial number,
 * out->values one newly allocated string per dimension in spec->dims
 * order: the value's own text for a choice (DIM_VALUES, DIM_CONST), an
 * integer for an integer range, the shortest text that reads back to the
 * same double for a float range. The caller frees out with
 * sweep_assign_free(out, spec->ndims).
 *
 * A tell: ok with a finite or infinite value → state complete with that
 * value; !ok, or a NaN value (which Optuna refuses) → state fail, no
 * value. Telling a trial that is already finished is not an error (a
 * resumed sweep may tell twice).
 */

/*
 * The Optuna process: one long-lived Python process per sweep that runs
 * Optuna's own API (create_study(load_if_exists), ask, tell) behind one
 * JSON request per line on a socket that is its stdin and stdout
 * (docs/internals/optuna.md). The interpreter is the one of the `optuna`
 * program on PATH (its "#!" line), so the Optuna that `optuna trials`
 * runs is the one asked; the process is in its own process group and gets
 * SIGTERM when we die.
 *
 * optuna_proc_open() starts it and opens the study: created if new, the
 * sampler st->sampler with st->sampler_kwargs (seeded from st->seed and
 * seq, the asks the sweep made before, unless the kwargs give a seed), the
 * pruner st->pruner; a study that exists is loaded, and refused when it
 * has more than one objective or another direction than st->maximize
 * (a resumed sweep whose goal changed would optimise the wrong way). NULL
 * after a message. The study and its storage are Optuna's, so `optuna
 * trials` and the dashboard see the same study.
 *
 * optuna_proc_ask() asks for a trial in spec's space (results as
 * above); it waits for the reply, unless optuna_proc_ask_ahead()
 * sent the ask before (then the reply is usually there already). 0 or -1.
 * optuna_proc_ask_ahead() sends an ask now (none when one is already due)
 * for the caller's next optuna_proc_ask(); an ask ahead never taken is
 * told `fail` at optuna_proc_close().
 * optuna_proc_tell() does not wait: the request is sent and its reply read
 * before the next ask's (an error then is a warning); told as
 * above (NaN or !ok: fail). Always 0 for a valid number.
 *
 * When the process dies, the next reply that is awaited finds it: it is
 * started again (the study re-opened from its storage, the sampler
 * reseeded) and every unanswered request sent again, at most 3 times in a
 * row; a reply not there within st->timeout_ms is an error (the process is
 * killed).
 *
 * The caller reaping children with waitpid(-1) passes each pid to
 * optuna_proc_reaped(), which says whether it was the Optuna process (then
 * it is not waited for again). optuna_proc_close() reads the replies still
 * due, ends the process (end of input, 5 s, SIGKILL) and frees p; it
 * returns -1 when a due reply could not be had. p and st's strings must
 * outlive the calls; st is copied.
 */
struct optuna_proc;
struct optuna_proc *optuna_proc_open(const struct optuna_study *st, const struct sweep_spec *spec,
                                     uint64_t seq);
int optuna_proc_ask(struct optuna_proc *p, const struct sweep_spec *spec, int64_t *number /* out */,
                    struct sweep_assign *out /* out */);
void optuna_proc_ask_ahead(struct optuna_proc *p);
int optuna_proc_tell(struct optuna_proc *p, int64_t number, bool ok, double value);
/* A tell with the state named: complete (value), fail, or pruned (Optuna
 * keeps the trial's last intermediate value as its value). */
enum optuna_state { OPTUNA_COMPLETE, OPTUNA_FAIL, OPTUNA_PRUNED };
int optuna_proc_tell_state(struct optuna_proc *p, int64_t number, enum optuna_state state, double value);
/* A trial that ran out of memory (skipped false) or was skipped as too
 * large for the budget: told so that the sampler avoids its region (see
 * docs/internals/optuna.md, "What does not fit"): PRUNED with nothing
 * reported, the user attribute leakproof_memory (outcome, predicted peak
 * and budget in bytes; NAN or 0: unknown), and an infeasible value of the
 * constraint leakproof gives every sampler that takes one. */
int optuna_proc_tell_memory(struct optuna_proc *p, int64_t number, bool skipped, double predicted_peak_bytes,
                            double budget_bytes);
/*
 * Intermediate values of a running trial, for its pruner: values[i] at
 * step steps[i] (trial.report(value, step); a step already reported, or a
 * value that is not finite, is left out), then trial.should_prune(). It
 * does not wait (Optuna's storage takes milliseconds a value): the answer
 * is read with the replies before a later ask, or by optuna_proc_poll(),
 * and a trial whose pruner said prune is then told by
 * optuna_proc_take_prune() (true once, with the last step and value of
 * the report it answered; -1 and NAN unknown). An error is a warning,
 * then.
 * optuna_proc_poll() reads, without waiting, the replies already there.
 */
int optuna_proc_report(struct optuna_proc *p, int64_t number, const int64_t *steps, const double *values,
                       size_t n);
void optuna_proc_poll(struct optuna_proc *p);
bool optuna_proc_take_prune(struct optuna_proc *p, int64_t number, int64_t *step /* out */,
                            double *value /* out */);
bool optuna_proc_reaped(struct optuna_proc *p, pid_t pid, int wait_status);
pid_t optuna_proc_pid(const struct optuna_proc *p);
int optuna_proc_close(struct optuna_proc *p);

/*
 * The password of a PostgreSQL store URI (percent-decoded), or NULL when
 * store_path is not one or has none. The caller frees.
 */
char *optuna_storage_password(const char *store_path);

/*
 * The default storage for a leakproof store path. A PostgreSQL store
 * ("postgresql://USER:PASSWORD@HOST:PORT/DB?..." or "postgres://"): the
 * same server and database through Optuna's RDB storage,
 * "postgresql+psycopg2://USER@HOST:PORT/DB?...&options=-csearch_path%3Doptuna"
 * (Optuna's tables in the schema "optuna", made when missing: the store
 * has a table "trials" of its own; the password left out: the
 * storage URL is stored and shown; optuna_storage_password() gives it to
 * the Optuna process; libpq's PGPASSWORD and ~/.pgpass work too). Else
 * "sqlite:///" + the absolute directory of store_path + "/optuna.db"
 * (so four slashes). The directory need not exist. Returns a string the
 * caller frees with free(), or NULL after printing a message (no working
 * directory, or a '?' in the path, which SQLAlchemy would read as a query).
 */
char *optuna_default_storage(const char *store_path);

/*
 * Pure parts, exposed for tests and messages.
 *
 * The search space as JSON (the "space" of the open request, in the form
 * of Optuna's --search-space): an object mapping each
 * dimension's name ("env:NAME" for an env dimension) to
 * optuna.distributions.distribution_to_json() of its distribution:
 *   DIM_RANGE, integer  → IntDistribution {low, high, log, step: 1}
 *   DIM_RANGE, float    → FloatDistribution {low, high, log, step: null}
 *   DIM_VALUES          → CategoricalDistribution {choices}: numbers when
 *                         every value is a number (parameters only), else
 *                         the values' text; DIM_CONST: a choice of one.
 * Returns a string the caller frees with free(), or NULL after printing a
 * message naming the dimension (log range with min <= 0, integer bounds
 * beyond 2^53, duplicate names).
 */
char *optuna_search_space_json(const struct sweep_spec *spec);

/*
 * Parse the Optuna process's answer to an ask — exactly one object
 * {"number": N, "params": {NAME: VALUE, ...}} with one entry per dimension
 * and nothing else — and map each value back into spec's space as
 * described above. Returns 0, or -1 after printing a message that
 * starts "unexpected output from 'optuna ask'" (out->values is then NULL).
 */
int optuna_parse_ask(const char *text, const struct sweep_spec *spec,
		     int64_t *number /* out */, struct sweep_assign *out /* out */);

/* The sampler seed of ask seq: splitmix64 of (seed, seq), 32 bits (numpy's
 * RandomState, which Optuna's samplers use, takes seeds below 2^32). */
uint32_t optuna_ask_seed(uint64_t seed, uint64_t seq);

#endif

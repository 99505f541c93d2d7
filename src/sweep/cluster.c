/*
 * cluster.c — executor slurm: a cluster sweep's controller, and its
 * workers.
 *
 * The controller (`leakproof sweep` of a file with executor slurm) writes
 * every trial pending, submits the workers as one job array (slurm.c) and
 * follows the sweep in the store until every trial has ended; a resume
 * submits new workers when trials are pending and none is left. With
 * on_oom resize (slurm.max_mem) the workers come in size classes: the
 * controller submits an array of each class that pending trials need
 * (trials.need_bytes) and no live array serves, and each worker claims
 * only what fits its memory (--worker-mem). A worker
 * (`sweep --worker ID`, what the job array runs) takes the sweep's file
 * from the store, enters the sweep's directory and runs the loop of a
 * local sweep (loop.c), which claims each trial from the store under a
 * lease instead of making it. "Workers and claims" in
 * docs/internals/sweeps.md. It calls loop.c and trial.c; runner.c calls it.
 */
#include "sweep/runner-int.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "platform/spawn.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "sweep/slurm.h"
#include "sweep/spec.h"
#include "util/util.h"

/* ---- a cluster sweep's controller ------------------------------------------ */

/* Every trial of a new cluster sweep, written pending (a transaction per
 * thousand). */
static int write_pending(struct runner *r)
{
	enum { CHUNK = 1000 };
	struct trial *ts = xcalloc(CHUNK, sizeof(*ts));
	struct trial_row *rows = xcalloc(CHUNK, sizeof(*rows));
	int rc = 0;
	for (;;) {
		size_t n = 0;
		while (n < CHUNK && fresh_trial(r, &ts[n]) == 0)
			n++;
		for (size_t i = 0; i < n; i++)
			rows[i] = (struct trial_row){
				.sweep_id = r->sweep_id, .idx = ts[i].idx, .attempt = 0, .params = ts[i].params,
				.env = ts[i].env, .argv = ts[i].argv_json, .vals = ts[i].vals, .status = TRIAL_PENDING,
				.optuna_number = -1,
			};
		if (n && store_trials_put_many(r->st, rows, n) < 0)
			rc = -1;
		for (size_t i = 0; i < n; i++)
			trial_free(&ts[i]);
		if (rc < 0 || n < CHUNK)
			break;
	}
	free(ts);
	free(rows);
	return rc;
}

/* An array of workers for left trials: of memory mem_bytes (a size class;
 * 0: slurm.mem, the only size without classes). 0 or -1. */
static int submit_workers(struct runner *r, int64_t left, uint64_t mem_bytes)
{
	const struct sweep_slurm *sl = &r->spec.slurm;
	int workers = r->o->parallel ? r->o->parallel : sl->workers ? sl->workers :
	              r->spec.parallel > 1 ? r->spec.parallel : 4;
	if (left > 0 && workers > left)
		workers = (int)left;
	/* a SQLite store by its absolute path: the workers may start elsewhere */
	char *abs = strstr(r->o->store_path, "://") ? NULL : realpath(r->o->store_path, NULL);
	struct slurm_submit sub = {
		.slurm = sl, .workers = workers, .exe = r->exe, .store = abs ? abs : r->o->store_path,
		.sweep_id = r->sweep_id, .dir = r->logdir, .mem_bytes = mem_bytes,
	};
	int64_t job;
	int rc = slurm_submit_array(&sub, &job);
	free(abs);
	if (rc < 0)
		return -1;
	r->slurm_array = job;
	store_sweep_set_executor(r->st, r->sweep_id, "slurm", job);
	int submits = 1;
	for (size_t i = 0; i < r->narrays; i++)
		if (r->arrays[i].mem_bytes == mem_bytes)
			submits++;
	r->arrays = xrealloc(r->arrays, (r->narrays + 1) * sizeof(*r->arrays));
	r->arrays[r->narrays++] = (struct slurm_array){ .job = job, .mem_bytes = mem_bytes, .submits = submits };
	char size[48] = "";
	if (mem_bytes) {
		char b[32];
		snprintf(size, sizeof(size), " of %s", fmt_bytes(b, sizeof(b), (double)mem_bytes));
	}
	fprintf(stderr, "leakproof: sweep %lld: %lld trial%s for %d SLURM worker%s%s: job array %lld"
	        " (output in %s/worker-%lld_N.out)\n", (long long)r->sweep_id, (long long)left, left == 1 ? "" : "s",
	        workers, workers == 1 ? "" : "s", size, (long long)job, r->logdir, (long long)job);
	return 0;
}

#define CLASS_SUBMITS_MAX 3        /* arrays of one size class a controller submits */

/*
 * Sized workers (on_oom resize): an array for each size class that
 * pending trials need and no live array of at least that size serves,
 * the largest first, as many workers as such trials (at most
 * slurm.workers). A larger worker claims a smaller trial too, the
 * largest first (store_trial_claim). The number of arrays submitted,
 * -1 on error; *alive: whether an array submitted so far still lives.
 */
static int submit_classes(struct runner *r, bool *alive)
{
	uint64_t need[64];
	int64_t count[64];
	*alive = false;
	int n = store_trial_pending_needs(r->st, r->sweep_id, need, count, 64);
	if (n < 0)
		return -1;
	bool *live = xcalloc(r->narrays + 1, sizeof(bool));
	for (size_t i = 0; i < r->narrays; i++) {
		live[i] = slurm_job_alive(r->arrays[i].job) != 0;   /* squeue cannot say: alive */
		*alive |= live[i];
	}
	int submitted = 0;
	int64_t wanting = 0;   /* trials of this class and larger */
	for (int k = 0; k < n; k++) {   /* by need, the largest first */
		uint64_t cls = slurm_size_class(r->memory_max, r->memory_max_mem, need[k] ? need[k] : r->memory_max);
		wanting += count[k];
		if (k + 1 < n && slurm_size_class(r->memory_max, r->memory_max_mem,
		                                  need[k + 1] ? need[k + 1] : r->memory_max) == cls)
			continue;   /* the same class: counted together */
		bool served = false;
		int submits = 0;
		for (size_t i = 0; i < r->narrays; i++) {
			if (live[i] && r->arrays[i].mem_bytes >= cls)
				served = true;
			if (r->arrays[i].mem_bytes == cls && r->arrays[i].submits > submits)
				submits = r->arrays[i].submits;
		}
		if (served || submits >= CLASS_SUBMITS_MAX)
			continue;
		if (submit_workers(r, wanting, cls) < 0) {
			free(live);
			return -1;
		}
		live = xrealloc(live, (r->narrays + 1) * sizeof(bool));
		live[r->narrays - 1] = true;
		*alive = true;
		submitted++;
	}
	free(live);
	return submitted;
}

/*
 * Follow a cluster sweep in the store until every trial has ended: leases
 * that ran out are ended (their trials pending again), and when trials
 * are pending but no worker of the sweep's job array is left, a resume
 * (may_submit) submits new workers once. Returns the exit status.
 */
static int follow(struct runner *r, bool may_submit, bool *complete)
{
	int sigfd = r->sigfd;   /* SIGINT, SIGTERM, SIGHUP; SIGCHLD of sbatch and squeue only wakes it */
	int64_t shown_finished = -1, shown_running = -1;
	int status = 0;
	*complete = false;
	for (;;) {
		struct trial_counts c;
		if (store_trials_expire(r->st, r->sweep_id, wall_seconds()) < 0 ||
		    store_trial_counts(r->st, r->sweep_id, &c) < 0) {
			/* the server restarts: the workers wait for it, and so does
			 * the controller that follows them */
			if (store_wait_back(r->st))
				continue;
			status = 1;
			break;
		}
		if (!r->o->quiet && (c.finished != shown_finished || c.running != shown_running)) {
			fprintf(stderr, "leakproof: sweep %lld: %lld of %lld trials ended, %lld running, %lld pending\n",
			        (long long)r->sweep_id, (long long)c.finished,
			        (long long)(c.finished + c.running + c.pending + c.interrupted), (long long)c.running,
			        (long long)c.pending);
			shown_finished = c.finished;
			shown_running = c.running;
		}
		if (!c.pending && !c.running) {
			*complete = true;
			while (store_sweep_set_status(r->st, r->sweep_id, SWEEP_DONE, wall_seconds(), 0) < 0 && store_wait_back(r->st))
				;
			break;
		}
		if (r->sized_workers && c.pending) {
			/* trials that need larger workers than those alive get them */
			bool alive;
			int n = submit_classes(r, &alive);
			if (n < 0) {
				status = 1;
				break;
			}
			if (!n && !alive && !c.running) {
				error("sweep %lld: its workers ended with %lld trial%s pending; submit new ones with: "
				      "leakproof sweep %s --resume=%lld", (long long)r->sweep_id, (long long)c.pending,
				      c.pending == 1 ? "" : "s", r->o->file ? r->o->file : "FILE", (long long)r->sweep_id);
				status = 1;
				break;
			}
		} else if (c.pending && !c.running) {
			int alive = r->slurm_array > 0 ? slurm_job_alive(r->slurm_array) : 0;
			if (alive == 0 && may_submit) {
				may_submit = false;
				if (submit_workers(r, c.pending, 0) < 0) {
					status = 1;
					break;
				}
			} else if (alive == 0) {
				error("sweep %lld: the workers of job %lld ended with %lld trial%s pending; "
				      "submit new ones with: leakproof sweep %s --resume=%lld", (long long)r->sweep_id,
				      (long long)r->slurm_array, (long long)c.pending, c.pending == 1 ? "" : "s",
				      r->o->file ? r->o->file : "FILE", (long long)r->sweep_id);
				status = 1;
				break;
			}
		}
		int stop = 0;
		int64_t until = mono_ns() + 2000000000LL;
		for (int64_t left; !stop && (left = until - mono_ns()) > 0;) {
			struct pollfd pfd = { .fd = sigfd, .events = POLLIN };
			if (poll(&pfd, 1, (int)(left / 1000000) + 1) <= 0)
				break;
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (si.ssi_signo != SIGCHLD)
					stop = (int)si.ssi_signo;
		}
		if (stop) {
			fprintf(stderr, "leakproof: no longer following sweep %lld (SIG%s); its workers go on\n",
			        (long long)r->sweep_id, sigabbrev_np(stop));
			status = 128 + stop;
			break;
		}
	}
	return status;
}

/* executor slurm: a new sweep's trials written pending and its workers
 * submitted, or a resumed one followed (and new workers submitted when
 * trials are left and none is); then followed to its end unless no_wait. */
int run_controller(struct runner *r, struct sweep_result *out)
{
	if (!r->o->resume) {
		int64_t total = (int64_t)r->total;
		if (store_sweep_set_executor(r->st, r->sweep_id, "slurm", 0) < 0 || write_pending(r) < 0 ||
		    submit_workers(r, total, r->sized_workers ? r->memory_max : 0) < 0)
			return 1;
	}
	out->sweep_id = r->sweep_id;
	out->ended = true;
	out->submitted = r->slurm_array;
	if (r->o->no_wait) {
		fprintf(stderr, "leakproof: follow it with: leakproof sweep %s --resume=%lld (or leakproof report sweep:%lld)\n",
		        r->o->file, (long long)r->sweep_id, (long long)r->sweep_id);
		return 0;
	}
	/* resumed: the array last submitted may still run; its size is not
	 * kept, so it counts as the smallest */
	if (r->o->resume && r->sized_workers && r->slurm_array > 0 && !r->narrays) {
		r->arrays = xcalloc(1, sizeof(*r->arrays));
		r->arrays[r->narrays++] = (struct slurm_array){ .job = r->slurm_array, .mem_bytes = r->memory_max };
	}
	bool complete;
	int status = follow(r, r->o->resume, &complete);
	out->complete = complete;
	return status;
}

/* ---- a worker ------------------------------------------------------------ */

/* A worker: chdir to the sweep's directory, its store path made absolute
 * first for the trials. 0, or -1 after a message. */
static int enter_sweep_dir(struct runner *r, const char *dir)
{
	char *here = getcwd(NULL, 0);
	bool same = here && !strcmp(here, dir);
	free(here);
	if (same)
		return 0;
	const char *store = r->o->store_path;
	if (!strstr(store, "://") && store[0] != '/') {
		r->store_abs = realpath(store, NULL);
		if (!r->store_abs)
			return error_errno("cannot make the store path '%s' absolute", store);
	}
	if (chdir(dir) < 0)
		return error_errno("sweep %lld runs its trials in '%s', which this worker cannot enter",
		                   (long long)r->sweep_id, dir);
	if (!r->o->quiet)
		fprintf(stderr, "leakproof: worker: trials of sweep %lld run in its directory '%s'\n",
		        (long long)r->sweep_id, dir);
	return 0;
}

/* Join sweep o->worker_id: its spec from the store (the text it began
 * with), trials claimed one after another until none is left. */
int run_worker(struct runner *r, struct sweep_result *out)
{
	const struct sweep_opts *o = r->o;
	struct sweep_row sw;
	int rc = store_get_sweep(r->st, o->worker_id, &sw);
	if (rc) {
		if (rc > 0)
			error("no sweep %lld in the store", (long long)o->worker_id);
		return rc > 0 ? LP_EXIT_USAGE : LP_EXIT_FAILURE;
	}
	r->sweep_id = sw.id;
	int status = LP_EXIT_FAILURE;
	if (sweep_spec_parse(sw.text, strlen(sw.text), sw.file, &r->spec) < 0) {
		sweep_row_release(&sw);
		return LP_EXIT_USAGE;
	}
	char *sweep_dir = sw.cwd && *sw.cwd ? xstrdup(sw.cwd) : NULL;
	sweep_row_release(&sw);
	if (r->spec.method == SWEEP_OPTUNA) {
		error("sweep %lld asks Optuna for its trials: it runs locally, not with workers", (long long)r->sweep_id);
		return LP_EXIT_USAGE;
	}
	/* signals blocked before setup() loads NVML (see sweep_run) */
	static const int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, 0 };
	r->sigfd = spawn_signalfd(sigs, NULL);
	if (r->sigfd < 0) {
		error_errno("cannot create signalfd");
		return LP_EXIT_FAILURE;
	}
	if (setup(r) < 0)
		return LP_EXIT_USAGE;
	r->parallel = o->parallel ? o->parallel : 1;   /* a worker runs one trial at a time unless told */
	r->worker = true;
	r->lease_s = o->lease_s > 0 ? o->lease_s : LEASE_DEFAULT_S;
	r->renew_at_ns = mono_ns() + (int64_t)(r->lease_s / 3 * 1e9);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	snprintf(r->worker_name, sizeof(r->worker_name), "%s:%d", host, (int)getpid());
	struct slurm_job_env job;
	slurm_job_env_read(&job);
	r->slurm_job_id = job.job_id;
	r->claimer = (struct trial_claimer){ .worker = r->worker_name, .slurm_job = job.in_job ? job.array_job : 0,
	                                     .slurm_task = job.array_task };
	if (r->sized_workers) {   /* its size class: it claims what fits it */
		r->worker_mem = o->worker_mem_bytes ? o->worker_mem_bytes : r->spec.slurm.mem_bytes;
		r->claimer.class_bytes = r->worker_mem;
	}
	r->step_prefix = slurm_step_prefix();
	if (make_logdir(r) < 0 || reload_rows(r) < 0) {
		free(sweep_dir);
		return LP_EXIT_FAILURE;
	}
	/* The trials run where the sweep was started, as its own would: their
	 * relative paths (the script, data, outputs) mean what they meant
	 * there. Before, a worker started by hand elsewhere ran them in its
	 * own directory, every trial failed and "the sweep is done". */
	if (sweep_dir && enter_sweep_dir(r, sweep_dir) < 0) {
		free(sweep_dir);
		return LP_EXIT_FAILURE;
	}
	free(sweep_dir);
	r->running = xcalloc((size_t)r->parallel, sizeof(*r->running));
	if (!o->quiet) {
		char slurm[96] = "";
		if (job.in_job)
			snprintf(slurm, sizeof(slurm), " (SLURM job %lld, array task %lld)", (long long)job.array_job,
			         (long long)job.array_task);
		fprintf(stderr, "leakproof: worker %s of sweep %lld%s: claiming trials\n", r->worker_name,
		        (long long)r->sweep_id, slurm);
	}
	bool ok = run_loop(r);
	struct trial_counts c;
	bool complete = ok && !r->stop_signal && store_trial_counts(r->st, r->sweep_id, &c) == 0 && !c.pending &&
	                !c.running;
	if (complete)
		store_sweep_set_status(r->st, r->sweep_id, SWEEP_DONE, wall_seconds(), 0);
	if (!o->quiet)
		fprintf(stderr, "leakproof: worker %s: %lld trial%s run%s\n", r->worker_name, (long long)r->done_count,
		        r->done_count == 1 ? "" : "s", r->stop_signal ? "; stopped" :
		        r->host_stopped ? "; this machine gets no more trials" : complete ? "; the sweep is done" : "");
	out->sweep_id = r->sweep_id;
	out->ended = true;
	out->complete = complete;
	out->worker = true;
	status = r->stop_signal ? 128 + r->stop_signal : ok && !r->host_stopped ? 0 : 1;
	return status;
}

/*
 * runner.c — `leakproof sweep`: every trial in its own supervised process.
 *
 * sweep_run(), the entry: the sweep file read and its run_options checked,
 * the store and the sweep opened (a new one, or one resumed: the trials an
 * earlier run left running, interrupted or OOM'd queued to run again), the
 * Optuna process and the prefork template started, then the loop (loop.c)
 * runs the trials (trial.c). With executor slurm this process is the
 * controller instead, and with --worker ID a worker (cluster.c).
 *
 * The runner's files, each calling only those below it (make
 * check-layers): runner.c → cluster.c (the controller, a worker) → loop.c
 * (the next trial, skips, admission, waiting) → trial.c (a trial's values,
 * rows, start, end, pruning) → the rest of src/sweep/ (admit.c, expand.c,
 * memmodel.c, optuna.c, prefork.c, slurm.c, spec.c), which calls none of
 * these four. What they share is runner-int.h.
 */
#include "sweep/runner.h"
#include "sweep/runner-int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/locate.h"
#include "core/supervise.h"
#include "platform/nvml.h"
#include "platform/spawn.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "sweep/optuna.h"
#include "sweep/prefork.h"
#include "sweep/spec.h"
#include "util/util.h"

#define PREFORK_READY_MS 600000    /* importing torch from a network file system */

/* ---- the sweep ------------------------------------------------------------- */

/* Recorded "running" by a sweep that is gone: interrupted, to run again. */
static void requeue_interrupted(struct runner *r)
{
	for (size_t i = 0; i < r->nrows; i++) {
		const struct trial_row *row = &r->rows[i];
		if (last_attempt(r, row->idx) != row)
			continue;
		bool was_running = row->status == TRIAL_RUNNING;
		bool interrupted = row->status == TRIAL_INTERRUPTED;
		bool oom_to_retry = row->status == TRIAL_OOM && (r->spec.nretry || r->spec.on_oom_resize);
		if (!was_running && !interrupted && !oom_to_retry)
			continue;
		char **v = values_from_row(r, row->vals);
		if (!v) {
			warning("trial %lld does not fit the sweep file any more: not run again", (long long)row->idx + 1);
			continue;
		}
		struct trial t;
		memset(&t, 0, sizeof(t));
		t.idx = row->idx;
		t.values = v;
		t.optuna_number = row->optuna_number;
		if (oom_to_retry) {
			struct trial from = t;
			snprintf(from.note, sizeof(from.note), "%s", row->note);
			from.attempt = row->attempt;
			from.alloc_bytes = row->limit_bytes;   /* what it ran out of */
			bool ok = make_retry(r, &from, row->cause, &t);
			for (size_t d = 0; v[d]; d++)
				free(v[d]);
			free(v);
			if (!ok)
				continue;
		} else {
			t.attempt = row->attempt + 1;
			snprintf(t.note, sizeof(t.note), "run again: attempt %lld was interrupted", (long long)row->attempt);
			trial_derive(r, &t);
			if (was_running) {
				/* say so in the store: that attempt did not finish */
				struct trial_row upd = *row;
				upd.status = TRIAL_INTERRUPTED;
				upd.note = "the sweep stopped while it ran";
				int64_t run = store_trial_run(r->st, r->sweep_id, row->idx, row->attempt);
				if (run > 0)
					upd.run_id = run;
				store_trial_put(r->st, &upd);
			}
		}
		queue_push(r, &t);
	}
	reload_rows(r);
}

static int open_sweep(struct runner *r, char *text)
{
	const struct sweep_opts *o = r->o;
	char *abs = realpath(o->file, NULL);
	if (o->resume) {
		struct sweep_row sw;
		int rc = store_get_sweep(r->st, o->resume_id, &sw);
		if (rc) {
			free(abs);
			if (rc > 0)
				error(o->resume_id ? "no sweep %lld in the store" : "no sweep to resume in the store",
				      (long long)o->resume_id);
			return -1;
		}
		bool same = abs && !strcmp(sw.file, abs);
		if (!o->resume_id && !same) {
			error("the latest sweep in the store is of '%s', not '%s'; give its id: --resume=ID", sw.file,
			      o->file);
			sweep_row_release(&sw);
			free(abs);
			return -1;
		}
		bool slurm = !strcmp(sw.executor, "slurm");
		if (o->executor && slurm != !strcmp(o->executor, "slurm")) {
			error("sweep %lld ran with executor %s: resume it with the same", (long long)sw.id,
			      slurm ? "slurm" : "local");
			sweep_row_release(&sw);
			free(abs);
			return -1;
		}
		r->slurm = slurm;
		r->slurm_array = sw.slurm_job;
		/* a cluster sweep's controller may be followed from any shell */
		if (!slurm && sw.status == SWEEP_RUNNING && sw.pid > 0 && sw.pid != getpid() && kill(sw.pid, 0) == 0) {
			error("sweep %lld is still running (pid %d)", (long long)sw.id, sw.pid);
			sweep_row_release(&sw);
			free(abs);
			return -1;
		}
		if (strcmp(sw.text, text))
			warning("%s changed since sweep %lld began; the trials already run keep their values",
			        o->file, (long long)sw.id);
		r->sweep_id = sw.id;
		if (r->optuna_on) {
			r->optuna.storage = xstrdup(sw.optuna_storage);
			r->optuna.name = xstrdup(sw.optuna_study);
		}
		sweep_row_release(&sw);
		free(abs);
		if (r->slurm)
			return 0;   /* its status is the workers' to end */
		return store_sweep_set_status(r->st, r->sweep_id, SWEEP_RUNNING, 0, getpid());
	}
	char *cwd = getcwd(NULL, 0);   /* where its trials run, also a worker's started elsewhere */
	struct sweep_begin b = {
		.started_at = wall_seconds(), .file = abs ? abs : o->file, .text = text, .cwd = cwd,
		.method = r->spec.method == SWEEP_GRID ? "grid" : r->spec.method == SWEEP_RANDOM ? "random" : "optuna",
		.metric = r->spec.metric_name, .maximize = r->spec.maximize, .pid = getpid(),
		.executor = r->slurm ? "slurm" : NULL,
	};
	if (r->optuna_on)
		r->optuna.storage = optuna_default_storage(o->store_path);
	r->sweep_id = store_sweep_begin(r->st, &b);
	free(abs);
	free(cwd);
	if (r->sweep_id < 0)
		return -1;
	if (r->optuna_on) {
		/* the study is named after the sweep, now that it has an id */
		char study[64];
		snprintf(study, sizeof(study), "leakproof-sweep-%lld", (long long)r->sweep_id);
		r->optuna.name = xstrdup(study);
		if (store_sweep_set_optuna(r->st, r->sweep_id, r->optuna.storage, r->optuna.name) < 0)
			return -1;
	}
	return 0;
}

static void list_trials(struct runner *r)
{
	struct trial t;
	printf("%llu trial%s (%s):\n", (unsigned long long)r->total, r->total == 1 ? "" : "s",
	       r->spec.method == SWEEP_GRID ? "grid" : r->spec.method == SWEEP_RANDOM ? "random" : "optuna");
	if (r->spec.method == SWEEP_OPTUNA) {
		printf("  (asked of optuna one at a time)\n");
		return;
	}
	while (fresh_trial(r, &t) == 0) {
		struct strbuf sb = STRBUF_INIT;
		describe_values(r, t.values, &sb);
		printf("  %lld  %s\n     ", (long long)t.idx + 1, strbuf_str(&sb));
		for (size_t i = 0; t.argv[i]; i++) {
			struct strbuf q = STRBUF_INIT;
			strbuf_add_json_str(&q, t.argv[i]);
			printf(" %s", strbuf_str(&q));
			strbuf_release(&q);
		}
		printf("\n");
		strbuf_release(&sb);
		trial_free(&t);
	}
}

static void runner_release(struct runner *r)
{
	if (r->next) {
		trial_free(r->next);
		free(r->next);
	}
	for (size_t i = 0; i < r->nqueue; i++)
		trial_free(&r->queue[i]);
	free(r->queue);
	free(r->store_abs);
	free(r->running);
	clear_rows(r);
	admit_release(r);
	free(r->arrays);
	nvml_close(r->nvml);
	if (r->sigfd >= 0)
		close(r->sigfd);
	if (r->st)
		store_close(r->st);
	optuna_proc_close(r->oproc);
	prefork_stop(r->prefork);
	if (r->optuna_on) {
		free((char *)r->optuna.storage);
		free((char *)r->optuna.name);
	}
	sweep_spec_free(&r->spec);
}

/* The template of warm starts, when the file or --prefork asks for one;
 * where it cannot be, a warning says why and trials start cold. */
static void start_prefork(struct runner *r)
{
	char **mods = r->spec.prefork, **own = NULL;
	if (r->o->prefork) {
		size_t n = 0;
		char *list = xstrdup(r->o->prefork), *save = NULL;
		own = xcalloc(strlen(list) + 2, sizeof(char *));
		for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			own[n++] = xstrdup(tok);
		free(list);
		mods = own;
	}
	if (mods && mods[0]) {
		char why[512] = "";
		r->prefork = prefork_start(r->spec.command[0], python_client_dir(), mods, PREFORK_READY_MS, why,
		                           sizeof(why));
		if (!r->prefork)
			warning("prefork: %s: trials start cold", why);
		else if (!r->o->quiet)
			fprintf(stderr, "leakproof: prefork: %s imported once; trials are forked from it\n", mods[0]);
	}
	for (size_t i = 0; own && own[i]; i++)
		free(own[i]);
	free(own);
}

int sweep_run(const struct sweep_opts *o, struct sweep_result *out)
{
	struct runner r;
	memset(out, 0, sizeof(*out));
	memset(&r, 0, sizeof(r));
	r.o = o;
	r.sigfd = -1;
	int status = LP_EXIT_FAILURE;
	char *text = NULL;

	if (o->worker_id > 0) {
		r.st = store_open(o->store_path);
		if (r.st)
			supervise_end_interrupted(r.st);
		status = r.st ? run_worker(&r, out) : LP_EXIT_FAILURE;
		runner_release(&r);
		return status;
	}

	char buf[1 << 16];
	ssize_t len = read_file_buf(o->file, buf, sizeof(buf));
	if (len < 0) {
		error_errno("cannot read sweep file '%s'", o->file);
		return LP_EXIT_USAGE;
	}
	if (sweep_spec_parse(buf, (size_t)len, o->file, &r.spec) < 0)
		return LP_EXIT_USAGE;
	if (check_run_options(&r) < 0) {
		sweep_spec_free(&r.spec);
		return LP_EXIT_USAGE;
	}
	text = xstrdup(buf);
	r.slurm = o->executor ? !strcmp(o->executor, "slurm") : r.spec.executor == SWEEP_SLURM;
	r.optuna_on = r.spec.method == SWEEP_OPTUNA;
	r.optuna.optuna = "optuna";
	r.optuna.sampler = "TPESampler";
	r.optuna.seed = r.spec.seed;
	r.optuna.maximize = r.spec.maximize;
	if (r.slurm && r.spec.on_oom_resize && !r.spec.slurm.max_mem_bytes) {
		error("%s: on_oom: resize with executor slurm sizes the workers: slurm: {mem: SIZE, max_mem: SIZE}",
		      o->file);
		status = LP_EXIT_USAGE;
		goto out;
	}
	if (r.slurm && r.optuna_on) {
		error("%s: executor slurm runs grid and random sweeps; method optuna runs locally", o->file);
		status = LP_EXIT_USAGE;
		goto out;
	}
	if (r.spec.optuna_sampler)
		r.optuna.sampler = r.spec.optuna_sampler;
	r.optuna.sampler_kwargs = r.spec.optuna_sampler_kwargs;
	r.optuna.pruner = r.spec.optuna_pruner;
	r.optuna.pruner_kwargs = r.spec.optuna_pruner_kwargs;
	r.pruning = r.optuna_on && r.spec.optuna_pruner && r.spec.metric_name;
	/* Signals blocked before setup() loads NVML: a thread it starts keeps
	 * the mask it was born with and would take SIGCHLD from the signalfd. */
	static const int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, 0 };
	r.sigfd = spawn_signalfd(sigs, NULL);
	if (r.sigfd < 0) {
		error_errno("cannot create signalfd");
		goto out;
	}
	if (setup(&r) < 0) {
		status = LP_EXIT_USAGE;
		goto out;
	}
	if (o->dry_run) {
		list_trials(&r);
		status = 0;
		goto out;
	}

	r.st = store_open(o->store_path);
	if (!r.st)
		goto out;
	supervise_end_interrupted(r.st);
	if (open_sweep(&r, text) < 0)
		goto out;
	if (make_logdir(&r) < 0)
		goto out;
	if (r.slurm) {
		/* a worker's trials are SLURM job steps without a cgroup of their
		 * own, which a fork cannot join: said, not dropped silently */
		if ((o->prefork ? *o->prefork != '\0' : r.spec.prefork && r.spec.prefork[0]))
			warning("prefork: not with executor slurm: its workers start every trial cold");
		status = run_controller(&r, out);
		goto out;
	}
	if (reload_rows(&r) < 0)
		goto out;
	requeue_interrupted(&r);
	if (r.optuna_on) {
		char *pw = optuna_storage_password(o->store_path);
		r.optuna.password = pw;
		r.optuna.client_dir = python_client_dir();
		r.oproc = optuna_proc_open(&r.optuna, &r.spec, (uint64_t)r.nrows);
		free(pw);            /* optuna_proc_open() sent it */
		r.optuna.password = NULL;
		if (!r.oproc)
			goto out;
	}
	start_prefork(&r);

	r.running = xcalloc((size_t)r.parallel, sizeof(*r.running));
	if (!o->quiet)
		fprintf(stderr, "leakproof: sweep %lld: %llu trial%s, %d at a time%s\n", (long long)r.sweep_id,
		        (unsigned long long)r.total, r.total == 1 ? "" : "s", r.parallel,
		        o->resume ? " (resumed)" : "");

	bool ok = run_loop(&r);
	/* the tells still due are answered before the sweep is done */
	if (r.oproc && optuna_proc_close(r.oproc) < 0)
		ok = false;
	r.oproc = NULL;
	bool complete = !r.stop_signal && ok && !r.host_stopped;
	while (store_sweep_set_status(r.st, r.sweep_id, complete ? SWEEP_DONE : SWEEP_INTERRUPTED, wall_seconds(), 0) < 0 &&
	       store_wait_back(r.st))
		;
	out->sweep_id = r.sweep_id;
	out->ended = true;
	out->complete = complete;
	status = r.stop_signal ? 128 + r.stop_signal : ok && !r.host_stopped ? 0 : 1;
out:
	runner_release(&r);
	free(text);
	return status;
}

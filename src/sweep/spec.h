/*
 * spec.h — a sweep file (YAML, the format W&B sweep users know, plus
 * memory), parsed and checked (spec.c), and the trials it expands to
 * (expand.c).
 *
 *   command: [/usr/bin/python3, train.py, "${args}"]   # or "--lr={lr}"
 *   method: grid            # grid | random | optuna
 *   metric: {name: val_loss, goal: minimize}
 *   parameters:
 *     lr: {values: [0.1, 0.01, 0.001]}
 *     batch_size: {values: [32, 64, 4096]}
 *     dropout: {min: 0.0, max: 0.5}          # random and optuna
 *     layers: {min: 1, max: 4}               # integers: both bounds integers
 *     wd: {min: 1e-6, max: 1e-2, distribution: log_uniform}
 *     seed: {value: 7}                       # a constant
 *   env:                                     # runtime flags as dimensions
 *     OMP_NUM_THREADS: {values: ["1", "2"]}
 *   run_cap: 50
 *   parallel: 2
 *   seed: 0                                  # random and optuna
 *   memory: {max: 2G, restart: on-oom, expect: 1G}
 *   on_oom: {retry_with: {batch_size: half}}   # or fit: the largest predicted to fit
 *   max_consecutive_failures: 5              # then no more trials to that place; 0 never
 *   result_regex: '^val_loss=(\S+)'          # else the client's result()
 *   run_options: [--interval, 50ms]          # more `leakproof run` options
 *   executor: slurm                          # local (default) | slurm
 *   slurm: {workers: 8, partition: gpu, time: "04:00:00", mem: 16G,
 *           max_mem: 64G, gpus_per_task: 1, sbatch_args: ["--account=ml"]}
 *   optuna: {sampler: TPESampler, sampler_kwargs: {n_startup_trials: 5},
 *            pruner: MedianPruner, pruner_kwargs: {}}   # method optuna
 *   prefork: [torch, numpy]                  # imported once, trials forked
 *
 * Everything here is pure: no I/O besides reading the file, no globals.
 */
#ifndef LP_SWEEP_SPEC_H
#define LP_SWEEP_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sweep_method { SWEEP_GRID, SWEEP_RANDOM, SWEEP_OPTUNA };
enum sweep_executor { SWEEP_LOCAL, SWEEP_SLURM };

/* The slurm: block: how the workers of executor slurm are submitted (one
 * job array; docs/internals/sweeps.md). Unset fields leave SLURM's. */
struct sweep_slurm {
	int workers;                /* array tasks; 0: the default (parallel, else 4) */
	char *partition;            /* NULL: the cluster's default */
	char *time;                 /* SLURM's time syntax ("04:00:00", "90", "1-00"); NULL */
	uint64_t mem_bytes;         /* per worker; 0: SLURM's default */
	uint64_t max_mem_bytes;     /* on_oom resize: the largest worker; 0: none (one size) */
	int gpus_per_task;          /* 0: none asked */
	char **sbatch_args;         /* more sbatch options, NULL-terminated */
	size_t nsbatch_args;
};

/* A value of a dimension: the text as written, and whether it is a number. */
struct sweep_value {
	char *text;                 /* "0.01", "32", "adam", "true" */
	bool is_number;             /* parsed as a finite double */
	bool is_int;                /* ... and written as an integer */
	double num;
};

enum sweep_dim_kind {
	DIM_VALUES,                 /* {values: [...]}: a categorical choice */
	DIM_RANGE,                  /* {min, max}: uniform (log_uniform) on [min, max] */
	DIM_CONST,                  /* {value: x} */
};

struct sweep_dim {
	char *name;                 /* parameter name or environment variable */
	bool is_env;                /* from the env: section */
	enum sweep_dim_kind kind;
	struct sweep_value *values; /* DIM_VALUES: nvalues of them; DIM_CONST: 1 */
	size_t nvalues;
	double min, max;            /* DIM_RANGE */
	bool integer;               /* DIM_RANGE: both bounds written as integers */
	bool log;                   /* DIM_RANGE: distribution: log_uniform */
	int line, column;           /* where it was written (1-based), for messages */
};

struct sweep_spec {
	char *path;                 /* the file, as given */
	char **command;             /* argv template, NULL-terminated */
	size_t ncommand;
	enum sweep_method method;
	char *metric_name;          /* NULL: none */
	bool maximize;              /* goal: maximize (default minimize) */
	struct sweep_dim *dims;     /* parameters first, then env, in file order */
	size_t ndims;
	int64_t run_cap;            /* 0: no cap (grid: all; random/optuna: required) */
	int parallel;               /* default 1 */
	uint64_t seed;
	char *memory_max;           /* --max-mem text, NULL: none */
	char *memory_restart;       /* --restart text, NULL: none */
	char *memory_expect;        /* expected peak per trial (size text), NULL: learn */
	char *memory_max_mem;       /* memory.max_mem: the largest allocation a trial is
	                             * given when resized (size text); NULL: none */
	bool on_oom_resize;         /* on_oom: resize (the default with max_mem): a trial
	                             * gets the allocation the memory model predicts */
	char **retry_names;         /* on_oom.retry_with: parameter names ... */
	char **retry_rules;         /* ... and rules: "half" or "fit" */
	size_t nretry;
	char *result_regex;         /* NULL: results from the client */
	char **run_options;         /* extra `leakproof run` options, NULL-terminated */
	size_t nrun_options;
	size_t *run_option_line;    /* where each is in the file (1-based), */
	size_t *run_option_col;     /* for messages about it */
	enum sweep_executor executor;   /* executor: (default local) */
	struct sweep_slurm slurm;
	char *optuna_sampler;       /* optuna.sampler: a class of optuna.samplers; NULL: TPESampler */
	char *optuna_sampler_kwargs;/* optuna.sampler_kwargs as a JSON object; NULL: none */
	char *optuna_pruner;        /* optuna.pruner: a class of optuna.pruners; NULL: none */
	char *optuna_pruner_kwargs; /* optuna.pruner_kwargs as a JSON object; NULL: none */
	char **prefork;             /* prefork: modules a template imports once, NULL-terminated */
	size_t nprefork;
	int max_consecutive_failures;   /* OOMs or failures in a row on one place
	                                 * (this machine, a GPU) before it gets no
	                                 * more trials; 0: never */
};
#define SWEEP_MAX_FAILURES_DEFAULT 5

/* Whether t is a time limit in SLURM's syntax: minutes, MM:SS, HH:MM:SS,
 * D-HH, D-HH:MM, D-HH:MM:SS, or INFINITE / UNLIMITED. */
bool sweep_slurm_time_ok(const char *t);
/* An sbatch option the sweep owns (the array, output, script, ...), or
 * NULL: what a slurm.sbatch_args item may not set. */
const char *sweep_slurm_owned_arg(const char *arg);

/*
 * Parse and check path. Returns 0, or -1 after printing one message of the
 * form "leakproof: FILE:LINE:COLUMN: what is wrong" (YAML syntax errors,
 * unknown keys, wrong types, empty value lists, min > max, a range
 * dimension with method grid, a placeholder naming no parameter, ...).
 */
int sweep_spec_load(const char *path, struct sweep_spec *out);
/* The same from text in memory (path is only for messages). */
int sweep_spec_parse(const char *text, size_t len, const char *path, struct sweep_spec *out);
void sweep_spec_free(struct sweep_spec *s);

/* A trial's assignment: one value per dimension, in spec->dims order. */
struct sweep_assign {
	char **values;              /* ndims strings, as the program receives them */
};
void sweep_assign_free(struct sweep_assign *a, size_t ndims);

/*
 * Grid: the number of trials (product of the values' counts; DIM_RANGE is
 * refused at parse time for grid), and trial i of them (0-based; the last
 * dimension varies fastest). run_cap, when set, cuts the grid.
 */
uint64_t sweep_grid_size(const struct sweep_spec *s);
void sweep_grid_trial(const struct sweep_spec *s, uint64_t i, struct sweep_assign *out);

/*
 * Random: trial i drawn from its own stream seeded by (seed, i), so trial i
 * is the same whatever ran before it (resume needs that). Ranges: uniform
 * (or log-uniform), integers rounded; values: uniform choice. Numbers are
 * written with "%.17g" trimmed to the shortest form that reads back equal.
 */
void sweep_random_trial(const struct sweep_spec *s, uint64_t i, struct sweep_assign *out);

/*
 * The argv of a trial (NULL-terminated, freed with sweep_argv_free): the
 * template with "{name}" replaced by the value of parameter name inside any
 * argument, and an argument that is exactly "${args}" replaced by one
 * argument "--name=value" per parameter (not env) in dims order. Never a
 * shell: a value with spaces, quotes or ';' stays one argument. "{{" and
 * "}}" are literal braces.
 */
char **sweep_trial_argv(const struct sweep_spec *s, const struct sweep_assign *a);
void sweep_argv_free(char **argv);

/* The assignment as JSON objects: {"lr": 0.01, "opt": "adam"} for the
 * parameters (numbers as numbers) and {"OMP_NUM_THREADS": "1"} for env
 * (always strings). The caller frees with free(). */
char *sweep_params_json(const struct sweep_spec *s, const struct sweep_assign *a);
char *sweep_env_json(const struct sweep_spec *s, const struct sweep_assign *a);

#endif

/*
 * cmd.h — the subcommands. Each src/cmd/NAME.c has its usage at the top
 * (NAME_usage: its prose and its table of options) and exports
 * cmd_NAME(argc, argv), with argv[0] the subcommand's name. Each returns
 * the process exit status.
 */
#ifndef LP_CMD_H
#define LP_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/supervise.h"
#include "util/options.h"

/*
 * A command's usage: the usage lines and the prose before its options, the
 * table of its options (util/options.h), the prose after them. Its --help
 * is head, a blank line, the options as the table lists them, a blank line,
 * tail; `leakproof help --complete-options NAME` lists the table for the
 * shell's completion.
 */
struct cmd_usage {
	const char *name;                   /* "run" */
	const char *head;
	const struct option_spec *options;
	const char *tail;
	bool stop_at_operand;               /* run: the job's command and its options begin at the
	                                       first word that is not an option */
};

/* --store, as every command that reads or writes the store has it. */
#define CMD_OPT_STORE OPT_VALUE('s', "store", "PATH", "the store (default $LEAKPROOF_STORE, else\n" \
                                                       "./.leakproof/leakproof.db)")

extern const struct cmd_usage run_usage, attach_usage, report_usage, ls_usage, sweep_usage, top_usage,
	judge_usage;

/* The command's whole --help on out. */
void cmd_usage_print(const struct cmd_usage *u, FILE *out);
/*
 * A command's own reading of one of its options, for cmd_options_read():
 * id is what options_next() returns (the short name, or a number from
 * 256), the value is p->value (NULL when none was given) and the option
 * p->opt. 0, or the status to return at once (124 after a usage error it
 * said).
 */
typedef int cmd_take_option_fn(void *ctx, int id, const struct options_parse *p);
/*
 * Read argv's options (argv[0] the command's name) with u's table, each
 * in turn to take(ctx, id, p), until their end; the operands are then
 * p->operands[0..p->noperands). p NULL: the command takes no operands,
 * and one is a usage error ("unexpected argument 'x'"). -1 when all were
 * read and taken, else the status to return at once: 0 once --help
 * printed the help, 124 after a usage error ("unknown option '--bogus'",
 * "option '-s' needs a value", "option '--max-mem' needs a value before
 * '--'"), or what take returned.
 */
int cmd_options_read(struct options_parse *p, const struct cmd_usage *u, int argc, char **argv,
                     cmd_take_option_fn *take, void *ctx);

int cmd_run(int argc, char **argv);
/* Check `leakproof run` options (opts[0..n)) without running anything, as
 * a sweep's trials will get them; from opts[first] on they come from the
 * sweep file, where the options the sweep owns (--store, --trial, --quiet,
 * ...), a "--" and a non-option word are refused. 0, or -1 with the reason
 * in why and the index of the option at fault in *bad (a refused value
 * also prints `leakproof run`'s own message). For sweep_opts. */
int cmd_run_check_options(char *const *opts, size_t n, size_t first, size_t *bad, char *why, size_t whysz);
int cmd_attach(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_judge(int argc, char **argv);

/* "leakproof: MESSAGE" and "Try 'leakproof CMD --help'..." on stderr;
 * returns 124, the usage-error status. */
int cmd_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * What `run` and `attach` read alike (a job watched: one run starts, or
 * one already running): the supervisor's options, --store, --max-mem
 * and --soft-limit as given, until cmd_watch_budgets() makes bytes of
 * the budgets, and -q.
 */
struct watch_args {
	struct supervise_opts o;
	const char *store_opt, *max_mem, *soft;
	bool quiet;                /* no summary at the end */
};
/* The ids of the options both read that have no short name (-i, -m, -q, -r
 * and -s are the others); each command numbers its own from WATCH_OPT_OWN. */
enum {
	WATCH_OPT_MAX_MEM = 256, WATCH_OPT_SOFT_LIMIT, WATCH_OPT_GRACE, WATCH_OPT_NO_CGROUP,
	WATCH_OPT_NO_STATUS_LINE, WATCH_OPT_OWN,
};
/* One of the options both read, id with its value arg, into w; any other
 * id is left alone. 0, or 124 after a usage error. */
int cmd_watch_option(const char *cmd, struct watch_args *w, int id, const char *arg);
/* --max-mem (a size, or a percentage of the enclosing cgroup's limit,
 * else of the machine's memory) and --soft-limit (a size, or a percentage
 * of --max-mem) into w->o's bytes: 0, or 124 after a usage error. */
int cmd_watch_budgets(const char *cmd, struct watch_args *w);
struct gate;
/*
 * Watch the job w describes, once its options are checked: open the store
 * (124 for one that would lose the run, 125 when it cannot be opened),
 * supervise the job, and when it has ended judge its stored run, record
 * the verdict with the end, print the summary on stderr unless w->quiet,
 * then check gate (NULL: none; what it finds is printed even when quiet).
 * Returns supervise()'s status (the job's own, for `run`), or
 * GATE_EXIT_STATUS when the job succeeded but broke the gate.
 */
int cmd_watch(struct watch_args *w, const struct gate *gate);
/* A signal by name or number ("TERM", "SIGTERM", "15"): its number, or -1. */
int cmd_parse_signal(const char *s);

/* --format of the commands that write text or JSON: *json set and 0, or
 * 124 after "unknown --format 'yaml' (use text or json)". */
int cmd_parse_text_or_json(const char *cmd, const char *value, bool *json);
/* --format (text or json) and --store, as the commands that list what the
 * store holds read them (ls, top). */
struct listing_args {
	const char *format;        /* as given; NULL: text */
	bool json;
	const char *store_opt;     /* NULL: the default store */
};
/* One option id with its value into l: --format ('f') or --store ('s');
 * any other id is left alone. 0, or 124 after a usage error. */
int cmd_listing_option(const char *cmd, struct listing_args *l, int id, const char *value);
/* A whole number in [min, max]: 0 and *out set, or -1 (nothing printed). */
int cmd_parse_int(const char *s, long long min, long long max, long long *out);

#endif

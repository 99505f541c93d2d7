/*
 * cmd.h — the subcommands. Each src/cmd/NAME.c has its usage text at the top
 * and exports cmd_NAME(argc, argv), with argv[0] the subcommand's name.
 * Each returns the process exit status.
 */
#ifndef LP_CMD_H
#define LP_CMD_H

#include <stddef.h>

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
/* A whole number in [min, max]: 0 and *out set, or -1 (nothing printed). */
int cmd_parse_int(const char *s, long long min, long long max, long long *out);

#endif

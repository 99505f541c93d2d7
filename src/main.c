/*
 * main.c — the command table and global options. Each subcommand lives in
 * src/cmd/NAME.c with its own usage: its text and its table of options.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "util/options.h"
#include "util/util.h"

static const char usage[] =
"usage: leakproof [--version] [--help] COMMAND [ARGS...]\n"
"\n"
"Keep machine-learning jobs alive through memory leaks, and say where the\n"
"memory goes.\n"
"\n"
"commands:\n"
"  run      supervise a job: sample its memory, mark steps, judge leak vs plateau\n"
"  attach   watch a job already running (by pid) as run watches its own\n"
"  sweep    run every trial of a search in its own supervised process\n"
"  report   show a stored run or sweep: text, md, csv, json, html, svg or junit\n"
"  ls       list the runs in the store\n"
"  top      live view of the runs: memory, growth, verdict so far, time to limit\n"
"  judge    judge a memory series read on stdin, as a run's steps are judged\n"
"  help     show the help of a command\n"
"\n"
"`leakproof COMMAND --help` tells more; `man leakproof` tells all.\n";

static const struct cmd_entry {
	const char *name;
	int (*fn)(int argc, char **argv);
	const struct cmd_usage *usage;
} commands[] = {
	{ "run", cmd_run, &run_usage },
	{ "attach", cmd_attach, &attach_usage },
	{ "report", cmd_report, &report_usage },
	{ "ls", cmd_ls, &ls_usage },
	{ "sweep", cmd_sweep, &sweep_usage },
	{ "top", cmd_top, &top_usage },
	{ "judge", cmd_judge, &judge_usage },
};

static const struct cmd_entry *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

/* `leakproof help --complete-options CMD`, for the shell's completion
 * (completion/leakproof.bash): CMD's options from its table, one name a
 * line ("--interval DUR", "-i DUR", "--census[=DUR]", "--quiet"). Not in
 * the help: it is the completion's. */
static int complete_options(const char *name)
{
	const struct cmd_entry *c = find_command(name);
	if (!c) {
		error("'%s' is not a leakproof command; see 'leakproof --help'", name);
		return LP_EXIT_USAGE;
	}
	struct strbuf sb = STRBUF_INIT;
	options_list(&sb, c->usage->options);
	fputs(strbuf_str(&sb), stdout);
	strbuf_release(&sb);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return LP_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(name, "--version") || !strcmp(name, "-V")) {
		printf("leakproof %s\n", LP_VERSION);
		return 0;
	}
	if (!strcmp(name, "help")) {
		if (argc < 3) {
			fputs(usage, stdout);
			return 0;
		}
		if (!strcmp(argv[2], "--complete-options") && argc == 4)
			return complete_options(argv[3]);
		const struct cmd_entry *c = find_command(argv[2]);
		if (!c) {
			error("'%s' is not a leakproof command; see 'leakproof --help'", argv[2]);
			return LP_EXIT_USAGE;
		}
		char *help_argv[] = { (char *)c->name, (char *)"--help", NULL };
		return c->fn(2, help_argv);
	}
	const struct cmd_entry *c = find_command(name);
	if (!c) {
		error("'%s' is not a leakproof command; see 'leakproof --help'", name);
		return LP_EXIT_USAGE;
	}
	return c->fn(argc - 1, argv + 1);
}

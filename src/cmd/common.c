/*
 * common.c — what the subcommands share: reading their options with
 * their tables, their --help, the usage-error message and whole numbers
 * from the command line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "util/util.h"

int cmd_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fputs("leakproof: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'leakproof %s --help' for more information.\n", cmd);
	return LP_EXIT_USAGE;
}

int cmd_parse_text_or_json(const char *cmd, const char *value, bool *json)
{
	if (strcmp(value, "text") && strcmp(value, "json"))
		return cmd_usage_error(cmd, "unknown --format '%s' (use text or json)", value);
	*json = !strcmp(value, "json");
	return 0;
}

int cmd_parse_int(const char *s, long long min, long long max, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

void cmd_usage_print(const struct cmd_usage *u, FILE *out)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s\n", u->head);
	options_help(&sb, u->options);
	strbuf_addf(&sb, "\n%s", u->tail);
	fputs(strbuf_str(&sb), out);
	strbuf_release(&sb);
}

void cmd_options_init(struct options_parse *p, const struct cmd_usage *u, int argc, char **argv)
{
	options_parse_init(p, u->options, u->stop_at_operand, argc, argv);
}

int cmd_option_next(struct options_parse *p, const struct cmd_usage *u, int *status)
{
	int c = options_next(p);
	switch (c) {
	case 'h':
		cmd_usage_print(u, stdout);
		*status = 0;
		return -1;
	case OPTIONS_UNKNOWN:
		*status = cmd_usage_error(u->name, "unknown option '%s'", p->word);
		return -1;
	case OPTIONS_NEEDS_VALUE:
		*status = cmd_usage_error(u->name, "option '%s' needs a value", p->word);
		return -1;
	case OPTIONS_VALUE_IS_END:
		*status = cmd_usage_error(u->name, "option '%s' needs a value before '--'", p->word);
		return -1;
	default:
		return c;
	}
}

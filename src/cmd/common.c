/*
 * common.c — what the subcommands share: the usage-error message and
 * whole numbers from the command line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

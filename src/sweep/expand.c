/*
 * expand.c — the trials a checked sweep spec (spec.c) expands to: the grid
 * in order, random draws, the argv of a trial, and its parameters and
 * environment as JSON. The contract is spec.h. Pure: no I/O, no globals.
 *
 * Values. The values written in the file reach the program as written;
 * only drawn values are formatted: integers in full, others with the
 * shortest "%.17g"-style text that reads back equal.
 *
 * Random trials. Trial i has its own splitmix64 stream, started from
 * mix(mix(seed) + (i + 1) * golden), and every dimension takes exactly one
 * 64-bit draw from it in dims order, so trial i depends only on the seed, i
 * and the dimensions, not on the trials drawn before it.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep/spec.h"
#include "sweep/spec-int.h"
#include "util/json.h"
#include "util/jsonw.h"
#include "util/util.h"

#define GOLDEN 0x9e3779b97f4a7c15ULL

void sweep_assign_free(struct sweep_assign *a, size_t ndims)
{
	if (!a)
		return;
	for (size_t i = 0; a->values && i < ndims; i++)
		free(a->values[i]);
	free(a->values);
	a->values = NULL;
}

uint64_t sweep_grid_size(const struct sweep_spec *s)
{
	uint64_t size = 1;
	for (size_t i = 0; i < s->ndims; i++) {
		if (s->dims[i].kind == DIM_RANGE)
			return 0;
		if (size > UINT64_MAX / s->dims[i].nvalues)
			size = UINT64_MAX;
		else
			size *= s->dims[i].nvalues;
	}
	if (s->run_cap > 0 && (uint64_t)s->run_cap < size)
		size = (uint64_t)s->run_cap;
	return size;
}

static char *format_range_value(const struct sweep_dim *d, double v)
{
	char buf[64];
	if (d->integer)
		snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)v);
	else
		sweep_format_double(buf, sizeof(buf), v);
	return xstrdup(buf);
}

void sweep_grid_trial(const struct sweep_spec *s, uint64_t i, struct sweep_assign *out)
{
	out->values = xcalloc(s->ndims + 1, sizeof(char *));
	for (size_t k = s->ndims; k-- > 0;) {
		const struct sweep_dim *d = &s->dims[k];
		if (d->kind == DIM_RANGE) {     /* refused for grid; the low end if asked anyway */
			out->values[k] = format_range_value(d, d->min);
			continue;
		}
		out->values[k] = xstrdup(d->values[i % d->nvalues].text);
		i /= d->nvalues;
	}
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t splitmix_next(uint64_t *state)
{
	*state += GOLDEN;
	return mix64(*state);
}

/* One dimension's value from one 64-bit draw x. */
static char *draw(const struct sweep_dim *d, uint64_t x)
{
	double u = (double)(x >> 11) * 0x1p-53;        /* [0, 1) */
	if (d->kind == DIM_CONST)
		return xstrdup(d->values[0].text);
	if (d->kind == DIM_VALUES) {
		size_t k = (size_t)(u * (double)d->nvalues);
		return xstrdup(d->values[k < d->nvalues ? k : d->nvalues - 1].text);
	}
	double v;
	if (d->integer && !d->log) {
		/* Each integer of [min, max] equally likely. */
		double count = d->max - d->min + 1;
		v = d->min + floor(u * count);
	} else if (d->integer) {
		/* Log-uniform on [min - 0.5, max + 0.5), rounded: every integer
		 * of the range can come out, the small ones more often. */
		double lo = log(d->min - 0.5), hi = log(d->max + 0.5);
		v = floor(exp(lo + u * (hi - lo)) + 0.5);
	} else if (d->log) {
		double lo = log(d->min), hi = log(d->max);
		v = exp(lo + u * (hi - lo));
	} else {
		v = d->min + u * (d->max - d->min);
	}
	if (v < d->min)
		v = d->min;
	if (v > d->max)
		v = d->max;
	return format_range_value(d, v);
}

void sweep_random_trial(const struct sweep_spec *s, uint64_t i, struct sweep_assign *out)
{
	uint64_t state = mix64(mix64(s->seed) + (i + 1) * GOLDEN);
	out->values = xcalloc(s->ndims + 1, sizeof(char *));
	for (size_t k = 0; k < s->ndims; k++)
		out->values[k] = draw(&s->dims[k], splitmix_next(&state));
}

/* One argument of the template with its placeholders replaced. */
static char *expand_arg(const struct sweep_spec *s, const struct sweep_assign *a, const char *t)
{
	struct strbuf sb = STRBUF_INIT;
	for (const char *p = t; *p;) {
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
			strbuf_addch(&sb, *p);
			p += 2;
			continue;
		}
		if (*p == '{') {
			const char *close = strchr(p + 1, '}');
			size_t i = close ? sweep_find_param(s, p + 1, (size_t)(close - p - 1)) : SIZE_MAX;
			if (i != SIZE_MAX) {
				strbuf_addstr(&sb, a->values[i]);
				p = close + 1;
				continue;
			}
		}
		strbuf_addch(&sb, *p++);
	}
	return strbuf_detach(&sb, NULL);
}

char **sweep_trial_argv(const struct sweep_spec *s, const struct sweep_assign *a)
{
	size_t nparams = 0, n = 0;
	for (size_t i = 0; i < s->ndims; i++)
		nparams += !s->dims[i].is_env;
	for (size_t i = 0; i < s->ncommand; i++)
		n += strcmp(s->command[i], "${args}") ? 1 : nparams;
	char **argv = xcalloc(n + 1, sizeof(char *));
	n = 0;
	for (size_t i = 0; i < s->ncommand; i++) {
		if (strcmp(s->command[i], "${args}")) {
			argv[n++] = expand_arg(s, a, s->command[i]);
			continue;
		}
		for (size_t d = 0; d < s->ndims; d++) {
			if (s->dims[d].is_env)
				continue;
			struct strbuf sb = STRBUF_INIT;
			strbuf_addf(&sb, "--%s=%s", s->dims[d].name, a->values[d]);
			argv[n++] = strbuf_detach(&sb, NULL);
		}
	}
	return argv;
}

void sweep_argv_free(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

/* Whether value text of dimension d is a number: as written for values
 * from the file (a quoted "1" is a string), by its syntax otherwise. */
static bool value_is_number(const struct sweep_dim *d, const char *t)
{
	if (d->kind == DIM_RANGE)
		return true;
	for (size_t i = 0; i < d->nvalues; i++)
		if (!strcmp(d->values[i].text, t))
			return d->values[i].is_number;
	double v;
	return sweep_parse_number(t, &v, NULL);
}

static char *assign_json(const struct sweep_spec *s, const struct sweep_assign *a, bool env)
{
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_object_begin(&jw, false);
	for (size_t i = 0; i < s->ndims; i++) {
		const struct sweep_dim *d = &s->dims[i];
		const char *v = a->values[i];
		if (d->is_env != env)
			continue;
		double num;
		const char *end;
		if (env || !value_is_number(d, v) || !sweep_parse_number(v, &num, NULL)) {
			jw_object_string(&jw, d->name, v);
		} else if ((end = json_number_end(v, NULL)) && !*end) {
			jw_object_key(&jw, d->name);
			strbuf_addstr(&sb, v);
		} else {        /* "+1", "007", ".5": the same number in JSON's syntax */
			char buf[64];
			sweep_format_double(buf, sizeof(buf), num);
			jw_object_key(&jw, d->name);
			strbuf_addstr(&sb, buf);
		}
	}
	jw_end(&jw);
	return strbuf_detach(&sb, NULL);
}

char *sweep_params_json(const struct sweep_spec *s, const struct sweep_assign *a)
{
	return assign_json(s, a, false);
}

char *sweep_env_json(const struct sweep_spec *s, const struct sweep_assign *a)
{
	return assign_json(s, a, true);
}

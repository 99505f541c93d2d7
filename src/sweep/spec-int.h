/*
 * spec-int.h — what the two halves of the sweep spec share, private to
 * them: spec.c (parsing) defines these, expand.c (the trials) uses them.
 */
#ifndef LP_SWEEP_SPEC_INT_H
#define LP_SWEEP_SPEC_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "sweep/spec.h"

/* A number in decimal syntax ([+-] digits [. digits] [e [+-] digits]) with
 * a finite value: true with *v (and *is_int: no point, no exponent; may be
 * NULL), else false. */
bool sweep_parse_number(const char *t, double *v, bool *is_int);
/* The shortest "%.Ng" (N <= 17) that reads back as v, into buf. */
void sweep_format_double(char *buf, size_t bufsz, double v);
/* The parameter (not env) dimension named by the len bytes at name: its
 * index in s->dims, or SIZE_MAX. */
size_t sweep_find_param(const struct sweep_spec *s, const char *name, size_t len);

#endif

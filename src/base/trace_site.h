/*
 * trace_site.h — one allocation site of a traced run, as the supervisor
 * gathers it (core/trace.c) and the store keeps it (store/trace.c). A site
 * is one allocation stack: native frames as (object file, address in that
 * file) plus the Python frames above them. Sizes in bytes.
 */
#ifndef LP_BASE_TRACE_SITE_H
#define LP_BASE_TRACE_SITE_H

#include <stdbool.h>
#include <stdint.h>

struct trace_site {
	int64_t id;                /* 1, 2, ... in the order first seen */
	char kind;                 /* 'm' heap, 'a' anonymous mmap */
	char *frames;              /* "PATH\t0xVADDR\tSYMBOL\n" per frame, innermost first */
	char *python;              /* "LINE:FUNCTION:FILE\t..." innermost first, or NULL */
	int64_t live;              /* estimated live bytes, all processes */
	int64_t allocs, frees;     /* sampled, all processes */
	bool dirty;                /* changed since trace_take_dirty() */
	int64_t taken_live;        /* live as of the last trace_take_dirty() that returned it */
};

#endif

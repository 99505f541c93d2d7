/*
 * core/symbolize.h — naming the frames of a traced run's allocation sites.
 * The tracer records return addresses ("PATH\tVADDR\tSYMBOL\n" per frame);
 * here they become "FUNCTION\tSOURCE\n" per frame, with libdw.
 */
#ifndef LP_CORE_SYMBOLIZE_H
#define LP_CORE_SYMBOLIZE_H

#include <stdint.h>

#include "store/store.h"

struct symbolizer;

/* Name the frames of the run's sites not yet named (libdw), in the store.
 * Returns the number named, -1 on error. */
int trace_symbolize_run(struct store *st, int64_t run_id);

/* "FUNCTION\tSOURCE\n" per frame of frames ("PATH\tVADDR\tSYMBOL\n" lines);
 * *sy is created on first use, the caller frees it with symbolizer_free().
 * Returns a string the caller frees (never NULL). */
char *trace_symbolize_frames(struct symbolizer **sy, const char *frames);

/* Split "A\tB\tC\n..." lines: the next line's fields into f[0..nf). Returns
 * the rest of the text, or NULL at the end. Modifies the text. */
char *trace_text_next_line(char *text, char **f, int nf);

#endif

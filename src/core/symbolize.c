/*
 * core/symbolize.c — names the frames of a traced run's allocation sites
 * (libdw, through platform/symbols) and writes the names to the store at the
 * end of the run (see symbolize.h). The supervisor calls it; judge/sites.c
 * names frames the same way when a run was killed before its end.
 */
#include "core/symbolize.h"

#include <stdlib.h>
#include <string.h>

#include "platform/symbols.h"
#include "store/trace.h"
#include "util/util.h"

/* Split "A\tB\tC\n..." lines: the next line's fields into f[0..nf). Returns
 * the rest of the text, or NULL at the end. Modifies the text. */
char *trace_text_next_line(char *text, char **f, int nf)
{
	if (!text || !*text)
		return NULL;
	char *end = strchr(text, '\n');
	if (end)
		*end++ = '\0';
	for (int i = 0; i < nf; i++) {
		f[i] = text;
		char *tab = i < nf - 1 ? strchr(text, '\t') : NULL;
		if (tab) {
			*tab = '\0';
			text = tab + 1;
		} else {
			text += strlen(text);
		}
	}
	return end ? end : text;
}

/* "FUNCTION\tSOURCE\n" per frame of "PATH\tVADDR\tSYMBOL\n" lines. */
char *trace_symbolize_frames(struct symbolizer **sy, const char *frames)
{
	if (!*sy)
		*sy = symbolizer_new();
	struct strbuf sb = STRBUF_INIT;
	char *copy = xstrdup(frames), *f[3], *p = copy;
	while ((p = trace_text_next_line(p, f, 3))) {
		char fn[512], src[256];
		/* the tracer sends return addresses less one: inside the call */
		symbolizer_lookup(*sy, f[0], strtoull(f[1], NULL, 16), f[2], fn, sizeof(fn), src, sizeof(src));
		strbuf_addf(&sb, "%s\t%s\n", fn, src);
	}
	free(copy);
	strbuf_addstr(&sb, "");   /* never NULL, even with no frames */
	return strbuf_detach(&sb, NULL);
}

int trace_symbolize_run(struct store *st, int64_t run_id)
{
	struct trace_site_row *rows;
	size_t n;
	if (store_trace_load_sites(st, run_id, &rows, &n) < 0)
		return -1;
	struct symbolizer *sy = NULL;
	int64_t *ids = xcalloc(n + 1, sizeof(*ids));
	char **texts = xcalloc(n + 1, sizeof(*texts));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!rows[i].symbols) {
			ids[k] = rows[i].site;
			texts[k++] = trace_symbolize_frames(&sy, rows[i].frames);
		}
	int r = k ? store_trace_set_symbols(st, run_id, ids, texts, k) : 0;
	for (size_t i = 0; i < k; i++)
		free(texts[i]);
	free(texts);
	free(ids);
	symbolizer_free(sy);
	trace_site_rows_free(rows, n);
	return r < 0 ? -1 : (int)k;
}

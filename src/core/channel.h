/*
 * channel.h — the client channel: splitting a byte stream into capped lines,
 * and parsing the text protocol that jobs write to $LEAKPROOF_FD.
 *
 *   step [N]                      end of training step N (auto-numbered if absent)
 *   epoch [N]                     end of epoch N
 *   metric NAME=VALUE ...         numbers to plot beside memory (loss, lr, ...)
 *   result NAME=VALUE ...         a trial's outcome, for sweeps
 *   gpu allocated=B reserved=B    the framework allocator's own view
 *   mark TEXT                     a named event on the timeline
 *   census SEQ TYPE COUNT BYTES [HOLDER]   one type in object census SEQ
 *                                 (BYTES "-": unknown; HOLDER: free text)
 *   census SEQ * NAME=VALUE ...   census SEQ itself: objects, cost_us, interval_s
 *
 * Lines are UTF-8, at most CHANNEL_LINE_MAX bytes without the newline. Longer
 * or malformed lines are counted by the caller, never fatal. Step and epoch
 * numbers above CHANNEL_NUMBER_MAX are malformed; so are infinite values and,
 * except in `result`, NaN (a diverged trial reports `result loss=nan`).
 */
#ifndef LP_CHANNEL_H
#define LP_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHANNEL_LINE_MAX 4096
#define CHANNEL_KV_MAX 32
/* The largest step or epoch number accepted (2^53: exact as a double, and
 * far enough from INT64_MAX that counting on from it cannot overflow). */
#define CHANNEL_NUMBER_MAX (INT64_C(1) << 53)

/*
 * linebuf — accumulates bytes into lines of at most CHANNEL_LINE_MAX bytes.
 * A longer line is delivered once, cut to the cap, with truncated = true;
 * the rest of it up to the next end of line is dropped. With cr_is_eol a
 * carriage return also ends a line (progress bars redraw with "\r").
 */
struct linebuf {
	char buf[CHANNEL_LINE_MAX + 1];
	size_t len;
	bool overflow;     /* dropping the tail of an over-long line */
	bool cr_is_eol;
	bool after_cr;     /* the last byte ended a line with "\r" */
};
typedef void (*line_fn)(void *ctx, const char *line, size_t len, bool truncated);
void linebuf_init(struct linebuf *lb, bool cr_is_eol);
void linebuf_feed(struct linebuf *lb, const char *data, size_t n, line_fn fn, void *ctx);
/* Deliver a final line without its end-of-line (at end of stream). */
void linebuf_finish(struct linebuf *lb, line_fn fn, void *ctx);

enum chan_type { CHAN_STEP, CHAN_EPOCH, CHAN_METRIC, CHAN_RESULT, CHAN_GPU, CHAN_MARK, CHAN_CENSUS };

#define CHANNEL_TYPE_MAX 127    /* bytes of a census TYPE */

struct chan_kv {
	char name[64];
	double value;
};

struct chan_msg {
	enum chan_type type;
	bool has_n;               /* step/epoch: a number was given */
	int64_t n;
	int nkv;                  /* metric/result/gpu */
	struct chan_kv kv[CHANNEL_KV_MAX];
	const char *text;         /* mark, census HOLDER: points into the parsed
	                           * line; census: text_len 0 without a holder */
	size_t text_len;
	/* census (n is SEQ): the type, NUL-terminated, "*" for the census's
	 * own line (its figures in kv); count of objects; bytes, -1 unknown */
	char census_type[CHANNEL_TYPE_MAX + 1];
	int64_t count, bytes;
};

/*
 * Parse one line (no end-of-line; a trailing "\r" is ignored). Returns 1
 * for a message, 0 for an empty line (ignored), -1 for a malformed line
 * with the reason in err.
 */
int channel_parse(const char *line, size_t len, struct chan_msg *out, char *err, size_t errsz);

#endif

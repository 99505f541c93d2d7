/*
 * fuzz_channel.c — libFuzzer target for the client channel (core/channel.c):
 * the bytes a job writes to $LEAKPROOF_FD, cut into capped lines by a
 * linebuf and parsed by channel_parse(), as the supervisor does.
 *
 * Input: byte 0 chooses the mode (bit 0: "\r" ends a line, as for a job's
 * output; bits 1-7: the size of the chunks the stream arrives in, 1 to
 * 128 bytes, since a pipe splits lines anywhere); the rest is the stream.
 * Checked beyond the sanitizers: every line is at most CHANNEL_LINE_MAX
 * bytes and NUL-terminated, and every parsed message keeps the protocol's
 * promises (numbers in [0, 2^53], finite values except NaN in `result`,
 * at most CHANNEL_KV_MAX names, a mark's text inside its line).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/channel.h"
#include "fuzz.h"

static void on_line(void *ctx, const char *line, size_t len, bool truncated)
{
	(void)ctx;
	(void)truncated;
	fuzz_check(len <= CHANNEL_LINE_MAX);
	fuzz_check(line[len] == '\0');
	struct chan_msg m;
	char err[256];
	err[0] = '\0';
	int rc = channel_parse(line, len, &m, err, sizeof(err));
	fuzz_check(rc >= -1 && rc <= 1);
	if (rc < 0) {
		fuzz_check(err[0] != '\0' && memchr(err, '\0', sizeof(err)) != NULL);
		return;
	}
	if (rc == 0)
		return;
	switch (m.type) {
	case CHAN_STEP:
	case CHAN_EPOCH:
		fuzz_check(!m.has_n || (m.n >= 0 && m.n <= CHANNEL_NUMBER_MAX));
		break;
	case CHAN_METRIC:
	case CHAN_RESULT:
	case CHAN_GPU:
		fuzz_check(m.nkv >= 1 && m.nkv <= CHANNEL_KV_MAX);
		for (int i = 0; i < m.nkv; i++) {
			fuzz_check(memchr(m.kv[i].name, '\0', sizeof(m.kv[i].name)) != NULL);
			fuzz_check(m.kv[i].name[0] != '\0');
			fuzz_check(!isinf(m.kv[i].value));
			fuzz_check(!isnan(m.kv[i].value) || m.type == CHAN_RESULT);
		}
		break;
	case CHAN_MARK:
		fuzz_check(m.text >= line && m.text + m.text_len <= line + len);
		break;
	case CHAN_CENSUS:
		fuzz_check(m.has_n && m.n >= 0 && m.n <= CHANNEL_NUMBER_MAX);
		fuzz_check(memchr(m.census_type, '\0', sizeof(m.census_type)) != NULL && m.census_type[0] != '\0');
		if (strcmp(m.census_type, "*") == 0) {
			fuzz_check(m.nkv >= 1 && m.nkv <= CHANNEL_KV_MAX);
			for (int i = 0; i < m.nkv; i++)
				fuzz_check(!isinf(m.kv[i].value) && !isnan(m.kv[i].value));
		} else {
			fuzz_check(m.count >= 0 && m.bytes >= -1);
			fuzz_check(!m.text_len || (m.text >= line && m.text + m.text_len <= line + len));
		}
		break;
	default:
		fuzz_check(false);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	bool cr = data[0] & 1;
	size_t chunk = (size_t)(data[0] >> 1) + 1;
	data++, size--;
	struct linebuf *lb = malloc(sizeof(*lb));
	if (!lb)
		abort();
	linebuf_init(lb, cr);
	for (size_t at = 0; at < size; at += chunk) {
		size_t n = size - at < chunk ? size - at : chunk;
		linebuf_feed(lb, (const char *)data + at, n, on_line, NULL);
	}
	linebuf_finish(lb, on_line, NULL);
	free(lb);
	return 0;
}

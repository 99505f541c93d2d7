/*
 * test_channel.c — the client protocol parser, the capped line splitter and
 * the step regex, on hostile input.
 */
#include "tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/channel.h"
#include "core/scan.h"
#include "util/util.h"

static int parse(const char *line, struct chan_msg *m, char *err)
{
	return channel_parse(line, strlen(line), m, err, 160);
}

static void test_step_epoch(void)
{
	struct chan_msg m;
	char err[160];
	CHECK_EQ_INT(parse("step", &m, err), 1);
	CHECK(m.type == CHAN_STEP && !m.has_n);
	CHECK_EQ_INT(parse("step 42", &m, err), 1);
	CHECK(m.has_n && m.n == 42);
	CHECK_EQ_INT(parse("  step\t7  \r", &m, err), 1);
	CHECK(m.has_n && m.n == 7);
	CHECK_EQ_INT(parse("epoch 3", &m, err), 1);
	CHECK(m.type == CHAN_EPOCH && m.n == 3);
	CHECK_EQ_INT(parse("step -1", &m, err), -1);
	CHECK_EQ_INT(parse("step 1x", &m, err), -1);
	CHECK_EQ_INT(parse("step 99999999999999999999999", &m, err), -1);
	/* Numbers are capped at 2^53 so that counting on cannot overflow. */
	CHECK_EQ_INT(parse("step 9007199254740992", &m, err), 1);
	CHECK(m.n == CHANNEL_NUMBER_MAX);
	CHECK_EQ_INT(parse("step 9007199254740993", &m, err), -1);
	CHECK(strstr(err, "2^53") != NULL);
	CHECK_EQ_INT(parse("step 9223372036854775807", &m, err), -1);
	CHECK_EQ_INT(parse("epoch 9223372036854775807", &m, err), -1);
	CHECK_EQ_INT(parse("steps 1", &m, err), -1);
	CHECK(strstr(err, "unknown message 'steps'") != NULL);
	CHECK_EQ_INT(parse("", &m, err), 0);
	CHECK_EQ_INT(parse("   \r", &m, err), 0);
}

static void test_kv(void)
{
	struct chan_msg m;
	char err[160];
	CHECK_EQ_INT(parse("metric loss=0.25 lr=1e-3 acc/top1=0.9", &m, err), 1);
	CHECK(m.type == CHAN_METRIC);
	CHECK_EQ_INT(m.nkv, 3);
	CHECK_STR(m.kv[0].name, "loss");
	CHECK_NEAR(m.kv[0].value, 0.25, 1e-12);
	CHECK_NEAR(m.kv[1].value, 1e-3, 1e-15);
	CHECK_STR(m.kv[2].name, "acc/top1");
	CHECK_EQ_INT(parse("result val_loss=nan", &m, err), 1);
	CHECK(m.type == CHAN_RESULT && isnan(m.kv[0].value));
	/* A NaN result is a diverged trial; NaN and infinite metrics are refused. */
	CHECK_EQ_INT(parse("result val_loss=inf", &m, err), -1);
	CHECK_EQ_INT(parse("metric loss=nan", &m, err), -1);
	CHECK(strstr(err, "not a finite number") != NULL);
	CHECK_EQ_INT(parse("metric loss=inf", &m, err), -1);
	CHECK_EQ_INT(parse("metric loss=-Infinity", &m, err), -1);
	CHECK_EQ_INT(parse("gpu allocated=inf", &m, err), -1);
	CHECK_EQ_INT(parse("metric loss=1e999", &m, err), -1);
	CHECK_EQ_INT(parse("gpu allocated=1024 reserved=2048", &m, err), 1);
	CHECK(m.type == CHAN_GPU && m.nkv == 2 && m.kv[1].value == 2048);
	CHECK_EQ_INT(parse("metric", &m, err), -1);
	CHECK_EQ_INT(parse("metric loss", &m, err), -1);
	CHECK_EQ_INT(parse("metric =1", &m, err), -1);
	CHECK_EQ_INT(parse("metric 1x=1", &m, err), -1);
	CHECK_EQ_INT(parse("metric loss=abc", &m, err), -1);
	CHECK(strstr(err, "bad number 'abc'") != NULL);
	CHECK_EQ_INT(parse("metric loss=1 2", &m, err), -1);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "metric");
	for (int i = 0; i < 40; i++)
		strbuf_addf(&sb, " m%d=%d", i, i);
	CHECK_EQ_INT(channel_parse(sb.buf, sb.len, &m, err, sizeof(err)), -1);
	strbuf_release(&sb);
}

static void test_mark(void)
{
	struct chan_msg m;
	char err[160];
	const char *line = "mark  checkpoint saved (epoch 3) ünïcode";
	CHECK_EQ_INT(channel_parse(line, strlen(line), &m, err, sizeof(err)), 1);
	CHECK(m.type == CHAN_MARK);
	CHECK(m.text_len == strlen("checkpoint saved (epoch 3) ünïcode"));
	CHECK(!strncmp(m.text, "checkpoint saved", 16));
	char nul[] = "mark a\0b";
	CHECK_EQ_INT(channel_parse(nul, 8, &m, err, sizeof(err)), -1);
}

struct collect {
	int n;
	char lines[8][64];
	bool truncated[8];
	size_t lens[8];
};

static void collect_fn(void *ctx, const char *line, size_t len, bool truncated)
{
	struct collect *c = ctx;
	if (c->n < 8) {
		snprintf(c->lines[c->n], 64, "%.*s", (int)(len < 63 ? len : 63), line);
		c->truncated[c->n] = truncated;
		c->lens[c->n] = len;
	}
	c->n++;
}

static void test_linebuf(void)
{
	struct linebuf *lb = malloc(sizeof(*lb));
	struct collect c = { 0 };

	linebuf_init(lb, false);
	linebuf_feed(lb, "step 1\nst", 9, collect_fn, &c);
	linebuf_feed(lb, "ep 2\n\nstep", 10, collect_fn, &c);
	CHECK_EQ_INT(c.n, 3);
	CHECK_STR(c.lines[0], "step 1");
	CHECK_STR(c.lines[1], "step 2");
	CHECK_STR(c.lines[2], "");
	linebuf_finish(lb, collect_fn, &c);
	CHECK_EQ_INT(c.n, 4);
	CHECK_STR(c.lines[3], "step");

	/* An over-long line is delivered once, cut, and its tail dropped. */
	memset(&c, 0, sizeof(c));
	linebuf_init(lb, false);
	char *big = malloc(10000);
	memset(big, 'x', 10000);
	linebuf_feed(lb, big, 10000, collect_fn, &c);
	linebuf_feed(lb, "\nstep\n", 6, collect_fn, &c);
	CHECK_EQ_INT(c.n, 2);
	CHECK(c.truncated[0] && c.lens[0] == CHANNEL_LINE_MAX);
	CHECK_STR(c.lines[1], "step");
	CHECK(!c.truncated[1]);
	/* Exactly the cap is not too long. */
	memset(&c, 0, sizeof(c));
	linebuf_feed(lb, big, CHANNEL_LINE_MAX, collect_fn, &c);
	linebuf_feed(lb, "\n", 1, collect_fn, &c);
	CHECK_EQ_INT(c.n, 1);
	CHECK(!c.truncated[0] && c.lens[0] == CHANNEL_LINE_MAX);
	free(big);

	/* Carriage returns end lines for output scanning (progress bars). */
	memset(&c, 0, sizeof(c));
	linebuf_init(lb, true);
	const char *tq = "\r 10%|#   | 1/10\r 20%|##  | 2/10\r\nEpoch 1\r\n";
	linebuf_feed(lb, tq, strlen(tq), collect_fn, &c);
	CHECK_EQ_INT(c.n, 3);
	CHECK_STR(c.lines[0], " 10%|#   | 1/10");
	CHECK_STR(c.lines[2], "Epoch 1");
	free(lb);
}

static void test_regex(void)
{
	bool has_n;
	int64_t n;
	struct step_regex *re = step_regex_new("^Epoch (\\d+)", "--step-regex");
	CHECK(re != NULL);
	CHECK_EQ_INT(step_regex_match(re, "Epoch 12/30 loss 0.1", 20, &has_n, &n), 1);
	CHECK(has_n && n == 12);
	CHECK_EQ_INT(step_regex_match(re, "  Epoch 12", 10, &has_n, &n), 0);
	/* A number above the cap is not taken: the step is counted on instead. */
	CHECK_EQ_INT(step_regex_match(re, "Epoch 9223372036854775807", 25, &has_n, &n), 1);
	CHECK(!has_n);
	step_regex_free(re);

	re = step_regex_new("loss=", "--step-regex");
	CHECK_EQ_INT(step_regex_match(re, "step loss=0.1", 13, &has_n, &n), 1);
	CHECK(!has_n);
	/* Invalid UTF-8 in the job's output must not break matching. */
	CHECK_EQ_INT(step_regex_match(re, "\xff\xfe loss=", 8, &has_n, &n), 1);
	step_regex_free(re);

	fprintf(stderr, "  (an error message about '(unclosed' is expected here)\n");
	CHECK(step_regex_new("(unclosed", "--step-regex") == NULL);

	/* results: group 1, or the whole match */
	char buf[16];
	re = step_regex_new("val_loss=(\\S+)", "--result-regex");
	CHECK_EQ_INT(step_regex_capture(re, "epoch 3 val_loss=0.125 acc=1", 28, buf, sizeof(buf)), 1);
	CHECK_STR(buf, "0.125");
	CHECK_EQ_INT(step_regex_capture(re, "loss=1", 6, buf, sizeof(buf)), 0);
	CHECK_EQ_INT(step_regex_capture(re, "val_loss=0.12345678901234567890", 31, buf, sizeof(buf)), 1);
	CHECK_EQ_INT(strlen(buf), sizeof(buf) - 1);   /* cut, terminated */
	step_regex_free(re);
	re = step_regex_new("[0-9]+", "--result-regex");
	CHECK_EQ_INT(step_regex_capture(re, "best 42!", 8, buf, sizeof(buf)), 1);
	CHECK_STR(buf, "42");
	step_regex_free(re);
}

/* A catastrophic pattern gives up on a line (with one warning) instead of
 * taking PCRE2's default of 10 million backtracking steps a line, and still
 * matches the lines it can. */
static void test_regex_bounded(void)
{
	bool has_n;
	int64_t n;
	char line[64];
	memset(line, 'a', 40);
	line[40] = 'b';
	line[41] = '\0';
	struct step_regex *re = step_regex_new("^(a+)+$", "--step-regex");
	CHECK(re != NULL);
	capture_begin();
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(step_regex_match(re, line, strlen(line), &has_n, &n), 0);
	const char *err = capture_end();
	CHECK(strstr(err, "--step-regex gave up on a line of output") != NULL);
	CHECK(strstr(err, "gave up") && !strstr(strstr(err, "gave up") + 1, "gave up"));   /* said once */
	CHECK_EQ_INT(step_regex_match(re, "aaaa", 4, &has_n, &n), 1);
	step_regex_free(re);
}

/* Each capture group widens PCRE2's backtracking frame, which every step
 * within the match limit copies: ((a)...3000 groups...)*$ took about 20 s
 * on one line of 4090 'a's (found by fuzz/fuzz_regex). More than
 * STEP_REGEX_MAX_GROUPS groups are refused; as many are matched. */
static void test_regex_groups_capped(void)
{
	struct strbuf p = STRBUF_INIT;
	strbuf_addch(&p, '(');
	for (int i = 0; i < 3000; i++)
		strbuf_addstr(&p, "(a)");
	strbuf_addstr(&p, ")*$");
	capture_begin();
	struct step_regex *re = step_regex_new(p.buf, "--step-regex");
	const char *err = capture_end();
	CHECK(re == NULL);
	CHECK(strstr(err, "3001 capture groups, at most 32") != NULL);
	step_regex_free(re);

	strbuf_reset(&p);
	for (int i = 0; i < STEP_REGEX_MAX_GROUPS; i++)
		strbuf_addstr(&p, "(\\d)");
	re = step_regex_new(p.buf, "--step-regex");
	CHECK(re != NULL);
	bool has_n;
	int64_t n = -1;
	char line[64];
	snprintf(line, sizeof(line), "%s", "12345678901234567890123456789012");
	CHECK_EQ_INT(step_regex_match(re, line, strlen(line), &has_n, &n), 1);
	CHECK(has_n && n == 1);
	step_regex_free(re);
	strbuf_addstr(&p, "(x)");
	capture_begin();
	re = step_regex_new(p.buf, "--step-regex");
	err = capture_end();
	CHECK(re == NULL && strstr(err, "33 capture groups") != NULL);
	strbuf_release(&p);
}

/* census SEQ TYPE COUNT BYTES [HOLDER] and census SEQ * NAME=VALUE ... */
static void test_census(void)
{
	struct chan_msg m;
	char err[160];
	const char *line = "census 3 torch.Tensor/cpu/float32/grad_fn 120 480 list history in train.py (module __main__)";
	CHECK_EQ_INT(parse(line, &m, err), 1);
	CHECK(m.type == CHAN_CENSUS && m.has_n && m.n == 3);
	CHECK_STR(m.census_type, "torch.Tensor/cpu/float32/grad_fn");
	CHECK(m.count == 120 && m.bytes == 480);
	CHECK(m.text_len == strlen("list history in train.py (module __main__)"));
	CHECK(m.text && !strncmp(m.text, "list history in train.py (module __main__)", m.text_len));
	CHECK_EQ_INT(parse("census 0 dict 9000 -", &m, err), 1);
	CHECK(m.bytes == -1 && m.count == 9000 && m.text_len == 0);
	CHECK_EQ_INT(parse("census 0 dict 9000 -  \r", &m, err), 1);
	CHECK(m.text_len == 0);
	CHECK_EQ_INT(parse("census 7 * objects=101009 cost_us=1982 interval_s=5.0", &m, err), 1);
	CHECK_STR(m.census_type, "*");
	CHECK(m.nkv == 3 && !strcmp(m.kv[1].name, "cost_us") && m.kv[1].value == 1982);
	/* malformed: no number, negative, no count, bad bytes, too long a type */
	CHECK_EQ_INT(parse("census", &m, err), -1);
	CHECK_EQ_INT(parse("census x dict 1 -", &m, err), -1);
	CHECK_EQ_INT(parse("census -1 dict 1 -", &m, err), -1);
	CHECK_EQ_INT(parse("census 1 dict", &m, err), -1);
	CHECK_EQ_INT(parse("census 1 dict 1", &m, err), -1);
	CHECK_EQ_INT(parse("census 1 dict 1 12x", &m, err), -1);
	CHECK_EQ_INT(parse("census 1 dict -3 4", &m, err), -1);
	CHECK_EQ_INT(parse("census 1 * objects=inf", &m, err), -1);
	CHECK_EQ_INT(parse("census 1 *", &m, err), -1);
	char longtype[300];
	snprintf(longtype, sizeof(longtype), "census 1 %0200d 1 -", 0);
	CHECK_EQ_INT(parse(longtype, &m, err), -1);
	CHECK(strstr(err, "type longer") != NULL);
}

/* step_regex_next(): a line it passes over never matches alone, for
 * patterns anchored or not, with \s and (?s) that could run across lines,
 * "\r" ends, and patterns that have no multi-line twin. */
static void test_regex_block(void)
{
	static const char block[] =
		"iter 1 loss=0.5\nEpoch 1/3\r  Epoch 2\r\nxEpoch 3\n\nEpoch 4\n"
		"memory Epoch\nEpoch\n5\nend loss=0.25\r\nEpoch 99 done\n";
	static const char *const patterns[] = { "^Epoch (\\d+)", "Epoch (\\d+)", "Epoch\\s+(\\d+)", "(?s)Epoch.(\\d)",
	                                        "loss=(\\S+)$", "^$", "(?<=x)Epoch", "done$", "\\AEpoch" };
	size_t n = sizeof(block) - 1;
	for (size_t k = 0; k < sizeof(patterns) / sizeof(patterns[0]); k++) {
		struct step_regex *re = step_regex_new(patterns[k], "--step-regex");
		CHECK(re != NULL);
		if (!re)
			continue;
		bool agree = true;
		size_t at = 0;
		bool known = false;
		for (size_t b = 0; b < n;) {
			size_t e = b;
			while (e < n && block[e] != '\n' && block[e] != '\r')
				e++;
			if (!known || at < b) {
				at = step_regex_next(re, block, b, n);
				known = true;
			}
			bool has_n;
			int64_t num;
			/* the empty "line" of "\r\n" is none (as linebuf has it) */
			bool none = e == b && b > 0 && block[b - 1] == '\r';
			int alone = !none && step_regex_match(re, block + b, e - b, &has_n, &num);
			if (alone && !(at == SIZE_MAX || at <= e)) {
				agree = false;
				fprintf(stderr, "# pattern %s: line at %zu matches alone, passed over\n", patterns[k], b);
			}
			b = e + 1;
		}
		CHECK(agree);
		step_regex_free(re);
	}
}

TEST_MAIN("channel", TEST(test_step_epoch), TEST(test_kv), TEST(test_mark), TEST(test_linebuf), TEST(test_regex),
          TEST(test_regex_bounded), TEST(test_regex_groups_capped), TEST(test_census), TEST(test_regex_block))

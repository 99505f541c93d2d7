/*
 * test_util.c — sizes and durations as users type them (--max-mem,
 * --soft-limit, --max-gpu, --interval, --grace): what is accepted, what it
 * means, and that a bad value is refused with a message naming it; and the
 * JSON reader (what Python's json module writes, and where it stops on bad
 * text).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "util/json.h"
#include "util/stats.h"
#include "util/util.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

static uint64_t size_ok(const char *s, uint64_t whole)
{
	uint64_t v = 12345;
	capture_begin();
	int rc = parse_size(s, whole, &v);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, 0);
	CHECK_STR(msg, "");
	return v;
}

/* Refused, with a message that quotes the value and says what is wrong. */
static void size_bad(const char *s, uint64_t whole, const char *why)
{
	uint64_t v = 12345;
	capture_begin();
	int rc = parse_size(s, whole, &v);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	CHECK_EQ_INT(v, 12345);   /* untouched */
	char quoted[128];
	snprintf(quoted, sizeof(quoted), "'%s'", s);
	if (!strstr(msg, quoted) || !strstr(msg, why) || strncmp(msg, "leakproof: ", 11))
		fprintf(stderr, "  message for %s: %s", quoted, msg);
	CHECK(strncmp(msg, "leakproof: ", 11) == 0);
	CHECK(strstr(msg, quoted) != NULL);
	CHECK(strstr(msg, why) != NULL);
}

static void test_sizes(void)
{
	CHECK_EQ_INT(size_ok("4096", 0), 4096);
	CHECK_EQ_INT(size_ok("512M", 0), 512 * MIB);
	CHECK_EQ_INT(size_ok("512m", 0), 512 * MIB);
	CHECK_EQ_INT(size_ok("512MiB", 0), 512 * MIB);
	CHECK_EQ_INT(size_ok("512MB", 0), 512 * MIB);   /* binary units, as free -h and cgroups */
	CHECK_EQ_INT(size_ok("12G", 0), 12 * GIB);
	CHECK_EQ_INT(size_ok("1.5GiB", 0), 1.5 * GIB);
	CHECK_EQ_INT(size_ok("400 M", 0), 400 * MIB);
	CHECK_EQ_INT(size_ok("2T", 0), 2048 * GIB);
	CHECK_EQ_INT(size_ok("64k", 0), 65536);
	CHECK_EQ_INT(size_ok("0", 0), 0);              /* the caller decides whether 0 is allowed */
	CHECK_EQ_INT(size_ok(".5G", 0), 0.5 * GIB);
	CHECK_EQ_INT(size_ok("2.G", 0), 2 * GIB);
}

static void test_percentages(void)
{
	uint64_t machine = (uint64_t)(24 * GIB);
	CHECK_EQ_INT(size_ok("80%", machine), (uint64_t)(0.8 * 24 * GIB));
	CHECK_EQ_INT(size_ok("100%", machine), machine);
	CHECK_EQ_INT(size_ok("12.5%", 8 * GIB), GIB);
	size_bad("80%", 0, "no total is known");
	size_bad("0%", machine, "(0, 100]");
	size_bad("150%", machine, "(0, 100]");
	size_bad("80%M", machine, "nothing may follow");
}

static void test_bad_sizes(void)
{
	size_bad("", 0, "expected a number");
	size_bad("lots", 0, "expected a number");
	size_bad("-1G", 0, "expected a number");
	size_bad("12Q", 0, "unknown unit 'Q'");
	size_bad("12 GB extra", 0, "unknown unit");
	size_bad("1e30", 0, "plain decimal");
	size_bad("99999999999999999999999", 0, "too large");
	size_bad("0x10G", 0, "plain decimal");
	size_bad("1e3M", 0, "plain decimal");
	size_bad("1E3", 0, "plain decimal");
	size_bad("+1G", 0, "expected a number");
	size_bad(" 1G", 0, "expected a number");
	size_bad("1.5.5G", 0, "unknown unit");
	size_bad("infG", 0, "expected a number");
	size_bad("nan", 0, "expected a number");
	size_bad("inf", 0, "expected a number");
}

static void test_durations(void)
{
	int64_t ns = 0;
	CHECK_EQ_INT(parse_duration_ns("100ms", &ns), 0);
	CHECK_EQ_INT(ns, 100000000);
	CHECK_EQ_INT(parse_duration_ns("1ms", &ns), 0);
	CHECK_EQ_INT(ns, 1000000);
	CHECK_EQ_INT(parse_duration_ns("0.5s", &ns), 0);
	CHECK_EQ_INT(ns, 500000000);
	CHECK_EQ_INT(parse_duration_ns("30", &ns), 0);    /* bare: seconds */
	CHECK_EQ_INT(ns, 30000000000LL);
	CHECK_EQ_INT(parse_duration_ns("2m", &ns), 0);
	CHECK_EQ_INT(ns, 120000000000LL);
	CHECK_EQ_INT(parse_duration_ns("250us", &ns), 0);
	CHECK_EQ_INT(ns, 250000);

	capture_begin();
	int rc = parse_duration_ns("soon", &ns);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	CHECK(strstr(msg, "'soon'") != NULL);
	capture_begin();
	rc = parse_duration_ns("5 parsecs", &ns);
	msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	CHECK(strstr(msg, "'5 parsecs'") != NULL);
	/* as with sizes: a plain decimal number, nothing strtod would also take */
	static const char *const odd[] = { "0x10ms", "0x1p4ms", "1e2ms", "2E-1s", "-1s", "nan", "inf", " 1s", "+1s" };
	bool refused = true;
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		ns = 7;
		capture_begin();
		rc = parse_duration_ns(odd[i], &ns);
		msg = capture_end();
		refused = refused && rc == -1 && ns == 7 && strstr(msg, odd[i]) != NULL;
	}
	CHECK(refused);
	capture_begin();
	parse_duration_ns("0x10ms", &ns);
	CHECK(strstr(capture_end(), "no hexadecimal or exponent") != NULL);
}

static void test_json(void)
{
	struct jval v;
	const char *err = NULL;
	size_t at = 0;
	CHECK_EQ_INT(jval_parse(" {\"a\": [1, -2.5e1, NaN, -Infinity, true, null],"
	                        " \"s\": \"\\u00e9\\ud83d\\ude00\\n\"} ", &v, &err, &at), 0);
	CHECK_EQ_INT(v.type, J_OBJ);
	const struct jval *a = jval_get(&v, "a"), *s = jval_get(&v, "s");
	CHECK(a && a->type == J_ARR && a->n == 6);
	if (a && a->n == 6) {
		CHECK(a->items[0].is_int && a->items[0].num == 1);
		CHECK(!a->items[1].is_int && a->items[1].num == -25);
		CHECK(isnan(a->items[2].num));
		CHECK(isinf(a->items[3].num) && a->items[3].num < 0);
		CHECK(a->items[4].type == J_BOOL && a->items[4].b);
		CHECK_EQ_INT(a->items[5].type, J_NULL);
	}
	CHECK(s && s->type == J_STR);
	if (s)
		CHECK_STR(s->s, "\xc3\xa9\xf0\x9f\x98\x80\n");
	CHECK(jval_get(&v, "missing") == NULL);
	CHECK(jval_get(a, "a") == NULL);          /* not an object */
	jval_release(&v);

	bool is_int = false;
	const char *n = "-12e3,";
	CHECK(json_number_end(n, &is_int) == n + 5 && !is_int);
	n = "07";                                 /* no leading zeros */
	CHECK(json_number_end(n, &is_int) == n + 1 && is_int);
	CHECK(json_number_end(".5", NULL) == NULL);
	CHECK(json_number_end("1.", NULL) == NULL);
	CHECK(json_number_end("-", NULL) == NULL);

	static const struct { const char *text, *err; size_t at; } bad[] = {
		{ "", "unexpected end", 0 },
		{ "[1, 2", "expected ',' or ']'", 5 },
		{ "[1] x", "text after the value", 4 },
		{ "{\"a\" 1}", "expected ':'", 5 },
		{ "\"\\ud800\"", "unpaired surrogate in a \\u escape", 7 },
		{ "\"\\u0000\"", "\\u0000 in a string", 7 },
		{ "\"tab\there\"", "control character in a string", 4 },
		{ "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "nested too deeply", 32 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = NULL;
		CHECK_EQ_INT(jval_parse(bad[i].text, &v, &err, &at), -1);
		CHECK(err != NULL);
		if (err) {
			CHECK_STR(err, bad[i].err);
			CHECK_EQ_INT(at, bad[i].at);
		}
		CHECK_EQ_INT(v.type, J_NULL);     /* emptied */
		CHECK_EQ_INT(v.n, 0);
	}
}

static void check_json_number(double v, const char *want)
{
	struct strbuf sb = STRBUF_INIT;
	json_add_number(&sb, v);
	CHECK_STR(strbuf_str(&sb), want);
	strbuf_release(&sb);
}

static void check_round_trip(double v)
{
	struct strbuf sb = STRBUF_INIT;
	json_add_number(&sb, v);
	CHECK(strtod(strbuf_str(&sb), NULL) == v);
	strbuf_release(&sb);
}

static void test_json_number(void)
{
	check_json_number(0.1, "0.1");
	check_json_number(1e-300, "1e-300");
	check_json_number(-0.0, "0");
	check_json_number(NAN, "null");
	check_json_number(INFINITY, "null");
	check_json_number(-INFINITY, "null");
	check_json_number(42, "42");
	check_json_number(0.1 + 0.2, "0.30000000000000004");
	check_round_trip(123456789.123456789);
	check_round_trip(1e-300);
	check_round_trip(0.1 + 0.2);
	check_round_trip(1.0 / 3);
	check_round_trip(1e300);
	check_round_trip(-2.5e-7);
}

static void test_order_statistics(void)
{
	double v[] = { 5, 1, 4, 2, 3 };
	sort_doubles(v, 5);
	for (int i = 0; i < 5; i++)
		CHECK(v[i] == i + 1);
	CHECK(median_sorted(v, 5) == 3);
	CHECK(median_sorted(v, 4) == 2.5);
	CHECK(quantile_sorted(v, 5, 0) == 1);
	CHECK(quantile_sorted(v, 5, 0.25) == 2);
	CHECK(quantile_sorted(v, 5, 0.5) == 3);
	CHECK(quantile_sorted(v, 5, 1) == 5);
	CHECK(quantile_sorted(v, 4, 0.5) == 2.5);
	CHECK(isnan(quantile_sorted(v, 0, 0.5)));
	double a = 1, b = 2;
	CHECK(cmp_double(&a, &b) < 0 && cmp_double(&b, &a) > 0 && cmp_double(&a, &a) == 0);
}

static void test_utf8_len(void)
{
	CHECK_EQ_INT(utf8_len((const unsigned char *)"a"), 1);
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xc3\xa9"), 2);          /* é */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xe2\x82\xac"), 3);      /* € */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xf0\x9f\x98\x80"), 4); /* U+1F600 */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xc3"), 0);              /* truncated */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\x80"), 0);              /* continuation */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xc0\xaf"), 0);          /* overlong */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xe0\x80\xaf"), 0);      /* overlong */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xed\xa0\x80"), 0);      /* surrogate */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xf4\x90\x80\x80"), 0); /* > U+10FFFF */
	CHECK_EQ_INT(utf8_len((const unsigned char *)"\xf8\x88\x80\x80"), 0); /* 5-byte lead */
}

/* strbuf_addf formats into the room there is and again, grown, when it
 * does not fit: every length around the buffer's size comes out whole. */
static void test_strbuf_addf(void)
{
	char want[600];
	for (size_t n = 0; n < 300; n += 7) {
		struct strbuf sb = STRBUF_INIT;
		memset(want, 0, sizeof(want));
		for (size_t k = 0; k < 2; k++) {
			strbuf_addf(&sb, "%0*d", (int)n + 1, 7);
			memset(want + k * (n + 1), '0', n);
			want[k * (n + 1) + n] = '7';
		}
		CHECK_EQ_INT(sb.len, 2 * (n + 1));
		CHECK_STR(strbuf_str(&sb), want);
		strbuf_release(&sb);
	}
}

static void test_strbuf_trim_end(void)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_trim_end(&sb, "\n ");              /* empty: nothing to cut */
	CHECK_EQ_INT(sb.len, 0);
	strbuf_addstr(&sb, "a\nb \n\n ");
	strbuf_trim_end(&sb, "\n ");
	CHECK_STR(strbuf_str(&sb), "a\nb");
	CHECK_EQ_INT(sb.len, 3);
	strbuf_addstr(&sb, "\n\n");
	strbuf_trim_end(&sb, "\n \t");
	CHECK_STR(strbuf_str(&sb), "a\nb");
	strbuf_trim_end(&sb, "ab\n");             /* all of it */
	CHECK_STR(strbuf_str(&sb), "");
	CHECK_EQ_INT(sb.len, 0);
	strbuf_release(&sb);

	char **v = xcalloc(3, sizeof(char *));
	v[0] = xstrdup("x");
	v[1] = xstrdup("y");
	free_strings(v, 2);                        /* under ASan: nothing leaks */
	free_strings(NULL, 5);
}

TEST_MAIN("util", TEST(test_strbuf_addf), TEST(test_strbuf_trim_end), TEST(test_sizes), TEST(test_percentages), TEST(test_bad_sizes), TEST(test_durations),
          TEST(test_json), TEST(test_json_number),
          TEST(test_order_statistics), TEST(test_utf8_len))

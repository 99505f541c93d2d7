/*
 * test_json.c — the JSON writer (util/jsonw.h): commas and nesting kept
 * for the caller, the two layouts and jw_break(), strings escaped as the
 * reports always escaped them (control characters, quotes, bytes that are
 * not UTF-8), numbers that are not finite written null, and what it writes
 * read back by the reader (util/json.h) as the same values.
 */
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "util/json.h"
#include "util/jsonw.h"
#include "util/util.h"

static void test_one_line(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_object_begin(&jw, false);
	jw_object_intmax(&jw, "id", 7);
	jw_object_array(&jw, "command", false);
	jw_array_string(&jw, "python3");
	jw_array_string(&jw, "train.py");
	jw_end(&jw);
	jw_object_string(&jw, "verdict", NULL);
	jw_object_double(&jw, "growth", 1.5);
	jw_object_bool(&jw, "ok", true);
	jw_object_null(&jw, "none");
	jw_object_object(&jw, "empty", true);
	jw_end(&jw);
	jw_object_array(&jw, "list", false);
	jw_end(&jw);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "{\"id\": 7, \"command\": [\"python3\", \"train.py\"], \"verdict\": null, "
	                           "\"growth\": 1.5, \"ok\": true, \"none\": null, \"empty\": {}, \"list\": []}");
	CHECK_EQ_INT(jw.depth, 0);
	strbuf_release(&sb);
}

/* One item a line, two spaces a level; a one-line object inside it breaks
 * under its first member, or, broken before its first, two spaces a level. */
static void test_lines_and_breaks(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_array_begin(&jw, true);
	for (int i = 1; i <= 2; i++) {
		jw_array_object(&jw, false);
		jw_object_intmax(&jw, "id", i);
		jw_break(&jw);
		jw_object_string(&jw, "status", "done");
		jw_end(&jw);
	}
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "[\n  {\"id\": 1,\n   \"status\": \"done\"},\n  {\"id\": 2,\n   \"status\": \"done\"}\n]");
	strbuf_reset(&sb);

	jw_object_begin(&jw, true);
	jw_object_object(&jw, "run", false);
	jw_break(&jw);
	jw_object_intmax(&jw, "id", 1);
	jw_break(&jw);
	jw_object_string(&jw, "cwd", "/");
	jw_end(&jw);
	jw_object_array(&jw, "segments", true);
	jw_array_object(&jw, false);
	jw_object_intmax(&jw, "seq", 0);
	jw_end(&jw);
	jw_end(&jw);
	jw_object_array(&jw, "events", true);
	jw_end(&jw);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "{\n  \"run\": {\n    \"id\": 1,\n    \"cwd\": \"/\"},\n  \"segments\": [\n"
	                           "    {\"seq\": 0}\n  ],\n  \"events\": []\n}");

	/* jw_newline(): two spaces a level, wherever the object opened */
	strbuf_reset(&sb);
	jw_object_begin(&jw, true);
	jw_object_object(&jw, "trace", false);
	jw_object_intmax(&jw, "mean_bytes", 8);
	jw_newline(&jw);
	jw_object_array(&jw, "sites", true);
	jw_array_object(&jw, false);
	jw_object_intmax(&jw, "site", 1);
	jw_break(&jw);
	jw_object_array(&jw, "frames", false);
	jw_end(&jw);
	jw_end(&jw);
	jw_end(&jw);
	jw_end(&jw);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "{\n  \"trace\": {\"mean_bytes\": 8,\n    \"sites\": [\n      {\"site\": 1,\n"
	                           "       \"frames\": []}\n    ]}\n}");

	/* the empty array and an empty document's array */
	strbuf_reset(&sb);
	jw_array_begin(&jw, true);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "[]");
	strbuf_release(&sb);
}

/* Tight: no space after "," and ":" (the html report's chart data). */
static void test_tight(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init_tight(&jw, &sb);
	jw_object_begin(&jw, false);
	jw_object_string(&jw, "id", "mem");
	jw_object_array(&jw, "x", false);
	jw_array_double(&jw, 1);
	jw_array_double(&jw, 2.5);
	jw_end(&jw);
	jw_object_bool(&jw, "bars", false);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "{\"id\":\"mem\",\"x\":[1,2.5],\"bars\":false}");
	strbuf_release(&sb);
}

static void check_string(const char *in, const char *want)
{
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_array_begin(&jw, false);
	jw_array_string(&jw, in);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), want);
	strbuf_release(&sb);
}

static void test_strings(void)
{
	check_string("plain", "[\"plain\"]");
	check_string("", "[\"\"]");
	check_string("a\"b\\c", "[\"a\\\"b\\\\c\"]");
	check_string("l1\nl2\r\t", "[\"l1\\nl2\\r\\t\"]");
	check_string("\x01\x1f\x7f", "[\"\\u0001\\u001f\\u007f\"]");
	check_string("caf\xc3\xa9 \xe2\x82\xac", "[\"caf\xc3\xa9 \xe2\x82\xac\"]");   /* UTF-8 kept */
	check_string("a\xff" "b\xc3", "[\"a\\ufffdb\\ufffd\"]");                         /* not UTF-8 */
	check_string("\xed\xa0\x80", "[\"\\ufffd\\ufffd\\ufffd\"]");                     /* a surrogate */
	check_string("</script>", "[\"</script>\"]");
	/* keys are escaped alike */
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_object_begin(&jw, false);
	jw_object_intmax(&jw, "k\"\n", 1);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "{\"k\\\"\\n\": 1}");
	strbuf_release(&sb);
}

static void test_numbers(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_array_begin(&jw, false);
	jw_array_double(&jw, NAN);
	jw_array_double(&jw, INFINITY);
	jw_array_double(&jw, -INFINITY);
	jw_array_double(&jw, -0.0);
	jw_array_double(&jw, 0.1 + 0.2);
	jw_array_double(&jw, 1048576);
	jw_array_intmax(&jw, INTMAX_MIN);
	jw_array_intmax(&jw, INTMAX_MAX);
	jw_array_null(&jw);
	jw_end(&jw);
	CHECK_STR(strbuf_str(&sb), "[null, null, null, 0, 0.30000000000000004, 1048576, "
	                           "-9223372036854775808, 9223372036854775807, null]");
	strbuf_release(&sb);
}

/* What it writes, the reader reads back: the same keys, strings, numbers. */
static void test_read_back(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_object_begin(&jw, true);
	jw_object_string(&jw, "s", "tab\there \xc3\xa9 \x02");
	jw_object_double(&jw, "x", 1.0 / 3);
	jw_object_array(&jw, "a", true);
	jw_array_object(&jw, false);
	jw_object_key(&jw, "raw");
	strbuf_addstr(jw.sb, "[1, 2]");   /* a value of the caller's own */
	jw_break(&jw);
	jw_object_double(&jw, "nan", NAN);
	jw_end(&jw);
	jw_array_array(&jw, false);
	jw_end(&jw);
	jw_end(&jw);
	jw_end(&jw);

	struct jval v;
	const char *err = NULL;
	size_t at = 0;
	CHECK_EQ_INT(jval_parse(strbuf_str(&sb), &v, &err, &at), 0);
	if (err)
		fprintf(stderr, "  %s at %zu in %s\n", err, at, strbuf_str(&sb));
	const struct jval *s = jval_get(&v, "s"), *x = jval_get(&v, "x"), *a = jval_get(&v, "a");
	CHECK(s && s->type == J_STR && !strcmp(s->s, "tab\there \xc3\xa9 \x02"));
	CHECK(x && x->type == J_NUM && x->num == 1.0 / 3);
	CHECK(a && a->type == J_ARR && a->n == 2);
	if (a && a->n == 2) {
		const struct jval *raw = jval_get(&a->items[0], "raw"), *nan = jval_get(&a->items[0], "nan");
		CHECK(raw && raw->type == J_ARR && raw->n == 2);
		CHECK(nan && nan->type == J_NULL);
		CHECK(a->items[1].type == J_ARR && a->items[1].n == 0);
	}
	jval_release(&v);
	strbuf_release(&sb);
}

/* A member outside an object, an item in one, a close with nothing open:
 * the caller's bug, stopped at once rather than written as broken JSON. */
static int dies(void (*f)(struct json_writer *))
{
	pid_t pid = fork();
	if (pid == 0) {
		struct strbuf sb = STRBUF_INIT;
		struct json_writer jw;
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 2);
		jw_init(&jw, &sb);
		f(&jw);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void member_at_top(struct json_writer *jw)
{
	jw_object_intmax(jw, "k", 1);
}

static void item_in_object(struct json_writer *jw)
{
	jw_object_begin(jw, false);
	jw_array_intmax(jw, 1);
}

static void member_in_array(struct json_writer *jw)
{
	jw_array_begin(jw, false);
	jw_object_null(jw, "k");
}

static void end_unopened(struct json_writer *jw)
{
	jw_end(jw);
}

static void too_deep(struct json_writer *jw)
{
	for (int i = 0; i <= JW_MAX_DEPTH; i++)
		jw_array_begin(jw, false);
}

static void test_misuse(void)
{
	CHECK(dies(member_at_top));
	CHECK(dies(item_in_object));
	CHECK(dies(member_in_array));
	CHECK(dies(end_unopened));
	CHECK(dies(too_deep));
}

TEST_MAIN("json", TEST(test_one_line), TEST(test_lines_and_breaks), TEST(test_tight), TEST(test_strings), TEST(test_numbers),
          TEST(test_read_back), TEST(test_misuse))

/*
 * fuzz_json.c — libFuzzer target for the JSON reader (util/json.c), which
 * reads what other programs wrote: a run's stored command, Optuna's answers.
 *
 * Input: the text, as one C string. Checked beyond the sanitizers: a value
 * that parses is written back with the project's own writers
 * (strbuf_add_json_str, json_add_number; NaN and the infinities as Python
 * writes them), and that text parses again to the same shape, the same
 * numbers and, where the input's strings were valid UTF-8, the same strings.
 * A failed parse leaves the value empty and its error offset inside the text.
 */
#include <math.h>
#include <stdbool.h>

#include "util/json.h"
#include "util/util.h"
#include "fuzz.h"

static bool valid_utf8(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; ) {
		size_t n = utf8_len(p);
		if (!n)
			return false;
		p += n;
	}
	return true;
}

static void write_value(struct strbuf *sb, const struct jval *v)
{
	switch (v->type) {
	case J_NULL: strbuf_addstr(sb, "null"); break;
	case J_BOOL: strbuf_addstr(sb, v->b ? "true" : "false"); break;
	case J_NUM:
		if (isnan(v->num))
			strbuf_addstr(sb, "NaN");
		else if (isinf(v->num))
			strbuf_addstr(sb, v->num < 0 ? "-Infinity" : "Infinity");
		else
			json_add_number(sb, v->num);
		break;
	case J_STR: strbuf_add_json_str(sb, v->s); break;
	case J_ARR:
	case J_OBJ:
		strbuf_addch(sb, v->type == J_ARR ? '[' : '{');
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				strbuf_addch(sb, ',');
			if (v->type == J_OBJ) {
				strbuf_add_json_str(sb, v->keys[i]);
				strbuf_addch(sb, ':');
			}
			write_value(sb, &v->items[i]);
		}
		strbuf_addch(sb, v->type == J_ARR ? ']' : '}');
		break;
	}
}

static bool same_text(const char *a, const char *b)
{
	return !valid_utf8(a) || !strcmp(a, b);
}

static void check_same(const struct jval *a, const struct jval *b)
{
	fuzz_check(a->type == b->type);
	switch (a->type) {
	case J_BOOL: fuzz_check(a->b == b->b); break;
	case J_NUM: fuzz_check(a->num == b->num || (isnan(a->num) && isnan(b->num))); break;
	case J_STR: fuzz_check(same_text(a->s, b->s)); break;
	case J_ARR:
	case J_OBJ:
		fuzz_check(a->n == b->n);
		for (size_t i = 0; i < a->n; i++) {
			if (a->type == J_OBJ) {
				fuzz_check(same_text(a->keys[i], b->keys[i]));
				/* jval_get finds the first of equal keys */
				fuzz_check(jval_get(a, a->keys[i]) != NULL);
			}
			check_same(&a->items[i], &b->items[i]);
		}
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	struct jval v;
	const char *err = NULL;
	size_t err_at = 0;
	if (jval_parse(text, &v, &err, &err_at) != 0) {
		fuzz_check(err != NULL && err_at <= strlen(text));
		fuzz_check(v.type == J_NULL && v.n == 0 && !v.items && !v.keys && !v.s);
		free(text);
		return 0;
	}
	struct strbuf sb = STRBUF_INIT;
	write_value(&sb, &v);
	struct jval again;
	fuzz_check(jval_parse(strbuf_str(&sb), &again, &err, &err_at) == 0);
	check_same(&v, &again);
	jval_release(&again);
	strbuf_release(&sb);
	jval_release(&v);
	free(text);
	return 0;
}

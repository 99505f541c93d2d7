/*
 * options.c — the reader of options.h: argv walked with a command's table,
 * and the table written out as the help's list and the completion's.
 */
#include "util/options.h"

#include <string.h>

/* The column the help of an option starts at. */
#define HELP_COLUMN 25

static bool is_option(const struct option_spec *o)
{
	return o->kind == OPTION_FLAG || o->kind == OPTION_VALUE || o->kind == OPTION_OPTIONAL;
}

static bool has_short(const struct option_spec *o)
{
	return o->id > 0 && o->id < 256;
}

void options_parse_init(struct options_parse *p, const struct option_spec *table, bool stop_at_operand,
                        int argc, char **argv)
{
	memset(p, 0, sizeof(*p));
	p->table = table;
	p->stop_at_operand = stop_at_operand;
	p->argc = argc;
	p->argv = argv;
	p->next = 1;
	p->end_at = argc;
	p->operands = argv + 1;
}

/* The words from `from` on are operands; the options ended at end_at. */
static int finish(struct options_parse *p, int end_at, int from)
{
	p->done = true;
	p->end_at = end_at;
	p->next = p->argc;
	if (!p->noperands) {   /* they lie together already, argv's NULL after them */
		p->operands = p->argv + from;
		p->noperands = p->argc - from;
		return OPTIONS_DONE;
	}
	/* after those set aside: an operand's new place is never after its old one */
	for (int i = from; i < p->argc; i++)
		p->argv[1 + p->noperands++] = p->argv[i];
	p->argv[1 + p->noperands] = NULL;
	p->operands = p->argv + 1;
	return OPTIONS_DONE;
}

/* The value of p->opt in the next word. */
static int value_in_next_word(struct options_parse *p)
{
	if (p->next >= p->argc)
		return OPTIONS_NEEDS_VALUE;
	if (!strcmp(p->argv[p->next], "--")) {
		p->end_at = p->next;
		return OPTIONS_VALUE_IS_END;
	}
	p->value = p->argv[p->next++];
	return p->opt->id;
}

static int long_option(struct options_parse *p, const char *word)
{
	const char *name = word + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct option_spec *found = NULL;
	bool ambiguous = false;
	p->word = word;
	for (const struct option_spec *o = p->table; len && o->kind != OPTION_END; o++) {
		if (!is_option(o) || strncmp(o->long_name, name, len))
			continue;
		if (strlen(o->long_name) == len) {   /* the whole name: this one, whatever else it begins */
			found = o;
			ambiguous = false;
			break;
		}
		if (!found)
			found = o;
		else if (found->id != o->id || found->kind != o->kind)
			ambiguous = true;
	}
	if (!found || ambiguous)
		return OPTIONS_UNKNOWN;
	p->opt = found;
	switch (found->kind) {
	case OPTION_FLAG:
		return eq ? OPTIONS_UNKNOWN : found->id;
	case OPTION_OPTIONAL:
		p->value = eq ? eq + 1 : NULL;
		return found->id;
	default:
		if (eq) {
			p->value = eq + 1;
			return found->id;
		}
		return value_in_next_word(p);
	}
}

static int short_option(struct options_parse *p)
{
	char c = *p->cluster++;
	p->short_word[0] = '-';
	p->short_word[1] = c;
	p->short_word[2] = '\0';
	p->word = p->short_word;
	const struct option_spec *o = p->table;
	while (o->kind != OPTION_END && !(is_option(o) && has_short(o) && o->id == (unsigned char)c))
		o++;
	if (o->kind == OPTION_END) {
		p->cluster = NULL;
		return OPTIONS_UNKNOWN;
	}
	p->opt = o;
	if (o->kind == OPTION_FLAG)
		return o->id;
	/* the rest of the word is the value: -i10ms */
	const char *rest = *p->cluster ? p->cluster : NULL;
	p->cluster = NULL;
	if (rest || o->kind == OPTION_OPTIONAL) {
		p->value = rest;
		return o->id;
	}
	return value_in_next_word(p);
}

int options_next(struct options_parse *p)
{
	if (p->done)
		return OPTIONS_DONE;
	p->opt = NULL;
	p->value = NULL;
	if (p->cluster && *p->cluster)
		return short_option(p);
	p->cluster = NULL;
	for (;;) {
		if (p->next >= p->argc)
			return finish(p, p->argc, p->argc);
		char *w = p->argv[p->next];
		if (!strcmp(w, "--"))
			return finish(p, p->next, p->next + 1);
		if (w[0] != '-' || !w[1]) {   /* an operand ("-" alone is one) */
			if (p->stop_at_operand)
				return finish(p, p->next, p->next);
			p->argv[1 + p->noperands++] = w;
			p->next++;
			continue;
		}
		p->at = p->next++;
		if (w[1] == '-')
			return long_option(p, w);
		p->cluster = w + 1;
		return short_option(p);
	}
}

/* "--census[=DUR]", "--interval DUR", "--quiet". */
static void add_long(struct strbuf *sb, const struct option_spec *o)
{
	strbuf_addf(sb, "--%s", o->long_name);
	if (o->kind == OPTION_VALUE)
		strbuf_addf(sb, " %s", o->argh);
	else if (o->kind == OPTION_OPTIONAL)
		strbuf_addf(sb, "[=%s]", o->argh);
}

void options_help(struct strbuf *sb, const struct option_spec *table)
{
	strbuf_addstr(sb, "options:\n");
	for (const struct option_spec *o = table; o->kind != OPTION_END; o++) {
		if (o->kind == OPTION_GROUP) {
			strbuf_addch(sb, '\n');
			if (*o->help)
				strbuf_addf(sb, "%s\n", o->help);
			continue;
		}
		if (o->hidden || !o->help)
			continue;
		size_t start = sb->len;
		if (has_short(o))
			strbuf_addf(sb, "  -%c, ", o->id);
		else
			strbuf_addstr(sb, "      ");
		add_long(sb, o);
		size_t width = sb->len - start;
		strbuf_addf(sb, "%*s", width < HELP_COLUMN ? (int)(HELP_COLUMN - width) : 2, "");
		for (const char *line = o->help; *line;) {
			size_t n = strcspn(line, "\n");
			if (line != o->help)
				strbuf_addf(sb, "%*s", HELP_COLUMN, "");
			strbuf_add(sb, line, n);
			strbuf_addch(sb, '\n');
			line += n + (line[n] == '\n');
		}
	}
}

void options_list(struct strbuf *sb, const struct option_spec *table)
{
	for (const struct option_spec *o = table; o->kind != OPTION_END; o++) {
		if (!is_option(o) || o->hidden)
			continue;
		add_long(sb, o);
		strbuf_addch(sb, '\n');
		if (has_short(o))
			strbuf_addf(sb, "-%c%s%s\n", o->id, o->kind == OPTION_VALUE ? " " : "",
			            o->kind == OPTION_VALUE ? o->argh : "");
	}
}

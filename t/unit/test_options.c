/*
 * test_options.c — util/options.c: argv read with a table as getopt_long
 * read it (clusters, values attached or in the next word, prefixes of long
 * names, operands set aside or ending the options), the errors, and the
 * table written out as a help list and a completion list.
 */
#include <string.h>

#include "tap.h"
#include "util/options.h"

enum { OPT_MAX_MEM = 256, OPT_MAX_GPU, OPT_CENSUS, OPT_NO_CGROUP, OPT_NO_COLOR, OPT_TRIAL };

static const struct option_spec table[] = {
	OPT_VALUE('i', "interval", "DUR", "sampling interval"),
	OPT_FLAG('q', "quiet", "no summary"),
	OPT_GROUP("budgets:"),
	OPT_VALUE(OPT_MAX_MEM, "max-mem", "SIZE", "the budget: 512M,\n12G or 80%"),
	OPT_VALUE(OPT_MAX_GPU, "max-gpu", "SIZE", "GPU budget"),
	OPT_OPTIONAL(OPT_CENSUS, "census", "DUR", "count objects"),
	OPT_GROUP(""),
	OPT_FLAG(OPT_NO_CGROUP, "no-cgroup", "no cgroup; --no-color too"),
	OPT_FLAG(OPT_NO_COLOR, "no-color", NULL),
	OPT_HIDDEN_VALUE(OPT_TRIAL, "trial"),
	OPT_VALUE('x', "a-long-name-for-it", "VALUE", "past the column"),
	OPT_HELP(),
	OPT_END(),
};

#define MAX_WORDS 16

/* What reading words gives, one token a step: "i=5" (an option and its
 * value, by short name or id), "q", "E-1:--bogus" (an error and its word),
 * and at the end "|" and the operands, space-separated. */
struct walk {
	char *argv[MAX_WORDS + 1];
	char got[512];
};

static const char *walk(struct walk *w, bool stop_at_operand, const char *words)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%s", words);
	int argc = 0;
	w->argv[argc++] = "cmd";
	for (char *save, *t = strtok_r(buf, " ", &save); t && argc < MAX_WORDS; t = strtok_r(NULL, " ", &save))
		w->argv[argc++] = t;
	w->argv[argc] = NULL;
	struct options_parse p;
	options_parse_init(&p, table, stop_at_operand, argc, w->argv);
	w->got[0] = '\0';
	int c;
	size_t len = 0;
	while ((c = options_next(&p)) != OPTIONS_DONE) {
		char tok[96];
		if (c < 0)
			snprintf(tok, sizeof(tok), "E%d:%s@%d ", c, p.word, p.at);
		else if (c < 256)
			snprintf(tok, sizeof(tok), "%c%s%s ", c, p.value ? "=" : "", p.value ? p.value : "");
		else
			snprintf(tok, sizeof(tok), "%d%s%s ", c, p.value ? "=" : "", p.value ? p.value : "");
		len += (size_t)snprintf(w->got + len, sizeof(w->got) - len, "%s", tok);
		if (c < 0)
			return w->got;
	}
	len += (size_t)snprintf(w->got + len, sizeof(w->got) - len, "|");
	for (int i = 0; i < p.noperands; i++)
		len += (size_t)snprintf(w->got + len, sizeof(w->got) - len, " %s", p.operands[i]);
	CHECK(p.operands[p.noperands] == NULL);
	return w->got;
}

static void test_words(void)
{
	struct walk w;
	CHECK_STR(walk(&w, false, ""), "|");
	CHECK_STR(walk(&w, false, "-q -i 5 --interval=6 --interval 7 -i8"), "q i=5 i=6 i=7 i=8 |");
	/* a cluster: flags, then one that takes the rest or the next word */
	CHECK_STR(walk(&w, false, "-qi5"), "q i=5 |");
	CHECK_STR(walk(&w, false, "-qqi 5"), "q q i=5 |");
	/* a value is the next word whatever it looks like, but "--" */
	CHECK_STR(walk(&w, false, "--max-mem -q"), "256=-q |");
	/* long names by any prefix of one option alone; the whole name wins */
	CHECK_STR(walk(&w, false, "--max-m 1G --max-g=2G --qu --cen"), "256=1G 257=2G q 258 |");
	CHECK_STR(walk(&w, false, "--census=1s --census= --census"), "258=1s 258= 258 |");
	CHECK_STR(walk(&w, false, "--no-color --no-cg"), "260 259 |");
	/* hidden options are read */
	CHECK_STR(walk(&w, false, "--trial 1:2:3"), "261=1:2:3 |");
}

static void test_operands(void)
{
	struct walk w;
	/* set aside, in order, and the options after them read */
	CHECK_STR(walk(&w, false, "a -q b --interval 5 c"), "q i=5 | a b c");
	CHECK_STR(walk(&w, false, "a -- -q b"), "| a -q b");
	CHECK_STR(walk(&w, false, "- -q"), "q | -");
	/* or the first ends the options: a job's command and its own options */
	CHECK_STR(walk(&w, true, "-q prog -q --x"), "q | prog -q --x");
	CHECK_STR(walk(&w, true, "-q -- prog -q"), "q | prog -q");
	CHECK_STR(walk(&w, true, "-- -- x"), "| -- x");
}

static void test_errors(void)
{
	struct walk w;
	char want[64];
	snprintf(want, sizeof(want), "q E%d:--bogus=3@2 ", OPTIONS_UNKNOWN);
	CHECK_STR(walk(&w, false, "-q --bogus=3"), want);
	/* the short option at fault, not the word it is in */
	snprintf(want, sizeof(want), "q E%d:-Z@1 ", OPTIONS_UNKNOWN);
	CHECK_STR(walk(&w, false, "-qZ"), want);
	snprintf(want, sizeof(want), "E%d:-Z@1 ", OPTIONS_UNKNOWN);
	CHECK_STR(walk(&w, false, "-Zq"), want);
	/* a prefix of two options; a flag given a value */
	snprintf(want, sizeof(want), "E%d:--max@1 ", OPTIONS_UNKNOWN);
	CHECK_STR(walk(&w, false, "--max 1G"), want);
	snprintf(want, sizeof(want), "E%d:--quiet=yes@1 ", OPTIONS_UNKNOWN);
	CHECK_STR(walk(&w, false, "--quiet=yes"), want);
	snprintf(want, sizeof(want), "E%d:---x@1 ", OPTIONS_UNKNOWN);
	CHECK_STR(walk(&w, false, "---x"), want);
	snprintf(want, sizeof(want), "E%d:--=x@1 ", OPTIONS_UNKNOWN);
	CHECK_STR(walk(&w, false, "--=x"), want);
	/* no value left */
	snprintf(want, sizeof(want), "q E%d:--max-mem@2 ", OPTIONS_NEEDS_VALUE);
	CHECK_STR(walk(&w, false, "-q --max-mem"), want);
	snprintf(want, sizeof(want), "q E%d:-i@1 ", OPTIONS_NEEDS_VALUE);
	CHECK_STR(walk(&w, false, "-qi"), want);
	/* the "--" that ends the options is no value */
	snprintf(want, sizeof(want), "E%d:--max-m@1 ", OPTIONS_VALUE_IS_END);
	CHECK_STR(walk(&w, true, "--max-m -- prog"), want);
	snprintf(want, sizeof(want), "E%d:-i@1 ", OPTIONS_VALUE_IS_END);
	CHECK_STR(walk(&w, false, "-i -- prog"), want);
	/* but given after '=' it is one */
	CHECK_STR(walk(&w, false, "--max-mem=--"), "256=-- |");
}

static void test_end_at(void)
{
	char *argv[] = { "cmd", "-q", "prog", "x", NULL };
	struct options_parse p;
	options_parse_init(&p, table, true, 4, argv);
	CHECK_EQ_INT(options_next(&p), 'q');
	CHECK_EQ_INT(options_next(&p), OPTIONS_DONE);
	CHECK_EQ_INT(p.end_at, 2);
	CHECK_EQ_INT(options_next(&p), OPTIONS_DONE);   /* and stays done */
	CHECK_EQ_INT(p.noperands, 2);
	char *argv2[] = { "cmd", "-i", "5", "--", "prog", NULL };
	options_parse_init(&p, table, true, 5, argv2);
	CHECK_EQ_INT(options_next(&p), 'i');
	CHECK_EQ_INT(options_next(&p), OPTIONS_DONE);
	CHECK_EQ_INT(p.end_at, 3);
	CHECK_STR(p.operands[0], "prog");
}

static void test_help(void)
{
	struct strbuf sb = STRBUF_INIT;
	options_help(&sb, table);
	CHECK_STR(strbuf_str(&sb),
	          "options:\n"
	          "  -i, --interval DUR     sampling interval\n"
	          "  -q, --quiet            no summary\n"
	          "\n"
	          "budgets:\n"
	          "      --max-mem SIZE     the budget: 512M,\n"
	          "                         12G or 80%\n"
	          "      --max-gpu SIZE     GPU budget\n"
	          "      --census[=DUR]     count objects\n"
	          "\n"
	          "      --no-cgroup        no cgroup; --no-color too\n"
	          "  -x, --a-long-name-for-it VALUE  past the column\n"
	          "  -h, --help             this help\n");
	strbuf_release(&sb);
}

static void test_list(void)
{
	struct strbuf sb = STRBUF_INIT;
	options_list(&sb, table);
	CHECK_STR(strbuf_str(&sb),
	          "--interval DUR\n-i DUR\n--quiet\n-q\n--max-mem SIZE\n--max-gpu SIZE\n--census[=DUR]\n"
	          "--no-cgroup\n--no-color\n--a-long-name-for-it VALUE\n-x VALUE\n--help\n-h\n");
	strbuf_release(&sb);
}

TEST_MAIN("options", TEST(test_words), TEST(test_operands), TEST(test_errors), TEST(test_end_at),
          TEST(test_help), TEST(test_list))

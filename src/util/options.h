/*
 * options.h — a command's options as one table, and the reader that walks
 * argv with it. The same table is the list of options in the command's
 * --help (options_help()) and what the shell completion offers
 * (options_list()), so an option is written once. The idea is git's
 * parse-options.h; the values are left to the command, which switches on
 * the id the reader returns (as it did on getopt_long's), and so does its
 * own checks and words its own refusals.
 *
 * The reader follows getopt_long's rules, so that what users type means
 * what it meant: -abc is -a -b -c; -ifoo and -i foo give -i the value foo;
 * --name=value and --name value; a long name may be cut to any prefix that
 * is one option's alone (--max-m: --max-mem); "--" ends the options, "-"
 * alone is not one. Words that are not options are set aside as operands
 * and the options after them read on, unless stop_at_operand (`run`: the
 * job's command and its own options begin at the first such word).
 * One departure: an option's value is never the "--" that ends the
 * options (`--max-mem -- CMD`): that is OPTIONS_VALUE_IS_END, where getopt
 * took the "--" for the value and the command for an operand.
 */
#ifndef LP_OPTIONS_H
#define LP_OPTIONS_H

#include <stdbool.h>

#include "util/util.h"

enum option_kind {
	OPTION_END,          /* the end of the table */
	OPTION_GROUP,        /* a heading in the help: its text ("" for a blank line alone) */
	OPTION_FLAG,         /* no value */
	OPTION_VALUE,        /* a value: the next word, or after '=' (-iVALUE for a short one) */
	OPTION_OPTIONAL,     /* a value only after '=': --census or --census=1s */
};

/*
 * One entry of a table. id is what options_next() returns for the option:
 * its short name when it has one ('i' for -i, --interval), else a number
 * of the command's own from 256 up. help is the text of its help line and
 * the lines under it, '\n' between them (they are indented to the column
 * of the first); NULL for an option the entry above tells of in its own
 * text ("--status-line ...; --no-status-line never draws it"): listed for
 * the completion, without a line of its own. A hidden option is read but
 * neither shown nor completed (`run --trial`, set by `leakproof sweep`).
 */
struct option_spec {
	enum option_kind kind;
	int id;
	const char *long_name;
	const char *argh;        /* the value's placeholder in the help: "DUR", "SIZE" */
	const char *help;
	bool hidden;
};

#define OPT_FLAG(id, name, help)            { OPTION_FLAG, (id), (name), NULL, (help), false }
#define OPT_VALUE(id, name, argh, help)     { OPTION_VALUE, (id), (name), (argh), (help), false }
#define OPT_OPTIONAL(id, name, argh, help)  { OPTION_OPTIONAL, (id), (name), (argh), (help), false }
#define OPT_HIDDEN_FLAG(id, name)           { OPTION_FLAG, (id), (name), NULL, NULL, true }
#define OPT_HIDDEN_VALUE(id, name)          { OPTION_VALUE, (id), (name), NULL, NULL, true }
#define OPT_HIDDEN_OPTIONAL(id, name)       { OPTION_OPTIONAL, (id), (name), NULL, NULL, true }
#define OPT_GROUP(heading)                  { OPTION_GROUP, 0, NULL, NULL, (heading), false }
#define OPT_HELP()                          OPT_FLAG('h', "help", "this help")
#define OPT_END()                           { OPTION_END, 0, NULL, NULL, NULL, false }

/* What options_next() returns when it has no option to give. */
enum {
	OPTIONS_DONE = 0,             /* the end of the options: the operands are read */
	OPTIONS_UNKNOWN = -1,         /* word: no such option (or a prefix of several, or a flag given "=value") */
	OPTIONS_NEEDS_VALUE = -2,     /* word: the last word, an option that takes a value */
	OPTIONS_VALUE_IS_END = -3,    /* word: its value would be the "--" at end_at */
};

/*
 * The state of one walk over argv (argv[argc] NULL, as main's). argv[0]
 * is the command's name, never read. Words are read from argv[1]; once
 * the walk is done the operands are operands[0..noperands), NULL after the
 * last. Operands set aside before options are moved down to argv[1] and
 * those after them follow (argv is rearranged, as getopt_long rearranges
 * it); when none was set aside, argv is left as it is.
 */
struct options_parse {
	const struct option_spec *table;
	bool stop_at_operand;
	int argc;
	char **argv;
	/* where the walk is */
	int next;                /* the next word to read */
	bool done;               /* OPTIONS_DONE was returned */
	const char *cluster;     /* the rest of a word of short options: "qv" of -qv */
	char short_word[3];      /* "-q", for word */
	/* the option options_next() returned, or the word at fault */
	const struct option_spec *opt;
	const char *value;       /* its value; NULL when none was given */
	const char *word;        /* as typed: "--max-m", "--bogus=3", "-q" */
	int at;                  /* the index in argv of the word it was in */
	/* once OPTIONS_DONE (or OPTIONS_VALUE_IS_END) */
	int end_at;              /* where the options ended: the "--", the first word of a
	                            stop_at_operand's operands, or argc */
	char **operands;
	int noperands;
};

void options_parse_init(struct options_parse *p, const struct option_spec *table, bool stop_at_operand,
                        int argc, char **argv);
/*
 * The next option: its id (> 0), with p->opt, p->value, p->word and p->at
 * set; OPTIONS_DONE at the end; or one of the errors above (< 0), with
 * p->word and p->at. After an error the walk cannot go on.
 */
int options_next(struct options_parse *p);

/*
 * The help's list of options: a heading "options:", then a line per option
 * and group, in the table's order:
 *   "  -i, --interval DUR     sampling interval: ..."
 *   "      --census[=DUR]     count a Python job's ..."
 * the help from column 25 (the option two spaces before it when it is
 * longer), each further line of the help indented to that column; a group
 * is a blank line and its heading. Hidden options are left out.
 */
void options_help(struct strbuf *sb, const struct option_spec *table);

/* One line per name of each option that is not hidden, for the shell's
 * completion: "--interval DUR", "-i DUR", "--census[=DUR]", "--quiet", "-q". */
void options_list(struct strbuf *sb, const struct option_spec *table);

#endif

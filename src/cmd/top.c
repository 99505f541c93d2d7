/*
 * top.c — `leakproof top`: a live full-screen view (ncurses) of the runs in
 * the store: those running and those ended lately, one line each with its
 * memory, recent trend, growth and verdict so far, and time to its limit;
 * Enter opens one run (its processes, its growing allocation sites). With
 * no terminal, or --once, one snapshot as text or JSON.
 *
 * What is known of the runs (their live state, the judgment so far, time
 * to the limit, reading the store) is judge/watch.h's model; this file is
 * the command: its options, the order and filter of the list, the screen,
 * the keys, and the snapshot. Costs and choices: docs/internals/top.md.
 * Units: bytes, seconds.
 */
static const char usage_head[] =
"usage: leakproof top [options]\n"
"\n"
"Watch the runs in the store, live: those running and those that ended in\n"
"the last 10 minutes. Per run: id, memory now (under the run's measure) and\n"
"its recent course, growth per step so far with the verdict so far, time to\n"
"the memory limit at that rate, GPU memory, steps per second, restarts, how\n"
"it last ended, host and command. Sorted by time to the limit.\n"
"\n"
"keys: Up/Down select, Enter a run's processes and allocation sites (Esc\n"
"back), / filter by command text, s or > sort by the next column, < the\n"
"previous, r reverse, q or Ctrl-C quit.\n";

static const char usage_tail[] =
"exit status: 0; 1 when the store does not exist or cannot be read; 124 for\n"
"a usage error.\n";
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "judge/watch.h"
#include "report/report.h"
#include "store/store.h"
#include "util/jsonw.h"
#include "util/util.h"

enum { OPT_ONCE = 256 };

static const struct option_spec options[] = {
	OPT_VALUE('d', "delay", "SECONDS", "refresh every SECONDS (default 1; 0.1 to 3600)"),
	OPT_FLAG(OPT_ONCE, "once", "print one snapshot and exit (also when standard\n"
	                           "output is not a terminal)"),
	OPT_VALUE('f', "format", "F", "with --once: text (default) or json (an array of\n"
	                              "objects, one per run)"),
	CMD_OPT_STORE,
	OPT_HELP(),
	OPT_END(),
};

const struct cmd_usage top_usage = { "top", usage_head, options, usage_tail, false };

#define usage_error(...) cmd_usage_error("top", __VA_ARGS__)

/* What the command line asks for. */
struct top_args {
	struct listing_args l;      /* --format (with --once), --store */
	bool once;
	double delay;               /* seconds between refreshes */
};

static int take_option(void *ctx, int c, const struct options_parse *p)
{
	struct top_args *a = ctx;
	switch (c) {
	case 'd': {
		char *end;
		errno = 0;
		a->delay = strtod(p->value, &end);
		if (errno || end == p->value || *end || !(a->delay >= 0.1 && a->delay <= 3600))
			return usage_error("--delay '%s' is not a number of seconds from 0.1 to 3600", p->value);
		return 0;
	}
	case OPT_ONCE:
		a->once = true;
		return 0;
	default:
		return cmd_listing_option("top", &a->l, c, p->value);
	}
}

#define LIST_SPARK 8            /* sparkline width in the list */

enum sort_key { SORT_LIMIT, SORT_MEM, SORT_GROWTH, SORT_RATE, SORT_ID, SORT_COMMAND, SORT_COUNT };
static const char *const sort_names[SORT_COUNT] = {
	"to-limit", "memory", "growth", "steps/s", "id", "command",
};

/* A run of the list as shown: its command in words, whole (the filter,
 * --once, the detail view) and short (the list, the sort). */
struct shown_run {
	const struct watched_run *r;
	char *command;              /* argv as a shell reads it */
	char *short_command;        /* the same with directories of argv[0..1] cut */
};

struct top {
	struct watch w;             /* the runs, read from the store */
	struct shown_run *shown;    /* filtered and sorted; the commands owned */
	size_t nshown;
	enum sort_key sort;
	bool reverse;
	char filter[128];
	bool utf8;
};

static const char *base_name(const char *s)
{
	const char *slash = strrchr(s, '/');
	return slash && slash[1] ? slash + 1 : s;
}

/* The run's command as a shell reads it; short: "python3 train.py --lr 0.1"
 * for "/usr/bin/python3 /home/.../train.py ...". The caller frees it. */
static char *command_line(const struct watched_run *r, bool short_form)
{
	struct strbuf sb = STRBUF_INIT;
	if (!short_form) {
		report_add_command_line(&sb, r->argv, r->argc, 0);
		return strbuf_detach(&sb, NULL);
	}
	char **shortv = xcalloc(r->argc + 1, sizeof(char *));
	for (size_t i = 0; i < r->argc; i++)
		shortv[i] = i < 2 ? (char *)base_name(r->argv[i]) : r->argv[i];
	report_add_command_line(&sb, shortv, r->argc, 0);
	free(shortv);
	return strbuf_detach(&sb, NULL);
}

static void drop_shown(struct top *t)
{
	for (size_t i = 0; i < t->nshown; i++) {
		free(t->shown[i].command);
		free(t->shown[i].short_command);
	}
	free(t->shown);
	t->shown = NULL;
	t->nshown = 0;
}

/* ---- order and filter -------------------------------------------------- */

static enum sort_key sort_by;
static bool sort_reverse;

/* Values that sort last whatever the direction are NAN. */
static double sort_value(const struct watched_run *r)
{
	switch (sort_by) {
	case SORT_LIMIT: return r->seconds_to_limit >= 0 ? r->seconds_to_limit : NAN;
	case SORT_MEM: return r->has_last ? -watched_run_memory_bytes(r) : NAN;
	case SORT_GROWTH: return r->j.valid && isfinite(r->j.growth_bytes_per_x) ? -r->j.growth_bytes_per_x : NAN;
	case SORT_RATE: return r->j.valid && r->j.steps_per_second > 0 ? -r->j.steps_per_second : NAN;
	case SORT_ID: return -(double)r->id;
	default: return 0;
	}
}

static int compare_runs(const void *pa, const void *pb)
{
	const struct shown_run *sa = pa, *sb = pb;
	const struct watched_run *a = sa->r, *b = sb->r;
	int c = 0;
	if (sort_by == SORT_COMMAND) {
		c = strcmp(sa->short_command, sb->short_command);
	} else {
		double va = sort_value(a), vb = sort_value(b);
		if (isnan(va) != isnan(vb))
			return isnan(va) ? 1 : -1;
		c = va < vb ? -1 : va > vb ? 1 : 0;
	}
	if (sort_reverse)
		c = -c;
	if (!c)   /* running before ended, then newest first */
		c = (a->run.ended_at > 0) - (b->run.ended_at > 0);
	return c ? c : (a->id < b->id) - (a->id > b->id);
}

static void order(struct top *t)
{
	drop_shown(t);
	t->shown = xcalloc(t->w.nruns ? t->w.nruns : 1, sizeof(*t->shown));
	for (size_t i = 0; i < t->w.nruns; i++) {
		char *command = command_line(t->w.runs[i], false);
		if (t->filter[0] && !strcasestr(command, t->filter)) {
			free(command);
			continue;
		}
		t->shown[t->nshown++] = (struct shown_run){
			.r = t->w.runs[i],
			.command = command,
			.short_command = command_line(t->w.runs[i], true),
		};
	}
	sort_by = t->sort;
	sort_reverse = t->reverse;
	qsort(t->shown, t->nshown, sizeof(*t->shown), compare_runs);
}

/* ---- cells ------------------------------------------------------------- */

/* "384M", "1.2G", "64K", "512B": at most 5 columns. */
static void fmt_size(char *buf, size_t sz, double bytes)
{
	static const char units[] = "BKMGTP";
	double a = fabs(bytes);
	int u = 0;
	while (a >= 1000 && u < 5) {
		a /= 1024;
		u++;
	}
	const char *sign = bytes < 0 ? "-" : "";
	if (u && a < 10)
		snprintf(buf, sz, "%s%.1f%c", sign, a, units[u]);
	else
		snprintf(buf, sz, "%s%.0f%c", sign, a, units[u]);
}

/* "45s", "12m", "3h05", "2.5d". */
static void fmt_eta(char *buf, size_t sz, double s)
{
	if (s < 0 || !isfinite(s))
		snprintf(buf, sz, "-");
	else if (s < 100)
		snprintf(buf, sz, "%.0fs", s);
	else if (s < 6000)
		snprintf(buf, sz, "%.0fm", s / 60);
	else if (s < 86400)
		snprintf(buf, sz, "%dh%02d", (int)(s / 3600), (int)fmod(s / 60, 60));
	else if (s < 100 * 86400)
		snprintf(buf, sz, "%.1fd", s / 86400);
	else
		snprintf(buf, sz, ">99d");
}

static void fmt_growth(char *buf, size_t sz, const struct watch_judgment *j)
{
	if (!j->valid || !isfinite(j->growth_bytes_per_x)) {
		snprintf(buf, sz, "-");
		return;
	}
	char num[16];
	fmt_size(num, sizeof(num), j->growth_bytes_per_x);
	snprintf(buf, sz, "%s%s%s", j->growth_bytes_per_x > 0 ? "+" : "", num, !strcmp(j->x_unit, "s") ? "/s" : "");
}

/* The last width points as block characters (ASCII when the terminal is
 * not UTF-8), scaled between their minimum and maximum; a range under 1%
 * of the maximum is drawn flat. */
static void add_sparkline(struct strbuf *sb, const struct watched_run *r, size_t width, bool utf8)
{
	static const char *const blocks[] = { "\u2581", "\u2582", "\u2583", "\u2584",
	                                      "\u2585", "\u2586", "\u2587", "\u2588" };
	static const char ascii[] = "_.-:=+*#";
	size_t n = r->nrecent < width ? r->nrecent : width;
	const double *p = r->recent_bytes + r->nrecent - n;
	double lo = INFINITY, hi = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		lo = fmin(lo, p[i]);
		hi = fmax(hi, p[i]);
	}
	for (size_t i = n; i < width; i++)
		strbuf_addch(sb, ' ');
	for (size_t i = 0; i < n; i++) {
		int level = hi - lo > 0.01 * hi ? (int)((p[i] - lo) / (hi - lo) * 7.0 + 0.5) : 0;
		if (utf8)
			strbuf_addstr(sb, blocks[level]);
		else
			strbuf_addch(sb, ascii[level]);
	}
}

enum column { C_ID, C_STATE, C_MEM, C_SPARK, C_GROWTH, C_VERDICT, C_LIMIT, C_GPU, C_RATE,
              C_RESTARTS, C_END, C_HOST, C_COMMAND, C_COUNT };
static const struct {
	const char *title;
	int width;
	bool left;
} columns[C_COUNT] = {
	[C_ID] = { "ID", 4, false },
	[C_STATE] = { "STATE", 7, true },
	[C_MEM] = { "MEM", 5, false },
	[C_SPARK] = { "RECENT", LIST_SPARK, true },
	[C_GROWTH] = { "GROWTH", 7, false },
	[C_VERDICT] = { "VERDICT", 7, true },
	[C_LIMIT] = { "LIMIT", 5, false },
	[C_GPU] = { "GPU", 5, false },
	[C_RATE] = { "STEP/S", 6, false },
	[C_RESTARTS] = { "RST", 3, false },
	[C_END] = { "END", 7, true },
	[C_HOST] = { "HOST", 10, true },
	[C_COMMAND] = { "COMMAND", 0, true },
};
/* Dropped first when the terminal is narrow. */
static const enum column drop_order[] = { C_HOST, C_STATE, C_RESTARTS, C_GPU, C_END, C_RATE, C_SPARK,
                                          C_LIMIT, C_VERDICT, C_GROWTH };
#define COMMAND_MIN 16

/* Which columns to show in width (0: all, commands uncut). Columns with
 * nothing to say for any run (GPU, restarts, other hosts) are left out. */
static void choose_columns(const struct top *t, int width, bool show[C_COUNT])
{
	bool gpu = false, restarts = false, hosts = false;
	for (size_t i = 0; i < t->nshown; i++) {
		const struct watched_run *r = t->shown[i].r;
		gpu |= r->has_last && r->last.has_gpu;
		restarts |= r->restarts > 0;
		hosts |= strcmp(r->run.hostname, t->w.host) != 0;
	}
	for (int c = 0; c < C_COUNT; c++)
		show[c] = true;
	show[C_GPU] = gpu || width == 0;
	show[C_RESTARTS] = restarts || width == 0;
	show[C_HOST] = hosts || width == 0;
	if (!width)
		return;
	for (size_t d = 0; d < sizeof(drop_order) / sizeof(drop_order[0]); d++) {
		int used = 0;
		for (int c = 0; c < C_COMMAND; c++)
			if (show[c])
				used += columns[c].width + 1;
		if (width - used >= COMMAND_MIN)
			break;
		show[drop_order[d]] = false;
	}
}

/* Display columns of a UTF-8 string (one per code point). */
static size_t text_width(const char *s, size_t len)
{
	size_t w = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			w++;
	return w;
}

/* Append s in width columns (0: as it is), padded or cut. */
static void add_cell(struct strbuf *sb, const char *s, int width, bool left)
{
	size_t len = strlen(s), w = text_width(s, len);
	if (width <= 0) {
		strbuf_add(sb, s, len);
		return;
	}
	if (w > (size_t)width) {
		size_t cols = 0, i = 0;
		while (i < len && cols < (size_t)width - 1) {
			i++;
			while (i < len && ((unsigned char)s[i] & 0xc0) == 0x80)
				i++;
			cols++;
		}
		strbuf_add(sb, s, i);
		strbuf_addch(sb, '~');
		return;
	}
	if (!left)
		for (size_t k = w; k < (size_t)width; k++)
			strbuf_addch(sb, ' ');
	strbuf_add(sb, s, len);
	if (left)
		for (size_t k = w; k < (size_t)width; k++)
			strbuf_addch(sb, ' ');
}

static const char *short_verdict(const struct watch_judgment *j)
{
	if (!j->valid)
		return "-";
	return !strcmp(j->verdict, "inconclusive") ? "unsure" : j->verdict;
}

/* One line of the table (header when s is NULL), in width columns (0: no cut). */
static void add_line(struct strbuf *sb, const struct top *t, const struct shown_run *s, const bool show[C_COUNT],
                     int width)
{
	const struct watched_run *r = s ? s->r : NULL;
	size_t start = sb->len;
	int used = 0;
	for (int c = 0; c < C_COUNT; c++) {
		if (!show[c])
			continue;
		char buf[64] = "-";
		const char *text = buf;
		if (!r) {
			text = columns[c].title;
		} else {
			switch (c) {
			case C_ID: snprintf(buf, sizeof(buf), "%lld", (long long)r->id); break;
			case C_STATE: text = watched_state_name(r->state); break;
			case C_MEM:
				if (r->has_last)
					fmt_size(buf, sizeof(buf), watched_run_memory_bytes(r));
				break;
			case C_SPARK: {
				struct strbuf sp = STRBUF_INIT;
				add_sparkline(&sp, r, LIST_SPARK, t->utf8);
				add_cell(sb, strbuf_str(&sp), columns[c].width, true);
				strbuf_release(&sp);
				strbuf_addch(sb, ' ');
				used += columns[c].width + 1;
				continue;
			}
			case C_GROWTH: fmt_growth(buf, sizeof(buf), &r->j); break;
			case C_VERDICT: text = short_verdict(&r->j); break;
			case C_LIMIT: fmt_eta(buf, sizeof(buf), r->seconds_to_limit); break;
			case C_GPU:
				if (r->has_last && r->last.has_gpu)
					fmt_size(buf, sizeof(buf), (double)r->last.gpu);
				break;
			case C_RATE:
				if (r->j.valid && r->j.steps_per_second > 0)
					snprintf(buf, sizeof(buf), r->j.steps_per_second < 100 ? "%.1f" : "%.0f",
					         r->j.steps_per_second);
				break;
			case C_RESTARTS: snprintf(buf, sizeof(buf), "%d", r->restarts); break;
			case C_END: text = r->last_cause[0] ? r->last_cause : "-"; break;
			case C_HOST: text = r->run.hostname[0] ? r->run.hostname : "-"; break;
			case C_COMMAND: text = width ? s->short_command : s->command; break;
			}
		}
		if (c == C_COMMAND) {
			add_cell(sb, text, width ? (width - used > 1 ? width - used : 1) : 0, true);
			break;
		}
		add_cell(sb, text, columns[c].width, columns[c].left);
		strbuf_addch(sb, ' ');
		used += columns[c].width + 1;
	}
	if (!width)   /* no trailing blanks in text output */
		while (sb->len > start && sb->buf[sb->len - 1] == ' ')
			sb->buf[--sb->len] = '\0';
}

/* ---- snapshot: text and json ------------------------------------------- */

/* One run: the object `ls` writes (report_json_run()), with the judgment
 * so far in place of the stored one, then what only the live view knows. */
static void add_json_run(struct json_writer *jw, const struct shown_run *s)
{
	const struct watched_run *r = s->r;
	const struct watch_judgment *j = &r->j;
	double mem = watched_run_memory_bytes(r);
	double peak = fmax((double)r->run.peak_bytes, watched_run_peak_bytes(r));
	struct run_json_now now = {
		.verdict = j->valid ? j->verdict : NULL,
		.growth_bytes_per_step = j->valid ? j->growth_bytes_per_x : NAN,
		.steps = j->valid ? (int64_t)j->steps : r->run.steps,
		.peak_bytes = peak,
	};

	jw_array_object(jw, false);
	report_json_run(jw, &r->run, &now);
	jw_break(jw);
	jw_object_string(jw, "command_line", s->command);
	jw_object_string(jw, "state", watched_state_name(r->state));
	jw_object_double(jw, "memory_bytes", mem >= 0 ? mem : NAN);
	jw_object_array(jw, "recent_bytes", false);
	for (size_t i = 0; i < r->nrecent; i++)
		jw_array_double(jw, r->recent_bytes[i]);
	jw_end(jw);
	jw_object_double(jw, "recent_point_seconds", WATCH_POINT_SECONDS);
	jw_break(jw);
	jw_object_double(jw, "gpu_bytes", r->has_last && r->last.has_gpu ? (double)r->last.gpu : NAN);
	jw_object_array(jw, "growth_interval_bytes_per_step", false);
	jw_array_double(jw, j->valid ? j->growth_low_bytes_per_x : NAN);
	jw_array_double(jw, j->valid ? j->growth_high_bytes_per_x : NAN);
	jw_end(jw);
	jw_object_string(jw, "x_unit", j->valid ? j->x_unit : NULL);
	jw_break(jw);
	jw_object_string(jw, "reason", j->valid && j->reason[0] ? j->reason : NULL);
	jw_break(jw);
	jw_object_double(jw, "projected_seconds_to_limit", r->seconds_to_limit >= 0 ? r->seconds_to_limit : NAN);
	jw_object_double(jw, "limit_bytes", j->valid && j->limit_bytes > 0 ? j->limit_bytes : NAN);
	jw_object_string(jw, "limit_source", j->valid && j->limit_source[0] ? j->limit_source : NULL);
	jw_object_double(jw, "steps_per_second", j->valid && j->steps_per_second > 0 ? j->steps_per_second : NAN);
	jw_object_intmax(jw, "restarts", r->restarts);
	jw_object_string(jw, "last_end_cause", r->last_cause[0] ? r->last_cause : NULL);
	jw_end(jw);
}

static int snapshot(struct top *t, bool json)
{
	struct strbuf sb = STRBUF_INIT;
	if (json) {
		struct json_writer jw;
		jw_init(&jw, &sb);
		jw_array_begin(&jw, true);
		for (size_t i = 0; i < t->nshown; i++)
			add_json_run(&jw, &t->shown[i]);
		jw_end(&jw);
		strbuf_addch(&sb, '\n');
	} else if (t->nshown) {
		bool show[C_COUNT];
		choose_columns(t, 0, show);
		add_line(&sb, t, NULL, show, 0);
		strbuf_addch(&sb, '\n');
		for (size_t i = 0; i < t->nshown; i++) {
			add_line(&sb, t, &t->shown[i], show, 0);
			strbuf_addch(&sb, '\n');
		}
	} else {
		fprintf(stderr, "leakproof: no run running or ended in the last %.0f minutes in store '%s'\n",
		        WATCH_RECENT_SECONDS / 60, t->w.path);
	}
	int status = 0;
	if ((sb.len && fwrite(sb.buf, 1, sb.len, stdout) != sb.len) || fflush(stdout) != 0) {
		error_errno("cannot write standard output");
		status = 1;
	}
	strbuf_release(&sb);
	return status;
}

/* ---- the screen -------------------------------------------------------- */

static volatile sig_atomic_t quit_signal;

static void on_quit(int sig)
{
	quit_signal = sig;
}

struct screen {
	int64_t selected;           /* run id under the cursor; 0 none */
	int64_t detail;             /* run id shown whole; 0: the list */
	bool editing;               /* typing a filter */
	char edit[128];
	size_t first;               /* first row shown when the list scrolls */
	char message[128];          /* one line at the bottom, until the next key */
};

static void put_line(int y, const char *s, attr_t attr)
{
	if (y >= LINES)
		return;
	attron(attr);
	mvaddstr(y, 0, s);
	if (attr & A_REVERSE) {
		int cy, cx;
		getyx(stdscr, cy, cx);
		if (cy == y)
			for (int x = cx; x < COLS; x++)
				addch(' ');
	}
	attroff(attr);
}

/* s cut to the screen's width. */
static void put_text(int y, const char *s, attr_t attr)
{
	struct strbuf sb = STRBUF_INIT;
	add_cell(&sb, s, COLS > 1 ? COLS - 1 : 1, true);
	put_line(y, strbuf_str(&sb), attr);
	strbuf_release(&sb);
}

static void draw_list(struct top *t, struct screen *sc)
{
	char head[256];
	size_t running = 0;
	for (size_t i = 0; i < t->w.nruns; i++)
		running += t->w.runs[i]->state == WATCHED_RUNNING;
	snprintf(head, sizeof(head), "leakproof top: %zu running, %zu ended lately   sort: %s%s%s%s", running,
	         t->w.nruns - running, sort_names[t->sort], t->reverse ? " (reversed)" : "",
	         t->filter[0] ? "   filter: " : "", t->filter);
	put_text(0, head, A_BOLD);

	bool show[C_COUNT];
	choose_columns(t, COLS, show);
	struct strbuf sb = STRBUF_INIT;
	add_line(&sb, t, NULL, show, COLS - 1);
	put_line(1, strbuf_str(&sb), A_REVERSE);

	size_t sel = 0;
	bool found = false;
	for (size_t i = 0; i < t->nshown; i++)
		if (t->shown[i].r->id == sc->selected) {
			sel = i;
			found = true;
		}
	if (!found && t->nshown)
		sc->selected = t->shown[0].r->id;
	size_t rows = LINES > 3 ? (size_t)LINES - 3 : 1;
	if (sel < sc->first)
		sc->first = sel;
	if (sel >= sc->first + rows)
		sc->first = sel - rows + 1;
	if (sc->first >= t->nshown)
		sc->first = 0;
	for (size_t i = sc->first; i < t->nshown && i - sc->first < rows; i++) {
		const struct watched_run *r = t->shown[i].r;
		strbuf_reset(&sb);
		add_line(&sb, t, &t->shown[i], show, COLS - 1);
		attr_t attr = r->id == sc->selected ? A_REVERSE : r->state != WATCHED_RUNNING ? A_DIM : A_NORMAL;
		if (r->j.valid && !strcmp(r->j.verdict, "leak") && r->id != sc->selected)
			attr |= A_BOLD;
		put_line(2 + (int)(i - sc->first), strbuf_str(&sb), attr);
	}
	if (!t->nshown)
		put_text(2, t->filter[0] ? "no run matches the filter" : "no run running or ended in the last 10 minutes",
		         A_NORMAL);
	strbuf_release(&sb);
}

static void draw_detail(struct top *t, struct screen *sc)
{
	const struct watched_run *r = watch_find(&t->w, sc->detail);
	if (!r) {
		put_text(0, "the run is gone from the list (Esc: back)", A_BOLD);
		return;
	}
	const struct watch_judgment *j = &r->j;
	char buf[512], a[32], b[32], c[32];
	int y = 0;
	snprintf(buf, sizeof(buf), "run %lld: %s on %s, measure %s", (long long)r->id, watched_state_name(r->state),
	         r->run.hostname[0] ? r->run.hostname : "?", measure_name(r->run.measure));
	put_text(y++, buf, A_BOLD);
	char *command = command_line(r, false);
	put_text(y++, command, A_NORMAL);
	free(command);
	y++;
	fmt_bytes(a, sizeof(a), r->has_last ? watched_run_memory_bytes(r) : 0);
	fmt_bytes(b, sizeof(b), watched_run_peak_bytes(r));
	if (j->valid && j->limit_bytes > 0)
		fmt_bytes(c, sizeof(c), j->limit_bytes);
	else
		snprintf(c, sizeof(c), "none known");
	snprintf(buf, sizeof(buf), "memory %s now, peak %s, limit %s%s%s%s", a, b, c,
	         j->valid && j->limit_source[0] ? " (" : "", j->valid ? j->limit_source : "",
	         j->valid && j->limit_source[0] ? ")" : "");
	put_text(y++, buf, A_NORMAL);
	if (j->valid) {
		fmt_bytes(a, sizeof(a), j->growth_bytes_per_x);
		fmt_eta(b, sizeof(b), r->seconds_to_limit);
		snprintf(buf, sizeof(buf), "growth %s per %s so far: %s; to the limit: %s", a, j->x_unit, j->verdict, b);
		put_text(y++, buf, A_NORMAL);
		put_text(y++, j->reason, A_NORMAL);
		snprintf(buf, sizeof(buf), "%zu steps (%.1f/s), %d restart%s, last end: %s", j->steps,
		         j->steps_per_second, r->restarts, r->restarts == 1 ? "" : "s",
		         r->last_cause[0] ? r->last_cause : "none yet");
		put_text(y++, buf, A_NORMAL);
	}
	struct strbuf sb = STRBUF_INIT;
	int spark = COLS - 12 > WATCH_POINTS ? WATCH_POINTS : COLS - 12;
	if (spark > 0) {
		strbuf_addstr(&sb, "recent    ");
		add_sparkline(&sb, r, (size_t)spark, t->utf8);
		put_line(y++, strbuf_str(&sb), A_NORMAL);
	}
	y++;

	struct proc_row *procs = NULL;
	size_t nprocs = 0;
	if (watch_processes(&t->w, r->id, &procs, &nprocs) < 0)
		snprintf(sc->message, sizeof(sc->message), "cannot read the run's processes");
	if (nprocs) {
		snprintf(buf, sizeof(buf), "processes at %.1f s:", procs[0].t);
		put_text(y++, buf, A_BOLD);
		snprintf(buf, sizeof(buf), "%7s %7s %6s %6s %6s %6s %6s  %s", "PID", "PPID", "RSS", "PSS", "USS",
		         "SWAP", "GPU", "NAME");
		put_text(y++, buf, A_REVERSE);
	} else {
		put_text(y++, "no per-process samples yet", A_NORMAL);
	}
	int room = LINES - y - 2 - (j->nsites ? (int)j->nsites + 2 : 0);
	for (size_t i = 0; i < nprocs && y < LINES - 1 && (int)i < (room > 1 ? room : 1); i++) {
		char v[5][16];
		fmt_size(v[0], sizeof(v[0]), (double)procs[i].rss);
		fmt_size(v[1], sizeof(v[1]), (double)procs[i].pss);
		fmt_size(v[2], sizeof(v[2]), (double)procs[i].uss);
		fmt_size(v[3], sizeof(v[3]), (double)procs[i].swap);
		fmt_size(v[4], sizeof(v[4]), (double)procs[i].gpu);
		snprintf(buf, sizeof(buf), "%7d %7d %6s %6s %6s %6s %6s  %s", procs[i].pid, procs[i].ppid, v[0], v[1],
		         v[2], v[3], v[4], procs[i].name);
		put_text(y++, buf, A_NORMAL);
	}
	free(procs);
	if (j->nsites && y < LINES - 2) {
		y++;
		put_text(y++, "allocation sites growing the most:", A_BOLD);
		for (size_t i = 0; i < j->nsites && y < LINES - 1; i++) {
			fmt_size(a, sizeof(a), j->sites[i].growth_bytes_per_x);
			fmt_size(b, sizeof(b), j->sites[i].live_bytes);
			snprintf(buf, sizeof(buf), "%7s/%s %7s live  %s%s%s%s", a, j->x_unit, b, j->sites[i].label,
			         j->sites[i].growing ? "" : " (", j->sites[i].growing ? "" : j->sites[i].state,
			         j->sites[i].growing ? "" : ")");
			put_text(y++, buf, A_NORMAL);
		}
	} else if (!j->traced && y < LINES - 2) {
		put_text(++y, "allocation sites: not traced (leakproof run --trace)", A_DIM);
	}
	strbuf_release(&sb);
}

static void draw(struct top *t, struct screen *sc)
{
	erase();
	if (sc->detail)
		draw_detail(t, sc);
	else
		draw_list(t, sc);
	char foot[192];
	if (sc->editing)
		snprintf(foot, sizeof(foot), "filter: %s", sc->edit);
	else if (sc->message[0])
		snprintf(foot, sizeof(foot), "%s", sc->message);
	else if (sc->detail)
		snprintf(foot, sizeof(foot), "Esc back  q quit");
	else
		snprintf(foot, sizeof(foot), "q quit  Up/Down select  Enter detail  / filter  s < sort  r reverse");
	put_text(LINES - 1, foot, sc->editing ? A_BOLD : A_DIM);
	if (sc->editing) {
		curs_set(1);
		move(LINES - 1, (int)text_width(foot, strlen(foot)) < COLS ? (int)text_width(foot, strlen(foot)) : COLS - 1);
	} else {
		curs_set(0);
	}
	refresh();
}

static void move_selection(struct top *t, struct screen *sc, int delta)
{
	for (size_t i = 0; i < t->nshown; i++) {
		if (t->shown[i].r->id != sc->selected)
			continue;
		long k = (long)i + delta;
		if (k < 0)
			k = 0;
		if (k >= (long)t->nshown)
			k = (long)t->nshown - 1;
		sc->selected = t->shown[k].r->id;
		return;
	}
}

/* Handle one key. Returns false to quit. */
static bool on_key(struct top *t, struct screen *sc, int ch)
{
	sc->message[0] = '\0';
	if (sc->editing) {
		size_t len = strlen(sc->edit);
		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			snprintf(t->filter, sizeof(t->filter), "%s", sc->edit);
			sc->editing = false;
		} else if (ch == 27) {
			sc->editing = false;
		} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
			while (len > 0 && ((unsigned char)sc->edit[len - 1] & 0xc0) == 0x80)
				len--;
			if (len)
				sc->edit[len - 1] = '\0';
			else
				sc->edit[0] = '\0';
		} else if (ch >= 0x20 && ch < 0x100 && ch != 0x7f && len + 1 < sizeof(sc->edit)) {
			sc->edit[len] = (char)ch;
			sc->edit[len + 1] = '\0';
		}
		order(t);
		return true;
	}
	switch (ch) {
	case 'q': case 'Q': case 3:   /* Ctrl-C, should it arrive as a key */
		return false;
	case 27: case KEY_LEFT: case KEY_BACKSPACE: case 127: case 'h':
		sc->detail = 0;
		break;
	case '\n': case '\r': case KEY_ENTER: case KEY_RIGHT:
		if (!sc->detail && sc->selected)
			sc->detail = sc->selected;
		break;
	case KEY_UP: case 'k': move_selection(t, sc, -1); break;
	case KEY_DOWN: case 'j': move_selection(t, sc, 1); break;
	case KEY_PPAGE: move_selection(t, sc, -(LINES - 3)); break;
	case KEY_NPAGE: move_selection(t, sc, LINES - 3); break;
	case KEY_HOME: move_selection(t, sc, -(int)t->nshown); break;
	case KEY_END: move_selection(t, sc, (int)t->nshown); break;
	case '/':
		sc->detail = 0;
		sc->editing = true;
		snprintf(sc->edit, sizeof(sc->edit), "%s", t->filter);
		break;
	case 's': case '>': case '.': t->sort = (t->sort + 1) % SORT_COUNT; break;
	case '<': case ',': t->sort = (t->sort + SORT_COUNT - 1) % SORT_COUNT; break;
	case 'r': t->reverse = !t->reverse; break;
	case KEY_RESIZE: break;
	default:
		break;
	}
	order(t);
	return true;
}

/*
 * While the screen is ncurses', what the store's layers say on standard
 * error (a PostgreSQL store "unreachable", then "reachable again") goes
 * to a pipe, its last line to the footer: written to the terminal it
 * landed over the table, where ncurses, which does not know, redrew only
 * the cells it changed, so an ended run's row kept pieces of it (digits of
 * a server's address in MEM, the likely cause of 7.7 MiB shown as 716M).
 * Both ends non-blocking: a message the pipe has no room for is lost,
 * never waited on.
 */
struct captured_stderr {
	int saved;                  /* the real standard error; -1 none */
	int rd;
};

static void capture_stderr(struct captured_stderr *c)
{
	int p[2];
	c->saved = -1;
	c->rd = -1;
	fflush(stderr);
	if (pipe(p) < 0)
		return;
	c->saved = dup(STDERR_FILENO);
	if (c->saved < 0 || dup2(p[1], STDERR_FILENO) < 0) {
		if (c->saved >= 0)
			close(c->saved);
		c->saved = -1;
		close(p[0]);
		close(p[1]);
		return;
	}
	close(p[1]);
	c->rd = p[0];
	fcntl(c->rd, F_SETFL, fcntl(c->rd, F_GETFL) | O_NONBLOCK);
	fcntl(STDERR_FILENO, F_SETFL, fcntl(STDERR_FILENO, F_GETFL) | O_NONBLOCK);
	fcntl(c->rd, F_SETFD, FD_CLOEXEC);
	fcntl(c->saved, F_SETFD, FD_CLOEXEC);
}

/* What was said since the last call: its last line into msg. Whether
 * anything was. */
static bool read_captured(struct captured_stderr *c, char *msg, size_t sz)
{
	if (c->rd < 0)
		return false;
	fflush(stderr);
	char buf[4096];
	bool any = false;
	ssize_t n;
	while ((n = read(c->rd, buf, sizeof(buf) - 1)) > 0) {
		any = true;
		buf[n] = '\0';
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		char *line = strrchr(buf, '\n');
		line = line ? line + 1 : buf;
		if (!strncmp(line, "leakproof: ", 11))
			line += 11;
		if (*line)
			snprintf(msg, sz, "%.*s", (int)(sz - 1), line);
	}
	return any;
}

static void release_stderr(struct captured_stderr *c)
{
	if (c->saved < 0)
		return;
	fflush(stderr);
	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	close(c->rd);
	c->saved = c->rd = -1;
}

static int interactive(struct top *t, double delay)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_quit;
	sigemptyset(&sa.sa_mask);   /* no SA_RESTART: a signal ends the wait for a key */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	struct captured_stderr cap;
	capture_stderr(&cap);
	SCREEN *scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		release_stderr(&cap);
		error("cannot use the terminal (TERM=%s); try 'leakproof top --once'",
		      getenv("TERM") ? getenv("TERM") : "");
		return 1;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);

	struct screen sc;
	memset(&sc, 0, sizeof(sc));
	int64_t period = (int64_t)(delay * 1e9);
	int64_t next = mono_ns();
	for (;;) {
		if (quit_signal)
			break;
		int64_t now = mono_ns();
		if (now >= next) {
			if (watch_refresh(&t->w) < 0) {
				/* Say so and go on: a store being migrated or
				 * copied reads again at the next refresh. The
				 * store's own message went to the pipe. */
				snprintf(sc.message, sizeof(sc.message), "cannot read the store; trying again");
			}
			char said[sizeof(sc.message)];
			if (read_captured(&cap, said, sizeof(said)) && !sc.message[0])
				snprintf(sc.message, sizeof(sc.message), "%s", said);
			order(t);
			next = now + period;
		}
		draw(t, &sc);
		int64_t wait_ms = (next - mono_ns()) / 1000000;
		timeout(wait_ms < 1 ? 1 : wait_ms > 1000 ? 1000 : (int)wait_ms);
		int ch = getch();
		if (ch == ERR)
			continue;
		if (!on_key(t, &sc, ch))
			break;
	}
	endwin();
	delscreen(scr);
	release_stderr(&cap);
	return 0;
}

int cmd_top(int argc, char **argv)
{
	struct top_args a = { .delay = 1.0 };
	int status = cmd_options_read(NULL, &top_usage, argc, argv, take_option, &a);
	if (status >= 0)
		return status;
	bool tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	if (a.l.format && !a.once && tty)
		return usage_error("--format goes with --once (or output that is not a terminal)");

	struct top t;
	memset(&t, 0, sizeof(t));
	/* --once: every run judged before the snapshot */
	if (watch_init(&t.w, store_default_path(a.l.store_opt), a.once || !tty) < 0)
		return 1;
	setlocale(LC_CTYPE, "");   /* not LC_NUMERIC: JSON numbers keep their point */
	t.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");

	if (a.once || !tty) {
		status = watch_refresh(&t.w) < 0 ? 1 : 0;
		order(&t);
		if (!status)
			status = snapshot(&t, a.l.json);
	} else {
		status = interactive(&t, a.delay);
	}
	drop_shown(&t);
	watch_release(&t.w);
	return status;
}

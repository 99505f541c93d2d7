/*
 * fuzz_store.c — libFuzzer target for store contents: a crafted or damaged
 * SQLite store opened by `leakproof ls` and `leakproof report` (every
 * format, a traced run's sites, a sweep's table), which must say what is
 * wrong and never crash, hang or write to it.
 *
 * A template store is built once, at start-up, by the store's own writers
 * (src/store/): a leaking run with steps, samples, processes, results,
 * events and metrics; a run judged over time; a run still running; a
 * traced run with allocation sites; a sweep with two trials. Each input
 * is a program that damages a copy of it:
 *
 *   byte 0      which `report` to render: bits 0-2 the format (text json md
 *               csv html svg junit), bits 3-5 the run (latest 1 2 3 4
 *               sweep:1 6 1), bit 7 --trace (text or json)
 *   then ops    each a byte (op % 6) and its operands, until the input ends:
 *     0 TABLE COL ROW VALUE   UPDATE one cell (row: the ROW-th of the table)
 *     1 TABLE ROW             DELETE one row
 *     2 TABLE ROW             INSERT a copy of one row (constraints may refuse)
 *     3 INT32                 PRAGMA user_version = INT32
 *     4 LEN SQL               any SQL (up to 255 bytes; errors ignored)
 *     5 OFF16 BYTE            overwrite one byte of the file, after the SQL
 *   VALUE: a type byte, then 8 bytes (integer, real) or LEN + bytes (text,
 *   blob), or nothing (NULL and the special numbers: 0, -1, INT64_MIN,
 *   INT64_MAX, 2^53, NaN, +-inf).
 *
 * Tables and columns are taken from the template's schema, by index, so the
 * target follows the schema as it changes. The store's diagnostics go to
 * stderr; the reports to /dev/null.
 */
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "store/trace.h"
#include "util/util.h"
#include "fuzz.h"

#define MAX_TABLES 32
#define MAX_COLS 40

static char dir[64];
static char template_path[128], store_path[128];
static char *template_bytes;
static size_t template_len;

static struct table {
	char name[64];
	char cols[MAX_COLS][64];
	int ncols;
} tables[MAX_TABLES];
static int ntables;

/* ---- the template ---------------------------------------------------- */

static void die(const char *what)
{
	fprintf(stderr, "fuzz_store: %s\n", what);
	abort();
}

static struct mem_sample sample_at(double t, double pss)
{
	struct mem_sample s = {
		.t = t, .nprocs = 2, .rss = (uint64_t)(pss * 1.2), .pss = (uint64_t)pss,
		.uss = (uint64_t)(pss * 0.9), .pss_exact = true,
	};
	return s;
}

static int64_t begin(struct store *st, const char *cmd)
{
	struct run_begin rb = {
		.started_at = 1700000000.0, .command_json = cmd, .cwd = "/tmp", .hostname = "fuzz-host",
		.measure = MEASURE_PSS, .interval_ns = 100000000, .limit_bytes = 8ULL << 30,
		.limit_source = "max-mem", .mem_total_bytes = 16ULL << 30, .cgroup_mode = "none",
		.step_regex = "^step (\\d+)",
	};
	return store_run_begin(st, &rb);
}

static void end(struct store *st, int64_t id, double duration, int64_t steps)
{
	struct run_end re = {
		.ended_at = 1700000000.0 + duration, .exit_code = 0, .status = RUN_DONE,
		.step_source = STEP_SOURCE_CHANNEL, .steps = steps, .bad_lines = 1, .peak_bytes = 400 << 20,
		.verdict = "leak", .growth_bytes_per_step = 1 << 20,
	};
	store_run_end(st, id, &re);
}

static void build_template(void)
{
	struct store *st = store_open(template_path);
	if (!st)
		die("cannot build the template store");

	/* 1: a leak of 1 MiB a step, with everything a run can have */
	int64_t leak = begin(st, "[\"python3\", \"train.py\", \"--lr\", \"0.1\"]");
	for (int i = 1; i <= 60; i++) {
		struct step_rec r = { .step = i, .epoch = i / 20, .mem = sample_at(i * 0.1, 100e6 + i * 1048576.0) };
		store_add_step(st, leak, &r);
		struct mem_sample s = sample_at(i * 0.1 - 0.05, 100e6 + i * 1048576.0 - 4096);
		store_add_sample(st, leak, &s);
		store_add_metric(st, leak, i, i * 0.1, "loss", 1.0 / i);
	}
	store_add_proc_sample(st, leak, 3, 1234, 1, "python3", 600 << 20, 500 << 20, 400 << 20, 0, 0);
	store_add_result(st, leak, "accuracy", 0.91);
	store_add_event(st, leak, 2.0, "mark", "eval");
	store_add_event(st, leak, 3.0, "warning", "bad line");
	int64_t seg = store_segment_begin(st, leak, 1700000003.0, 1240);
	struct segment_end se = { .ended_at = 1700000005.0, .exit_code = -1, .exit_signal = 9, .cause = CAUSE_SIGNAL };
	store_segment_end(st, leak, seg, &se);
	end(st, leak, 6.0, 60);

	/* 2: no steps, judged over time */
	int64_t timed = begin(st, "[\"server\"]");
	for (int i = 0; i < 80; i++) {
		struct mem_sample s = sample_at(i * 0.5, 200e6 + i * 1e5);
		store_add_sample(st, timed, &s);
	}
	end(st, timed, 40.0, 0);

	/* 3: traced, two sites, one growing */
	int64_t traced = begin(st, "[\"python3\", \"h5.py\"]");
	store_trace_begin(st, traced, 512 * 1024);
	struct trace_site a = { .id = 1, .kind = 'm', .frames = "/usr/lib/libfoo.so\t0x1234\tgrow\n",
	                        .python = "12:step:train.py", .live = 0, .allocs = 1 };
	struct trace_site b = { .id = 2, .kind = 'a', .frames = "/usr/lib/libbar.so\t0x99\t\n", .live = 4096 };
	struct trace_site *sites[] = { &a, &b };
	for (int i = 1; i <= 30; i++) {
		struct step_rec r = { .step = i, .epoch = -1, .mem = sample_at(i * 0.1, 100e6 + i * 819200.0) };
		store_add_step(st, traced, &r);
		a.live = i * 819200;
		a.allocs = i;
		store_trace_write(st, traced, i * 0.1, true, i, sites, 2);
	}
	const struct trace_site *csites[] = { &a, &b };
	store_trace_sites_end(st, traced, csites, 2);
	end(st, traced, 3.0, 30);

	/* 4: a sweep of two trials, the second still running */
	struct sweep_begin sb = { .started_at = 1700000100.0, .file = "sweep.yaml",
		.text = "command: [python3, t.py, \"${args}\"]\nmethod: grid\nparameters:\n  lr: {values: [0.1, 0.01]}\n",
		.method = "grid", .metric = "loss", .pid = 1 };
	int64_t sweep = store_sweep_begin(st, &sb);
	for (int k = 0; k < 2; k++) {
		int64_t run = begin(st, k ? "[\"python3\", \"t.py\", \"--lr=0.01\"]" : "[\"python3\", \"t.py\", \"--lr=0.1\"]");
		for (int i = 1; i <= 20; i++) {
			struct step_rec r = { .step = i, .epoch = -1, .mem = sample_at(i * 0.1, 100e6 + k * i * 1e6) };
			store_add_step(st, run, &r);
		}
		struct trial_row t = { .sweep_id = sweep, .idx = k, .attempt = 0,
			.params = k ? "{\"lr\": 0.01}" : "{\"lr\": 0.1}", .env = "{}",
			.argv = "[\"python3\", \"t.py\"]", .vals = k ? "0.01" : "0.1",
			.status = k ? TRIAL_RUNNING : TRIAL_OK, .run_id = run, .has_metric = !k, .metric = 0.5,
			.optuna_number = -1, .started_at = 1700000100.0, .ended_at = k ? 0 : 1700000110.0 };
		store_trial_put(st, &t);
		store_run_set_trial(st, run, sweep, k, 0);
		double q[5] = { 0, 1e5, 2e5, 3e5, 1e6 };
		store_run_set_summary(st, run, q, 10.0);
		if (!k)
			end(st, run, 2.0, 20);
	}
	store_sweep_set_status(st, sweep, SWEEP_DONE, 1700000120.0, 0);

	/* 5: still running, nothing measured */
	begin(st, "not json");
	store_close(st);
}

/* The tables and their columns, from the template's own schema. */
static void read_schema(void)
{
	sqlite3 *db;
	if (sqlite3_open_v2(template_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		die("cannot read the template's schema");
	sqlite3_stmt *q;
	sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
	                       "ORDER BY name", -1, &q, NULL);
	while (ntables < MAX_TABLES && sqlite3_step(q) == SQLITE_ROW)
		snprintf(tables[ntables++].name, sizeof(tables[0].name), "%s", sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	for (int i = 0; i < ntables; i++) {
		char sql[128];
		snprintf(sql, sizeof(sql), "SELECT name FROM pragma_table_info('%s')", tables[i].name);
		sqlite3_prepare_v2(db, sql, -1, &q, NULL);
		while (tables[i].ncols < MAX_COLS && sqlite3_step(q) == SQLITE_ROW)
			snprintf(tables[i].cols[tables[i].ncols++], sizeof(tables[0].cols[0]), "%s",
			         sqlite3_column_text(q, 0));
		sqlite3_finalize(q);
	}
	sqlite3_close(db);
	if (!ntables)
		die("the template has no tables");
}

static void load_template(void)
{
	FILE *f = fopen(template_path, "rb");
	if (!f)
		die("cannot read the template");
	fseek(f, 0, SEEK_END);
	template_len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	template_bytes = malloc(template_len);
	if (!template_bytes || fread(template_bytes, 1, template_len, f) != template_len)
		die("cannot read the template");
	fclose(f);
}

static void cleanup(void)
{
	char p[160];
	const char *suffix[] = { "", "-wal", "-shm", "-journal" };
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s%s", template_path, suffix[i]);
		unlink(p);
		snprintf(p, sizeof(p), "%s%s", store_path, suffix[i]);
		unlink(p);
	}
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* memory-backed where there is one: every damaged copy is written and
	 * synced, thousands of times a minute */
	const char *tmp = getenv("TMPDIR");
	if (!tmp || strlen(tmp) >= 32)
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof(dir), "%s/lp-fuzz-store-XXXXXX", tmp);
	if (!mkdtemp(dir))
		die("cannot make a directory");
	snprintf(template_path, sizeof(template_path), "%s/template.db", dir);
	snprintf(store_path, sizeof(store_path), "%s/store.db", dir);
	atexit(cleanup);
	build_template();
	read_schema();
	load_template();
	/* the reports are not read; their errors are (stderr) */
	if (!freopen("/dev/null", "w", stdout))
		die("cannot send stdout to /dev/null");
	return 0;
}

/* ---- the damage ------------------------------------------------------ */

struct reader {
	const uint8_t *p, *end;
};

static bool more(const struct reader *r) { return r->p < r->end; }
static uint8_t byte(struct reader *r) { return r->p < r->end ? *r->p++ : 0; }

static uint64_t bytes8(struct reader *r)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | byte(r);
	return v;
}

/* The ROW-th row of the table, as a rowid subquery. */
static void row_where(char *buf, size_t bufsz, const struct table *t, uint8_t row)
{
	snprintf(buf, bufsz, "rowid = (SELECT rowid FROM \"%s\" ORDER BY rowid LIMIT 1 OFFSET %u)", t->name,
	         (unsigned)row);
}

static void bind_value(sqlite3_stmt *s, int i, struct reader *r)
{
	static const int64_t ints[] = { 0, -1, INT64_MIN, INT64_MAX, INT64_C(1) << 53, 1, 2147483648LL };
	uint8_t type = byte(r);
	switch (type % 8) {
	case 0: sqlite3_bind_null(s, i); break;
	case 1: sqlite3_bind_int64(s, i, (int64_t)bytes8(r)); break;
	case 2: {
		uint64_t u = bytes8(r);
		double d;
		memcpy(&d, &u, sizeof(d));
		sqlite3_bind_double(s, i, d);
		break;
	}
	case 3:
	case 4: {
		size_t len = byte(r);
		if (len > (size_t)(r->end - r->p))
			len = (size_t)(r->end - r->p);
		if (type % 8 == 3)
			sqlite3_bind_text(s, i, (const char *)r->p, (int)len, SQLITE_TRANSIENT);
		else
			sqlite3_bind_blob(s, i, r->p, (int)len, SQLITE_TRANSIENT);
		r->p += len;
		break;
	}
	case 5: sqlite3_bind_int64(s, i, ints[(type >> 3) % (sizeof(ints) / sizeof(ints[0]))]); break;
	case 6: sqlite3_bind_double(s, i, (type >> 3) % 3 == 0 ? NAN : (type >> 3) % 3 == 1 ? INFINITY : -INFINITY); break;
	default: sqlite3_bind_double(s, i, -1e300); break;
	}
}

static void exec_bound(sqlite3 *db, const char *sql, struct reader *r, bool with_value)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		return;
	if (with_value)
		bind_value(s, 1, r);
	sqlite3_step(s);
	sqlite3_finalize(s);
}

struct patch {
	size_t off;
	uint8_t byte;
};

/* Apply the ops to store_path; file patches are gathered into patches. */
static size_t damage(struct reader *r, struct patch *patches, size_t maxp)
{
	sqlite3 *db;
	size_t np = 0;
	if (sqlite3_open(store_path, &db) != SQLITE_OK) {
		sqlite3_close(db);
		return 0;
	}
	sqlite3_exec(db, "PRAGMA synchronous = OFF", NULL, NULL, NULL);
	char sql[512], where[160];
	for (int ops = 0; more(r) && ops < 64; ops++) {
		uint8_t op = byte(r) % 6;
		const struct table *t = op <= 2 ? &tables[byte(r) % ntables] : NULL;
		switch (op) {
		case 0: {
			const char *col = t->cols[byte(r) % (t->ncols ? t->ncols : 1)];
			row_where(where, sizeof(where), t, byte(r));
			snprintf(sql, sizeof(sql), "UPDATE \"%s\" SET \"%s\" = ?1 WHERE %s", t->name, col, where);
			exec_bound(db, sql, r, true);
			break;
		}
		case 1:
			row_where(where, sizeof(where), t, byte(r));
			snprintf(sql, sizeof(sql), "DELETE FROM \"%s\" WHERE %s", t->name, where);
			exec_bound(db, sql, r, false);
			break;
		case 2:
			snprintf(sql, sizeof(sql), "INSERT INTO \"%s\" SELECT * FROM \"%s\" ORDER BY rowid LIMIT 1 OFFSET %u",
			         t->name, t->name, (unsigned)byte(r));
			exec_bound(db, sql, r, false);
			break;
		case 3: {
			int32_t v = (int32_t)(bytes8(r) >> 32);
			snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", (int)v);
			exec_bound(db, sql, r, false);
			break;
		}
		case 4: {
			size_t len = byte(r);
			if (len > (size_t)(r->end - r->p))
				len = (size_t)(r->end - r->p);
			char *text = fuzz_cstr(r->p, len);
			r->p += len;
			sqlite3_exec(db, text, NULL, NULL, NULL);
			free(text);
			break;
		}
		case 5:
			if (np < maxp) {
				patches[np].off = (size_t)byte(r) << 8;
				patches[np].off |= byte(r);
				patches[np++].byte = byte(r);
			}
			break;
		}
	}
	sqlite3_close(db);
	return np;
}

static void write_store(void)
{
	const char *suffix[] = { "-wal", "-shm", "-journal" };
	char p[160];
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", store_path, suffix[i]);
		unlink(p);
	}
	int fd = open(store_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, template_bytes, template_len) != (ssize_t)template_len)
		die("cannot write the store");
	close(fd);
}

static void patch_file(const struct patch *patches, size_t n)
{
	if (!n)
		return;
	int fd = open(store_path, O_RDWR);
	if (fd < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (pwrite(fd, &patches[i].byte, 1, (off_t)patches[i].off) != 1)
			break;
	close(fd);
}

/* ---- the readers ----------------------------------------------------- */

static int call(int (*fn)(int, char **), const char *const *args)
{
	char *argv[12];
	int argc = 0;
	for (; args[argc] && argc < 11; argc++)
		argv[argc] = (char *)args[argc];
	argv[argc] = NULL;
	return fn(argc, argv);
}

static void read_store(uint8_t how)
{
	static const char *formats[] = { "text", "json", "md", "csv", "html", "svg", "junit" };
	static const char *runs[] = { NULL, "1", "2", "3", "4", "sweep:1", "6", "1" };
	bool trace = how & 0x80;
	const char *fmt = formats[how % (trace ? 2 : 7)];   /* --trace: text or json */
	const char *run = runs[(how >> 3) % 8];

	const char *ls[] = { "ls", "--store", store_path, (how & 1) ? "--format" : NULL, "json", NULL };
	call(cmd_ls, ls);
	const char *report[8] = { "report", "--store", store_path, "--format", fmt };
	int n = 5;
	bool sweep = run && !strncmp(run, "sweep", 5);
	if (trace && !sweep)
		report[n++] = "--trace";
	report[n++] = run;
	report[n] = NULL;
	call(cmd_report, report);
	fflush(stdout);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	struct reader r = { data + 1, data + size };
	struct patch patches[16];
	write_store();
	size_t np = damage(&r, patches, 16);
	patch_file(patches, np);
	read_store(data[0]);
	return 0;
}

/*
 * test_optuna.c — the Optuna bridge (src/sweep/optuna.c): the search space
 * it writes, its reader of Optuna's answers against hostile text, the
 * default storage, and a real study through the Optuna process: open,
 * five asks over every kind of dimension (one asked ahead), tells, what
 * Optuna recorded, a direction that changed and a storage SQLAlchemy does
 * not know. The real part is skipped when no `optuna` is on PATH; it
 * prints what opening and asking cost. (The Optuna process's restarts and
 * the sweep's use of it: t/e2e/test_sweep_optuna.py.)
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "sweep/optuna.h"
#include "util/util.h"

/* ------------------------------------------------------------------ */
/* Helpers */

static char tmpdir[64];

static void make_tmpdir(void)
{
	if (!tmpdir[0]) {
		strcpy(tmpdir, "/tmp/lp-optuna-XXXXXX");
		if (!mkdtemp(tmpdir))
			tmpdir[0] = '\0';
	}
}

/* The dimensions of the sweep below, built by hand (no spec.c needed). */
static struct sweep_value v_num(const char *text)
{
	struct sweep_value v = { (char *)text, true, !strpbrk(text, ".eE"), strtod(text, NULL) };
	return v;
}
static struct sweep_value v_str(const char *text)
{
	struct sweep_value v = { (char *)text, false, false, 0 };
	return v;
}

static struct sweep_value opt_values[3], bs_values[3], seed_value[1], omp_values[2];
static struct sweep_dim dims[7];
static struct sweep_spec spec;

static void build_spec(void)
{
	opt_values[0] = v_str("adam");
	opt_values[1] = v_str("sgd");
	opt_values[2] = v_str("we\"ird\\ \xc3\xa9 \xf0\x9f\x98\x80");  /* é and an emoji */
	bs_values[0] = v_num("32");
	bs_values[1] = v_num("64");
	bs_values[2] = v_num("1e-3");
	seed_value[0] = v_num("7");
	omp_values[0] = v_num("1");
	omp_values[1] = v_num("2");
	memset(dims, 0, sizeof(dims));
	dims[0] = (struct sweep_dim){ .name = "lr", .kind = DIM_RANGE, .min = 0.0, .max = 0.5,
				      .line = 3, .column = 5 };
	dims[1] = (struct sweep_dim){ .name = "wd", .kind = DIM_RANGE, .min = 1e-6, .max = 1e-2,
				      .log = true, .line = 4, .column = 5 };
	dims[2] = (struct sweep_dim){ .name = "layers", .kind = DIM_RANGE, .min = 1, .max = 4,
				      .integer = true, .line = 5, .column = 5 };
	dims[3] = (struct sweep_dim){ .name = "opt", .kind = DIM_VALUES, .values = opt_values,
				      .nvalues = 3, .line = 6, .column = 5 };
	dims[4] = (struct sweep_dim){ .name = "bs", .kind = DIM_VALUES, .values = bs_values,
				      .nvalues = 3, .line = 7, .column = 5 };
	dims[5] = (struct sweep_dim){ .name = "seed", .kind = DIM_CONST, .values = seed_value,
				      .nvalues = 1, .line = 8, .column = 5 };
	dims[6] = (struct sweep_dim){ .name = "OMP_NUM_THREADS", .is_env = true, .kind = DIM_VALUES,
				      .values = omp_values, .nvalues = 2, .line = 10, .column = 5 };
	memset(&spec, 0, sizeof(spec));
	spec.path = "sweep.yaml";
	spec.method = SWEEP_OPTUNA;
	spec.dims = dims;
	spec.ndims = 7;
}

/* Frees like sweep_assign_free() (spec.c), without needing it here. */
static void assign_free(struct sweep_assign *a, size_t n)
{
	for (size_t i = 0; a->values && i < n; i++)
		free(a->values[i]);
	free(a->values);
	a->values = NULL;
}

static bool in_choices(const struct sweep_dim *d, const char *s)
{
	for (size_t i = 0; s && i < d->nvalues; i++)
		if (!strcmp(d->values[i].text, s))
			return true;
	return false;
}

/* Whether an assignment lies in the space of the spec above. */
static bool in_space(const struct sweep_assign *a)
{
	char *end;
	double lr = strtod(a->values[0], &end);
	if (*end || lr < 0 || lr > 0.5)
		return false;
	double wd = strtod(a->values[1], &end);
	if (*end || wd < 1e-6 || wd > 1e-2)
		return false;
	long layers = strtol(a->values[2], &end, 10);
	if (*end || layers < 1 || layers > 4)
		return false;
	return in_choices(&dims[3], a->values[3]) && in_choices(&dims[4], a->values[4]) &&
	       !strcmp(a->values[5], "7") && in_choices(&dims[6], a->values[6]);
}

/* ------------------------------------------------------------------ */
/* Pure parts */

static void test_search_space(void)
{
	build_spec();
	char *json = optuna_search_space_json(&spec);
	CHECK_STR(json,
		  "{\"lr\": {\"name\": \"FloatDistribution\", \"attributes\": {\"step\": null, "
		  "\"low\": 0.0, \"high\": 0.5, \"log\": false}}, "
		  "\"wd\": {\"name\": \"FloatDistribution\", \"attributes\": {\"step\": null, "
		  "\"low\": 1e-06, \"high\": 0.01, \"log\": true}}, "
		  "\"layers\": {\"name\": \"IntDistribution\", \"attributes\": {\"log\": false, "
		  "\"step\": 1, \"low\": 1, \"high\": 4}}, "
		  "\"opt\": {\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": "
		  "[\"adam\", \"sgd\", \"we\\\"ird\\\\ \xc3\xa9 \xf0\x9f\x98\x80\"]}}, "
		  "\"bs\": {\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": "
		  "[32, 64, 0.001]}}, "
		  "\"seed\": {\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": "
		  "[7]}}, "
		  "\"env:OMP_NUM_THREADS\": {\"name\": \"CategoricalDistribution\", \"attributes\": "
		  "{\"choices\": [\"1\", \"2\"]}}}");
	free(json);

	/* A float value written as an integer stays a float for Python. */
	struct sweep_value two[2] = { v_num("2.0"), v_num("3") };
	struct sweep_dim d = { .name = "x", .kind = DIM_VALUES, .values = two, .nvalues = 2 };
	struct sweep_spec s = { .path = "s.yaml", .dims = &d, .ndims = 1 };
	json = optuna_search_space_json(&s);
	CHECK_STR(json, "{\"x\": {\"name\": \"CategoricalDistribution\", \"attributes\": "
		  "{\"choices\": [2.0, 3]}}}");
	free(json);

	/* A mixed list goes as text. */
	struct sweep_value mixed[2] = { v_num("1"), v_str("auto") };
	d.values = mixed;
	json = optuna_search_space_json(&s);
	CHECK_STR(json, "{\"x\": {\"name\": \"CategoricalDistribution\", \"attributes\": "
		  "{\"choices\": [\"1\", \"auto\"]}}}");
	free(json);

	/* No dimensions: an empty space. */
	s.ndims = 0;
	json = optuna_search_space_json(&s);
	CHECK_STR(json, "{}");
	free(json);
}

/* The same mapping from a sweep file, through spec.c's parser. */
static void test_search_space_from_yaml(void)
{
	static const char yaml[] =
		"command: [/usr/bin/python3, train.py, \"${args}\"]\n"
		"method: optuna\n"
		"metric: {name: val_loss, goal: maximize}\n"
		"parameters:\n"
		"  lr: {min: 0.0, max: 0.5}\n"
		"  wd: {min: 1e-6, max: 1e-2, distribution: log_uniform}\n"
		"  layers: {min: 1, max: 4}\n"
		"  opt: {values: [adam, sgd, \"3\"]}\n"
		"  bs: {values: [32, 64, 1e-3]}\n"
		"  seed: {value: 7}\n"
		"env:\n"
		"  OMP_NUM_THREADS: {values: [1, 2]}\n"
		"run_cap: 5\n";
	struct sweep_spec s;
	CHECK_EQ_INT(sweep_spec_parse(yaml, strlen(yaml), "sweep.yaml", &s), 0);
	char *json = optuna_search_space_json(&s);
	CHECK_STR(json,
		  "{\"lr\": {\"name\": \"FloatDistribution\", \"attributes\": {\"step\": null, "
		  "\"low\": 0.0, \"high\": 0.5, \"log\": false}}, "
		  "\"wd\": {\"name\": \"FloatDistribution\", \"attributes\": {\"step\": null, "
		  "\"low\": 1e-06, \"high\": 0.01, \"log\": true}}, "
		  "\"layers\": {\"name\": \"IntDistribution\", \"attributes\": {\"log\": false, "
		  "\"step\": 1, \"low\": 1, \"high\": 4}}, "
		  "\"opt\": {\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": "
		  "[\"adam\", \"sgd\", \"3\"]}}, "
		  "\"bs\": {\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": "
		  "[32, 64, 0.001]}}, "
		  "\"seed\": {\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": "
		  "[7]}}, "
		  "\"env:OMP_NUM_THREADS\": {\"name\": \"CategoricalDistribution\", \"attributes\": "
		  "{\"choices\": [\"1\", \"2\"]}}}");
	CHECK(s.maximize);
	free(json);
	sweep_spec_free(&s);
}

static void test_search_space_refused(void)
{
	struct sweep_dim d = { .name = "wd", .kind = DIM_RANGE, .min = 0, .max = 1, .log = true,
			       .line = 4, .column = 3 };
	struct sweep_spec s = { .path = "s.yaml", .dims = &d, .ndims = 1 };
	capture_begin();
	char *json = optuna_search_space_json(&s);
	const char *msg = capture_end();
	CHECK(json == NULL);
	CHECK_STR(msg, "leakproof: s.yaml:4:3: 'wd': a log_uniform range needs min > 0\n");

	d.integer = true;
	capture_begin();
	json = optuna_search_space_json(&s);
	msg = capture_end();
	CHECK(json == NULL);
	CHECK(strstr(msg, "needs min >= 1") != NULL);

	d.log = false;
	d.max = 1e300;
	capture_begin();
	json = optuna_search_space_json(&s);
	msg = capture_end();
	CHECK(json == NULL);
	CHECK(strstr(msg, "integers within") != NULL);

	/* A parameter called "env:X" and the env dimension X. */
	struct sweep_value one = v_num("1");
	struct sweep_dim two[2] = {
		{ .name = "env:X", .kind = DIM_CONST, .values = &one, .nvalues = 1, .line = 2, .column = 3 },
		{ .name = "X", .is_env = true, .kind = DIM_CONST, .values = &one, .nvalues = 1,
		  .line = 5, .column = 3 },
	};
	s.dims = two;
	s.ndims = 2;
	capture_begin();
	json = optuna_search_space_json(&s);
	msg = capture_end();
	CHECK(json == NULL);
	CHECK_STR(msg, "leakproof: s.yaml:5:3: dimension 'env:X' twice in the optuna search space\n");
}

static void test_parse_ask(void)
{
	build_spec();
	struct sweep_assign a;
	int64_t number = -1;
	const char *text =
		"{\"number\": 12, \"params\": {\"lr\": 0.27539895128728775, \"wd\": 1e-05, "
		"\"layers\": 3, \"opt\": \"we\\\"ird\\\\ \\u00e9 \\ud83d\\ude00\", \"bs\": 0.001, "
		"\"seed\": 7, \"env:OMP_NUM_THREADS\": \"2\"}}\n";
	CHECK_EQ_INT(optuna_parse_ask(text, &spec, &number, &a), 0);
	CHECK_EQ_INT(number, 12);
	if (a.values) {
		CHECK_STR(a.values[0], "0.27539895128728775");
		CHECK_STR(a.values[1], "1e-05");
		CHECK_STR(a.values[2], "3");
		CHECK_STR(a.values[3], opt_values[2].text);
		CHECK_STR(a.values[4], "1e-3");     /* the value's own text */
		CHECK_STR(a.values[5], "7");
		CHECK_STR(a.values[6], "2");
		CHECK(in_space(&a));
	}
	assign_free(&a, spec.ndims);

	/* Keys in any order, white space anywhere, the range's ends. */
	text = " {\"params\":{\"env:OMP_NUM_THREADS\":\"1\",\"seed\":7,\"bs\":32,\"opt\":\"adam\","
	       "\"layers\":4,\"wd\":0.01,\"lr\":0.0} ,\r\n\t\"number\":0}";
	CHECK_EQ_INT(optuna_parse_ask(text, &spec, &number, &a), 0);
	CHECK_EQ_INT(number, 0);
	if (a.values) {
		CHECK_STR(a.values[0], "0");
		CHECK_STR(a.values[2], "4");
		CHECK_STR(a.values[4], "32");
	}
	assign_free(&a, spec.ndims);
}

#define GOOD_REST "\"wd\": 1e-05, \"layers\": 3, \"opt\": \"adam\", \"bs\": 32, \"seed\": 7, " \
	"\"env:OMP_NUM_THREADS\": \"2\""

static void test_parse_ask_hostile(void)
{
	build_spec();
	static const struct { const char *text, *says; } bad[] = {
		{ "", "nothing" },
		{ "\n", "unexpected end" },
		{ "[]", "not an object" },
		{ "{", "expected a key" },
		{ "{\"number\": 0}", "no 'params'" },
		{ "{\"params\": {}}", "no 'number'" },
		{ "{\"number\": 0, \"params\": {}}", "no value for parameter 'lr'" },
		{ "{\"number\": -1, \"params\": {\"lr\": 0.1, " GOOD_REST "}}", "not a trial number" },
		{ "{\"number\": 1.0, \"params\": {\"lr\": 0.1, " GOOD_REST "}}", "not a trial number" },
		{ "{\"number\": \"1\", \"params\": {\"lr\": 0.1, " GOOD_REST "}}", "not a trial number" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, " GOOD_REST "}, \"x\": 1}", "unknown key 'x'" },
		{ "{\"number\": 1, \"number\": 2, \"params\": {}}", "key 'number' twice" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, \"lr\": 0.2, " GOOD_REST "}}",
		  "parameter 'lr' twice" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, \"mom\": 0.9, " GOOD_REST "}}",
		  "parameter 'mom' is not in the sweep" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.9, " GOOD_REST "}}", "outside the range" },
		{ "{\"number\": 1, \"params\": {\"lr\": NaN, " GOOD_REST "}}", "not a finite number" },
		{ "{\"number\": 1, \"params\": {\"lr\": \"0.1\", " GOOD_REST "}}", "not a finite number" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, \"layers\": 3.0, \"wd\": 1e-05, "
		  "\"opt\": \"adam\", \"bs\": 32, \"seed\": 7, \"env:OMP_NUM_THREADS\": \"2\"}}",
		  "not an integer" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, \"layers\": 5, \"wd\": 1e-05, "
		  "\"opt\": \"adam\", \"bs\": 32, \"seed\": 7, \"env:OMP_NUM_THREADS\": \"2\"}}",
		  "outside the range" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, \"layers\": 3, \"wd\": 1e-05, "
		  "\"opt\": \"adamw\", \"bs\": 32, \"seed\": 7, \"env:OMP_NUM_THREADS\": \"2\"}}",
		  "not one of the choices" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, \"layers\": 3, \"wd\": 1e-05, "
		  "\"opt\": \"adam\", \"bs\": \"32\", \"seed\": 7, \"env:OMP_NUM_THREADS\": \"2\"}}",
		  "not a number" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, \"layers\": 3, \"wd\": 1e-05, "
		  "\"opt\": \"adam\", \"bs\": 32, \"seed\": 7, \"env:OMP_NUM_THREADS\": 2}}",
		  "not a string" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, " GOOD_REST "}} x", "text after the value" },
		{ "{\"number\": 1, \"params\": {}} {}", "text after the value" },
		{ "{\"number\": 1, \"params\": {\"lr\": 0.1, " GOOD_REST "}", "expected ',' or '}'" },
		{ "{\"number\": 01, \"params\": {}}", "expected ',' or '}'" },
		{ "{\"number\": 1., \"params\": {}}", "bad number" },
		{ "{\"number\": +1, \"params\": {}}", "unexpected text" },
		{ "{\"number\": 1, \"params\": {\"opt\": \"\\ud83d\"}}", "unpaired surrogate" },
		{ "{\"number\": 1, \"params\": {\"opt\": \"\\ude00\"}}", "unpaired surrogate" },
		{ "{\"number\": 1, \"params\": {\"opt\": \"a\\u0000b\"}}", "\\u0000" },
		{ "{\"number\": 1, \"params\": {\"opt\": \"a\\x\"}}", "bad escape" },
		{ "{\"number\": 1, \"params\": {\"opt\": \"a\\u12g4\"}}", "bad \\u escape" },
		{ "{\"number\": 1, \"params\": {\"opt\": \"a\tb\"}}", "control character" },
		{ "{\"number\": 1, \"params\": {\"opt\": \"ab", "unterminated string" },
		{ "{\"number\": 1, \"params\": {\"opt\" \"ab\"}}", "expected ':'" },
		{ "{\"number\": tru, \"params\": {}}", "unexpected word" },
		{ "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
		  "]]]]]]]]]]]]]]]", "nested too deeply" },
		{ "Traceback (most recent call last):", "unexpected text at byte 0" },
		{ "{\"number\": 1, \"params\": {\"lr\": -x}}", "bad number" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sweep_assign a = { (char **)&a };
		int64_t number = -7;
		capture_begin();
		int rc = optuna_parse_ask(bad[i].text, &spec, &number, &a);
		const char *msg = capture_end();
		CHECK_EQ_INT(rc, -1);
		CHECK(a.values == NULL);
		CHECK_EQ_INT(number, -7);
		if (!strstr(msg, "leakproof: unexpected output from 'optuna ask': ") ||
		    !strstr(msg, bad[i].says)) {
			fprintf(stderr, "  case %zu (%s): %s", i, bad[i].says, msg);
			CHECK(!"the message names the problem");
		}
	}
}

static void test_ask_seed(void)
{
	/* Each ask is seeded apart, reproducibly, below 2^32 by type. */
	CHECK(optuna_ask_seed(0, 0) != optuna_ask_seed(0, 1));
	CHECK(optuna_ask_seed(0, 0) != optuna_ask_seed(1, 0));
	CHECK_EQ_INT(optuna_ask_seed(42, 3), optuna_ask_seed(42, 3));
}

static void test_default_storage(void)
{
	char cwd[4096];
	char want[8192];
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);

	char *s = optuna_default_storage("no-such-dir-xyz/leakproof.db");
	snprintf(want, sizeof(want), "sqlite:///%s/no-such-dir-xyz/optuna.db", cwd);
	CHECK_STR(s, want);
	free(s);

	s = optuna_default_storage("leakproof.db");
	snprintf(want, sizeof(want), "sqlite:///%s/optuna.db", cwd);
	CHECK_STR(s, want);
	free(s);

	s = optuna_default_storage("/no-such-dir-xyz/sub/leakproof.db");
	CHECK_STR(s, "sqlite:////no-such-dir-xyz/sub/optuna.db");
	free(s);

	s = optuna_default_storage("/leakproof.db");
	CHECK_STR(s, "sqlite:////optuna.db");
	free(s);

	/* a PostgreSQL store: the same database, the password left out */
	s = optuna_default_storage("postgresql://lp:s%40cr%3At@127.0.0.1:5433/db1?sslmode=disable");
	CHECK_STR(s, "postgresql+psycopg2://lp@127.0.0.1:5433/db1?sslmode=disable&options=-csearch_path%3Doptuna");
	free(s);
	s = optuna_storage_password("postgresql://lp:s%40cr%3At@127.0.0.1:5433/db1?sslmode=disable");
	CHECK_STR(s, "s@cr:t");
	free(s);
	s = optuna_default_storage("postgres://lp@host/db");
	CHECK_STR(s, "postgresql+psycopg2://lp@host/db?options=-csearch_path%3Doptuna");
	free(s);
	CHECK(optuna_storage_password("postgres://lp@host/db") == NULL);
	CHECK(optuna_storage_password("/a/b.db") == NULL);
	s = optuna_default_storage("postgresql:///db?host=/run/postgresql");
	CHECK_STR(s, "postgresql+psycopg2:///db?host=/run/postgresql&options=-csearch_path%3Doptuna");
	free(s);

	make_tmpdir();
	char path[256];
	snprintf(path, sizeof(path), "%s/./leakproof.db", tmpdir);
	s = optuna_default_storage(path);          /* an existing directory, cleaned */
	snprintf(want, sizeof(want), "sqlite:///%s/optuna.db", tmpdir);
	CHECK_STR(s, want);
	free(s);

	capture_begin();
	s = optuna_default_storage("/no/such?dir/leakproof.db");
	const char *msg = capture_end();
	CHECK(s == NULL);
	CHECK(strstr(msg, "'?'") != NULL);
}

/* ------------------------------------------------------------------ */
/* The real optuna */

static bool have_optuna(void)
{
	return system("command -v optuna >/dev/null 2>&1 && "
		      "/usr/bin/python3 -c 'import optuna' >/dev/null 2>&1") == 0;
}

/* The Python client of this tree (its leakproof/_optuna_worker.py): this
 * binary is BUILD/t/test_optuna, the client ../../python from there; else
 * python/ of the working directory (the tree's root, as the tests run). */
static const char *client_dir(void)
{
	static char dir[PATH_MAX + 64];
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0 || !memchr(exe, '/', (size_t)n))
		return "python";
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(dir, sizeof(dir), "%s/../../python/leakproof/_optuna_worker.py", exe);
	if (access(dir, R_OK) != 0)
		return "python";
	*strstr(dir, "/leakproof/_optuna_worker.py") = '\0';
	return dir;
}

static double secs_since(int64_t t0)
{
	return (double)(mono_ns() - t0) / 1e9;
}

static void test_real_optuna(void)
{
	if (!have_optuna()) {
		printf("# skip: no optuna command (Debian: python3-optuna)\n");
		return;
	}
	build_spec();
	make_tmpdir();
	char storage[256];
	snprintf(storage, sizeof(storage), "sqlite:///%s/optuna.db", tmpdir);
	struct optuna_study st = { .storage = storage, .name = "sweep-1", .seed = 11, .client_dir = client_dir() };

	int64_t t0 = mono_ns();
	struct optuna_proc *p = optuna_proc_open(&st, &spec, 0);
	CHECK(p != NULL);
	if (!p)
		return;
	double open_s = secs_since(t0);

	/* Five asks (the last one asked ahead): in the space, and not the same
	 * point five times. */
	enum { N = 5 };
	struct sweep_assign a[N];
	int64_t number[N];
	t0 = mono_ns();
	for (int i = 0; i < N; i++) {
		if (i == N - 1)
			optuna_proc_ask_ahead(p);
		CHECK_EQ_INT(optuna_proc_ask(p, &spec, &number[i], &a[i]), 0);
		CHECK_EQ_INT(number[i], i);
		CHECK(a[i].values && in_space(&a[i]));
	}
	double ask_s = secs_since(t0) / N;
	int distinct = 0;
	for (int i = 1; i < N; i++)
		if (a[i].values && a[0].values && strcmp(a[i].values[0], a[0].values[0]))
			distinct++;
	CHECK_EQ_INT(distinct, N - 1);

	/* Tell: three values (one negative), one failure, one NaN (a failure);
	 * the replies are read when the process is closed. */
	static const double value[N] = { 0.25, -1e-05, 3.5, 0, NAN };
	static const bool ok[N] = { true, true, true, false, true };
	for (int i = 0; i < N; i++)
		CHECK_EQ_INT(optuna_proc_tell(p, number[i], ok[i], value[i]), 0);
	CHECK_EQ_INT(optuna_proc_close(p), 0);

	/* What Optuna recorded, with each trial's lr as Optuna has it. */
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "PYTHONWARNINGS=ignore /usr/bin/python3 -c '"
		 "import optuna\n"
		 "optuna.logging.set_verbosity(optuna.logging.WARNING)\n"
		 "s = optuna.load_study(study_name=\"sweep-1\", storage=\"%s\")\n"
		 "print(s.direction.name)\n"
		 "for t in s.trials: print(t.number, t.state.name, t.value, repr(t.params[\"lr\"]), "
		 "t.params[\"env:OMP_NUM_THREADS\"], t.params[\"layers\"])'", storage);
	FILE *f = popen(cmd, "r");
	char got[2048] = "";
	size_t n = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
	got[n] = '\0';
	if (f)
		pclose(f);
	char want[2048];
	size_t w = (size_t)snprintf(want, sizeof(want), "MINIMIZE\n");
	static const char *const recorded[N] = { "COMPLETE 0.25", "COMPLETE -1e-05",
						 "COMPLETE 3.5", "FAIL None", "FAIL None" };
	for (int i = 0; i < N; i++)
		w += (size_t)snprintf(want + w, sizeof(want) - w, "%d %s %s %s %s\n", i, recorded[i],
				      a[i].values ? a[i].values[0] : "?",
				      a[i].values ? a[i].values[6] : "?",
				      a[i].values ? a[i].values[2] : "?");
	CHECK_STR(got, want);
	for (int i = 0; i < N; i++)
		assign_free(&a[i], spec.ndims);

	/* The same study for a sweep that maximizes: refused. */
	st.maximize = true;
	capture_begin();
	p = optuna_proc_open(&st, &spec, N);
	const char *msg = capture_end();
	CHECK(p == NULL);
	CHECK(strstr(msg, "study 'sweep-1' in '") && strstr(msg, "' is to minimize, but the "
							   "sweep goal is to maximize"));
	optuna_proc_close(p);

	/* A storage URL SQLAlchemy does not know: Optuna's message. */
	st.maximize = false;
	st.storage = "nosuchdb://x";
	capture_begin();
	p = optuna_proc_open(&st, &spec, 0);
	msg = capture_end();
	CHECK(p == NULL);
	CHECK(strstr(msg, "leakproof: optuna: ") && strstr(msg, "nosuchdb"));
	if (p || !strstr(msg, "nosuchdb"))
		fprintf(stderr, "  got: %s", msg);
	optuna_proc_close(p);

	printf("# the Optuna process: open %.2f s (start + study), ask %.3f s each\n", open_s, ask_s);
}

/* Pruning through the Optuna process: intermediate values reported, the
 * pruner's answer, a trial told pruned; a report made while an ask asked
 * ahead is due keeps the ask's reply for the next ask. */
static void test_real_pruning(void)
{
	if (!have_optuna()) {
		printf("# skip: no optuna command (Debian: python3-optuna)\n");
		return;
	}
	build_spec();
	make_tmpdir();
	char storage[256];
	snprintf(storage, sizeof(storage), "sqlite:///%s/optuna.db", tmpdir);
	struct optuna_study st = { .storage = storage, .name = "sweep-prune", .seed = 3, .pruner = "MedianPruner",
	                           .client_dir = client_dir(),
	                           .pruner_kwargs = "{\"n_startup_trials\": 1, \"n_warmup_steps\": 0}" };
	struct optuna_proc *p = optuna_proc_open(&st, &spec, 0);
	CHECK(p != NULL);
	if (!p)
		return;
	struct sweep_assign a[3];
	int64_t number[3];
	static const int64_t steps[] = { 0, 1, 2 };
	static const double good[] = { 0.1, 0.1, NAN }, bad[] = { 0.9, 0.9, 0.9 };
	int64_t step;
	double value;

	/* the first trial: its curve reported (a NaN left out), never pruned
	 * (the pruner's start-up trial), then complete */
	CHECK_EQ_INT(optuna_proc_ask(p, &spec, &number[0], &a[0]), 0);
	CHECK_EQ_INT(optuna_proc_report(p, number[0], steps, good, 3), 0);
	optuna_proc_tell(p, number[0], true, 0.1);

	/* the second (its ask reads the first's answers): worse than the
	 * median at its steps, pruned; the answer comes without waiting
	 * (polled for here), and the ask asked ahead meanwhile, read on the
	 * way, is the third's */
	CHECK_EQ_INT(optuna_proc_ask(p, &spec, &number[1], &a[1]), 0);
	CHECK(!optuna_proc_take_prune(p, number[0], &step, &value));
	optuna_proc_ask_ahead(p);
	CHECK_EQ_INT(optuna_proc_report(p, number[1], steps, bad, 2), 0);
	bool pruned = false;
	for (int64_t end = mono_ns() + 60000000000LL; !pruned && mono_ns() < end;) {
		optuna_proc_poll(p);
		pruned = optuna_proc_take_prune(p, number[1], &step, &value);
		if (!pruned)
			usleep(10000);
	}
	CHECK(pruned);
	CHECK_EQ_INT(step, 1);
	CHECK(value == 0.9);
	CHECK(!optuna_proc_take_prune(p, number[1], &step, &value));   /* once */
	CHECK_EQ_INT(optuna_proc_tell_state(p, number[1], OPTUNA_PRUNED, 0), 0);
	CHECK_EQ_INT(optuna_proc_ask(p, &spec, &number[2], &a[2]), 0);
	CHECK_EQ_INT(number[2], 2);
	optuna_proc_tell(p, number[2], false, 0);

	/* a trial Optuna does not have: a warning when its answer is read */
	capture_begin();
	CHECK_EQ_INT(optuna_proc_report(p, 999, steps, bad, 1), 0);
	CHECK_EQ_INT(optuna_proc_close(p), 0);
	const char *msg = capture_end();
	CHECK(strstr(msg, "optuna: reporting trial 999: "));

	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "PYTHONWARNINGS=ignore /usr/bin/python3 -c '"
		 "import optuna\n"
		 "optuna.logging.set_verbosity(optuna.logging.WARNING)\n"
		 "s = optuna.load_study(study_name=\"sweep-prune\", storage=\"%s\")\n"
		 "for t in s.trials: print(t.number, t.state.name, t.value, sorted(t.intermediate_values.items()))'",
		 storage);
	FILE *f = popen(cmd, "r");
	char got[2048] = "";
	size_t n = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
	got[n] = '\0';
	if (f)
		pclose(f);
	CHECK_STR(got, "0 COMPLETE 0.1 [(0, 0.1), (1, 0.1)]\n"
	               "1 PRUNED 0.9 [(0, 0.9), (1, 0.9)]\n"
	               "2 FAIL None []\n");
	for (int i = 0; i < 3; i++)
		assign_free(&a[i], spec.ndims);
}

static void test_cleanup(void)
{
	if (tmpdir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		CHECK_EQ_INT(system(cmd), 0);
	}
}

TEST_MAIN("optuna",
	  TEST(test_search_space),
	  TEST(test_search_space_from_yaml),
	  TEST(test_search_space_refused),
	  TEST(test_parse_ask),
	  TEST(test_parse_ask_hostile),
	  TEST(test_ask_seed),
	  TEST(test_default_storage),
	  TEST(test_real_optuna),
	  TEST(test_real_pruning),
	  TEST(test_cleanup))

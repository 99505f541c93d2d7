/*
 * test_sweep_spec.c — sweep files (src/sweep/spec.c): the example of
 * spec.h read in full, every refusal with its exact FILE:LINE:COLUMN
 * message, and the trials a spec expands to: grid order, reproducible
 * random draws within their bounds, argv that no shell ever sees, JSON.
 * Run from the top of the source tree (t/fixtures/sweep/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "sweep/slurm.h"
#include "sweep/spec.h"
#include "util/util.h"

/* Parse text as "sweep.yaml"; 0 and no message, or the test fails. */
static int parse_ok(const char *yaml, struct sweep_spec *s)
{
	capture_begin();
	int rc = sweep_spec_parse(yaml, strlen(yaml), "sweep.yaml", s);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, 0);
	CHECK_STR(msg, "");
	if (rc)
		fprintf(stderr, "  for:\n%s", yaml);
	return rc;
}

/* Refused with exactly "leakproof: sweep.yaml:WHERE\n", and *s left empty. */
static void parse_bad_n(const char *yaml, size_t len, const char *where)
{
	struct sweep_spec s;
	char want[1024];
	snprintf(want, sizeof(want), "leakproof: sweep.yaml:%s\n", where);
	capture_begin();
	int rc = sweep_spec_parse(yaml, len, "sweep.yaml", &s);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	CHECK_STR(msg, want);
	CHECK(s.path == NULL && s.command == NULL && s.dims == NULL && s.ndims == 0);
	if (rc == 0)
		sweep_spec_free(&s);
}

static void parse_bad(const char *yaml, const char *where)
{
	parse_bad_n(yaml, strlen(yaml), where);
}

#define CMD "command: [prog, \"${args}\"]\n"

/* ---- reading --------------------------------------------------------- */

static void test_example_file(void)
{
	struct sweep_spec s;
	capture_begin();
	int rc = sweep_spec_load("t/fixtures/sweep/example.yaml", &s);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, 0);
	CHECK_STR(msg, "");
	if (rc)
		return;
	CHECK_STR(s.path, "t/fixtures/sweep/example.yaml");
	CHECK_EQ_INT(s.ncommand, 3);
	CHECK_STR(s.command[0], "/usr/bin/python3");
	CHECK_STR(s.command[1], "train.py");
	CHECK_STR(s.command[2], "${args}");
	CHECK(s.command[3] == NULL);
	CHECK_EQ_INT(s.method, SWEEP_RANDOM);
	CHECK_STR(s.metric_name, "val_loss");
	CHECK(!s.maximize);
	CHECK_EQ_INT(s.ndims, 7);
	CHECK_EQ_INT(s.run_cap, 50);
	CHECK_EQ_INT(s.parallel, 2);
	CHECK_EQ_INT(s.seed, 0);
	CHECK_STR(s.memory_max, "2G");
	CHECK_STR(s.memory_restart, "on-oom");
	CHECK_STR(s.memory_expect, "1G");
	CHECK_EQ_INT(s.nretry, 1);
	CHECK_STR(s.retry_names[0], "batch_size");
	CHECK_STR(s.retry_rules[0], "half");
	CHECK_STR(s.result_regex, "^val_loss=(\\S+)");
	CHECK_EQ_INT(s.nrun_options, 2);
	CHECK_STR(s.run_options[0], "--interval");
	CHECK_STR(s.run_options[1], "50ms");
	CHECK(s.run_options[2] == NULL);
	/* each with its place, for messages about it (the runner's check) */
	CHECK(s.run_option_line && s.run_option_col);
	if (s.run_option_line && s.run_option_col) {
		CHECK_EQ_INT(s.run_option_line[0], 20);
		CHECK_EQ_INT(s.run_option_col[0], 15);
		CHECK_EQ_INT(s.run_option_col[1], 27);
	}

	const struct sweep_dim *d = s.dims;
	CHECK_STR(d[0].name, "lr");
	CHECK_EQ_INT(d[0].kind, DIM_VALUES);
	CHECK_EQ_INT(d[0].nvalues, 3);
	CHECK_STR(d[0].values[1].text, "0.01");
	CHECK(d[0].values[1].is_number && !d[0].values[1].is_int);
	CHECK_NEAR(d[0].values[1].num, 0.01, 1e-15);
	CHECK_EQ_INT(d[0].line, 6);
	CHECK_EQ_INT(d[0].column, 3);
	CHECK(!d[0].is_env);
	CHECK_STR(d[1].name, "batch_size");
	CHECK_STR(d[1].values[2].text, "4096");
	CHECK(d[1].values[2].is_number && d[1].values[2].is_int);
	CHECK_STR(d[2].name, "dropout");
	CHECK_EQ_INT(d[2].kind, DIM_RANGE);
	CHECK(d[2].min == 0.0 && d[2].max == 0.5 && !d[2].integer && !d[2].log);
	CHECK_STR(d[3].name, "layers");
	CHECK(d[3].kind == DIM_RANGE && d[3].min == 1 && d[3].max == 4 && d[3].integer && !d[3].log);
	CHECK_STR(d[4].name, "wd");
	CHECK(d[4].kind == DIM_RANGE && d[4].min == 1e-6 && d[4].max == 1e-2 && !d[4].integer && d[4].log);
	CHECK_STR(d[5].name, "seed");
	CHECK_EQ_INT(d[5].kind, DIM_CONST);
	CHECK_EQ_INT(d[5].nvalues, 1);
	CHECK_STR(d[5].values[0].text, "7");
	CHECK(d[5].values[0].is_int);
	CHECK_STR(d[6].name, "OMP_NUM_THREADS");
	CHECK(d[6].is_env);
	CHECK_EQ_INT(d[6].nvalues, 2);
	CHECK_STR(d[6].values[0].text, "1");
	CHECK(!d[6].values[0].is_number);
	CHECK_EQ_INT(d[6].line, 13);
	CHECK_EQ_INT(d[6].column, 3);
	sweep_spec_free(&s);
	CHECK(s.path == NULL && s.dims == NULL && s.ndims == 0);
	sweep_spec_free(&s);   /* twice is harmless */
}

/* spec.h's example as written there: method grid, with ranges. */
static void test_example_as_grid(void)
{
	struct sweep_spec s;
	capture_begin();
	int rc = sweep_spec_load("t/fixtures/sweep/grid-with-ranges.yaml", &s);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	CHECK_STR(msg, "leakproof: t/fixtures/sweep/grid-with-ranges.yaml:8:3: "
	               "parameter 'dropout' has a range; grid needs values\n");
}

static void test_load_errors(void)
{
	struct sweep_spec s;
	capture_begin();
	int rc = sweep_spec_load("t/fixtures/sweep/no-such-file.yaml", &s);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	CHECK_STR(msg, "leakproof: cannot read sweep file 't/fixtures/sweep/no-such-file.yaml': "
	               "No such file or directory\n");
	CHECK(s.path == NULL);

	char path[] = "/tmp/test_sweep_spec.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	FILE *f = fdopen(fd, "w");
	fputs(CMD "parameters:\n", f);
	for (int i = 0; i < 40000; i++)     /* more than 1 MiB */
		fprintf(f, "  p%05d: {values: [1, 2, 3]}\n", i);
	fclose(f);
	capture_begin();
	rc = sweep_spec_load(path, &s);
	msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	char want[256];
	snprintf(want, sizeof(want), "leakproof: sweep file '%s' is larger than 1024 KiB\n", path);
	CHECK_STR(msg, want);
	unlink(path);
}

static void test_defaults_and_values(void)
{
	struct sweep_spec s;
	if (parse_ok(CMD
	             "parameters:\n"
	             "  mixed: {values: [1, \"2\", adam, 1e-3, +5, 007, .5, true, 0x10, 1e999, '-3', ~]}\n"
	             "  name.with-dots_: {value: 'quoted 7'}\n"
	             "env:\n"
	             "  N: {values: [1, 2.50, x]}\n"
	             "  lr: {value: 3}\n"             /* env and parameters: separate names */
	             "memory: {max: 80%}\n"
	             "metric: {name: acc, goal: maximize}\n"
	             "seed: 18446744073709551615\n", &s))
		return;
	CHECK_EQ_INT(s.method, SWEEP_GRID);
	CHECK_EQ_INT(s.parallel, 1);
	CHECK_EQ_INT(s.run_cap, 0);
	CHECK(s.seed == UINT64_MAX);
	CHECK(s.maximize);
	CHECK_STR(s.memory_max, "80%");
	CHECK(s.memory_restart == NULL && s.memory_expect == NULL && s.result_regex == NULL);
	CHECK(s.run_options == NULL && s.nrun_options == 0 && s.nretry == 0);
	CHECK_EQ_INT(s.ndims, 4);
	const struct sweep_value *v = s.dims[0].values;
	CHECK_EQ_INT(s.dims[0].nvalues, 12);
	static const struct { const char *text; bool num, integer; double x; } want[] = {
		{ "1", true, true, 1 }, { "2", false, false, 0 }, { "adam", false, false, 0 },
		{ "1e-3", true, false, 1e-3 }, { "+5", true, true, 5 }, { "007", true, true, 7 },
		{ ".5", true, false, 0.5 }, { "true", false, false, 0 }, { "0x10", false, false, 0 },
		{ "1e999", false, false, 0 }, { "-3", false, false, 0 }, { "~", false, false, 0 },
	};
	for (size_t i = 0; i < 12; i++) {
		CHECK_STR(v[i].text, want[i].text);
		CHECK_EQ_INT(v[i].is_number, want[i].num);
		CHECK_EQ_INT(v[i].is_int, want[i].integer);
		CHECK_NEAR(v[i].num, want[i].x, 1e-12);
	}
	CHECK_STR(s.dims[1].name, "name.with-dots_");
	CHECK_STR(s.dims[1].values[0].text, "quoted 7");
	CHECK(s.dims[2].is_env && s.dims[3].is_env);
	CHECK_STR(s.dims[2].values[1].text, "2.50");    /* as written */
	CHECK(!s.dims[2].values[0].is_number);          /* env values are strings */
	CHECK_STR(s.dims[3].name, "lr");
	sweep_spec_free(&s);

	/* Empty sections are no sections; env before parameters still
	 * leaves the parameters first. */
	if (parse_ok("env: {E: {value: e}}\n"
	             CMD "parameters:\nmemory:\non_oom: ~\nrun_options: null\n"
	             "method: random\nrun_cap: 3\n", &s))
		return;
	CHECK_EQ_INT(s.ndims, 1);
	sweep_spec_free(&s);
	if (parse_ok("env: {E: {value: e}}\n" CMD "parameters: {p: {value: 1}}\n", &s))
		return;
	CHECK_STR(s.dims[0].name, "p");
	CHECK_STR(s.dims[1].name, "E");
	sweep_spec_free(&s);

	/* Restart policies as --restart takes them; ranges written as both. */
	if (parse_ok(CMD "memory: {restart: 'at-limit,every=100,on-oom', max: 512MiB, expect: 1.5G}\n"
	             "method: optuna\nrun_cap: 1\n"
	             "parameters:\n"
	             "  a: {min: -3, max: 3}\n"
	             "  b: {min: 1, max: 1.0}\n"
	             "  c: {min: 1, max: 1000, distribution: log_uniform_values}\n"
	             "  d: {min: 0.5, max: 0.5, distribution: uniform}\n", &s))
		return;
	CHECK_EQ_INT(s.method, SWEEP_OPTUNA);
	CHECK(s.dims[0].integer && !s.dims[1].integer && s.dims[2].integer && s.dims[2].log);
	CHECK(s.dims[0].min == -3 && s.dims[0].max == 3);
	sweep_spec_free(&s);
}

/* ---- refusals, each at its line and column ---------------------------- */

static void test_errors_keys(void)
{
	parse_bad(CMD "method: grid\nparameters:\n  lr: {values: [1]}\nparamters: {}\n",
	          "5:1: unknown key 'paramters' (known: command, method, metric, parameters, env, run_cap, "
	          "parallel, seed, memory, on_oom, result_regex, run_options, executor, slurm, optuna, prefork, "
	          "max_consecutive_failures)");
	parse_bad(CMD "method: grid\nmethod: random\n", "3:1: duplicate key 'method' (first at 2:1)");
	parse_bad(CMD "[a]: 1\n", "2:1: keys must be strings, not a list");
	parse_bad(CMD "\"a\\nb\\tc\\x01\": 1\n", "2:1: unknown key 'a\\nb\\tc\\x01' (known: command, method, metric, "
	          "parameters, env, run_cap, parallel, seed, memory, on_oom, result_regex, run_options, executor, slurm, "
	          "optuna, prefork, max_consecutive_failures)");
	parse_bad("", "1:1: the file is empty: expected command, parameters and the other keys of a sweep");
	parse_bad("# only a comment\n", "1:1: the file is empty: expected command, parameters and the other keys of a sweep");
	parse_bad("- command\n", "1:1: expected a mapping of keys (command, method, parameters, ...), not a list");
	parse_bad(CMD "---\n" CMD, "3:1: only one YAML document is allowed");
	parse_bad("method: grid\n", "1:1: command is missing: a list such as [python3, train.py, \"${args}\"]");
	parse_bad("\n\n  method: grid\n", "3:3: command is missing: a list such as [python3, train.py, \"${args}\"]");
	parse_bad_n(CMD "metric: {name: \"a\\0b\"}\n", strlen(CMD) + 23,
	            "2:16: a string may not contain a NUL character");
}

static void test_errors_yaml_syntax(void)
{
	parse_bad("command: [a, b\nmethod: grid\n",
	          "2:7: did not find expected ',' or ']' (while parsing a flow sequence at 1:10)");
	parse_bad(CMD "method: grid\n  seed: 1\n",
	          "3:7: mapping values are not allowed in this context");
	parse_bad(CMD "parameters:\n  lr: {values: [1]}\n bad: 1\n",
	          "4:2: did not find expected key (while parsing a block mapping at 1:1)");
	parse_bad(CMD "metric: {name: 'val\n", "3:1: found unexpected end of stream (while scanning a quoted scalar at 2:16)");
	parse_bad(CMD "method: *nowhere\n", "2:9: found undefined alias");
	parse_bad(CMD "method: \tgrid\n\tseed: 1\n",
	          "3:1: found a tab character that violates indentation (while scanning a plain scalar at 2:10)");
	parse_bad(CMD "metric: {name: ok}\nmethod: gr\xff" "d\n", "3:11: invalid leading UTF-8 octet (byte 0xff)");
}

static void test_errors_command(void)
{
	parse_bad("command: python3 train.py --lr={lr}\n",
	          "1:10: command must be a list such as [python3, train.py, \"${args}\"], not one string: "
	          "there is no shell to split it");
	parse_bad("command: {a: b}\n", "1:10: command must be a list such as [python3, train.py, \"${args}\"], not a mapping");
	parse_bad("command: []\n", "1:10: command must be a non-empty list such as [python3, train.py, \"${args}\"]");
	parse_bad("command:\n  - python3\n  - [x]\n", "3:5: the items of command must be strings, not a list");
	parse_bad("command: ['', x]\n", "1:11: the program (the first item of command) is empty");
}

static void test_errors_placeholders(void)
{
	parse_bad("command: [prog, '--lr={lr}', \"--x={x}\"]\nparameters: {lr: {values: [1]}, bs: {values: [2]}}\n",
	          "1:30: placeholder '{x}' names no parameter (parameters: lr, bs)");
	parse_bad("command: [prog, '{E}']\nenv: {E: {value: 1}}\n",
	          "1:17: placeholder '{E}' names no parameter (there are no parameters)");
	parse_bad("command: [prog, 'a{b']\n",
	          "1:17: unmatched '{' in command argument 'a{b' (write '{{' for a literal brace)");
	parse_bad("command: [prog, '{a{b}']\nparameters: {b: {value: 1}}\n",
	          "1:17: unmatched '{' in command argument '{a{b}' (write '{{' for a literal brace)");
	parse_bad("command: [prog, 'a}b']\n",
	          "1:17: unmatched '}' in command argument 'a}b' (write '}}' for a literal brace)");
	parse_bad("command: [prog, 'a{}b']\n", "1:17: empty placeholder '{}' in command argument 'a{}b'");
	parse_bad("command: [prog, '--x=${args}']\n",
	          "1:17: placeholder '{args}' names no parameter (there are no parameters)");
	/* Braces in values and in other keys are no placeholders. */
	struct sweep_spec s;
	if (parse_ok("command: [prog, '{lr}']\nparameters: {lr: {value: '{y}'}}\nrun_options: ['{z}']\n", &s) == 0)
		sweep_spec_free(&s);
}

static void test_errors_method(void)
{
	parse_bad(CMD "method: bayes\n", "2:9: method must be grid, random or optuna, not 'bayes'");
	parse_bad(CMD "method: [grid]\n", "2:9: method must be grid, random or optuna, not a list");
	parse_bad(CMD "method: random\nparameters: {a: {min: 0, max: 1}}\n", "2:9: run_cap is required with method random");
	parse_bad(CMD "method: optuna\nrun_cap: 0\n", "2:9: run_cap is required with method optuna");
	parse_bad(CMD "method: grid\nparameters:\n  a: {values: [1, 2]}\n  b: {min: 0, max: 1}\n",
	          "5:3: parameter 'b' has a range; grid needs values");
	parse_bad(CMD "env:\n  E: {min: 1, max: 2}\n", "3:3: environment variable 'E' has a range; grid needs values");
}

static void test_errors_numbers(void)
{
	parse_bad(CMD "run_cap: -1\n", "2:10: run_cap must be 0 (no cap) or more, not '-1'");
	parse_bad(CMD "run_cap: 2.5\n", "2:10: run_cap must be a whole number, not '2.5'");
	parse_bad(CMD "parallel: 0\n", "2:11: parallel must be a whole number, at least 1, not '0'");
	parse_bad(CMD "parallel: many\n", "2:11: parallel must be a whole number, at least 1, not 'many'");
	parse_bad(CMD "parallel: 99999999999\n", "2:11: parallel must be a whole number, at least 1, not '99999999999'");
	parse_bad(CMD "seed: -1\n", "2:7: seed must be a whole number from 0 to 18446744073709551615, not '-1'");
	parse_bad(CMD "seed: 18446744073709551616\n",
	          "2:7: seed must be a whole number from 0 to 18446744073709551615, not '18446744073709551616'");
}

static void test_errors_metric(void)
{
	parse_bad(CMD "metric: {name: loss, goal: lowest}\n", "2:28: metric.goal must be minimize or maximize, not 'lowest'");
	parse_bad(CMD "metric: {name: loss, target: 1}\n", "2:22: unknown key 'target' in metric (known: name, goal)");
	parse_bad(CMD "metric: {goal: maximize}\n", "2:9: metric needs a name");
	parse_bad(CMD "metric: {name: ''}\n", "2:16: metric.name must be a non-empty string, not ''");
	parse_bad(CMD "metric: loss\n", "2:9: metric must be a mapping {name: NAME, goal: minimize or maximize}, not 'loss'");
}

static void test_errors_dims(void)
{
	parse_bad(CMD "parameters:\n  lr: {values: [0.1]}\n  bs: {values: []}\n",
	          "4:16: 'values' must be a non-empty list");
	parse_bad(CMD "parameters:\n  bs:\n    values: 32\n", "4:13: 'values' must be a non-empty list");
	parse_bad(CMD "parameters:\n  bs:\n    values:\n", "4:12: 'values' must be a non-empty list");
	parse_bad(CMD "parameters:\n  bs: {values: [1, [2]]}\n", "3:20: values must be strings or numbers, not a list");
	parse_bad(CMD "parameters:\n  bs: {values: [32, 64, 32]}\n", "3:25: duplicate value '32' (first at 3:17)");
	parse_bad(CMD "parameters:\n  o: {values: [b, a, c, a, b]}\n", "3:25: duplicate value 'a' (first at 3:19)");
	parse_bad(CMD "parameters:\n  bs: {values: [1, '1']}\n", "3:20: duplicate value '1' (first at 3:17)");
	parse_bad(CMD "parameters:\n  a: {value: [1]}\n", "3:14: 'value' must be a string or a number, not a list");
	parse_bad(CMD "parameters:\n  dropout: {min: 0.9, max: 0.5}\n", "3:18: min 0.9 is more than max 0.5");
	parse_bad(CMD "parameters:\n  d: {min: low, max: 0.5}\n", "3:12: min must be a number, not 'low'");
	parse_bad(CMD "parameters:\n  d: {min: 0, max: [1]}\n", "3:20: max must be a number, not a list");
	parse_bad(CMD "parameters:\n  d: {min: 0}\n", "3:6: parameter 'd' has min but no max");
	parse_bad(CMD "parameters:\n  d: {max: 0}\n", "3:6: parameter 'd' has max but no min");
	parse_bad(CMD "parameters:\n  d: {min: 0, max: 9007199254740993}\n",
	          "3:20: integer bounds must lie within -2^53 and 2^53 (9007199254740992)");
	parse_bad(CMD "parameters:\n  wd: {min: 0, max: 1, distribution: log_uniform}\n",
	          "3:13: log_uniform needs min above 0, not 0");
	parse_bad(CMD "parameters:\n  wd: {min: 1, max: 2, distribution: normal}\n",
	          "3:38: distribution must be uniform or log_uniform, not 'normal'");
	parse_bad(CMD "parameters:\n  wd: {values: [1], distribution: uniform}\n",
	          "3:21: 'distribution' goes with min and max, not with values or value");
	parse_bad(CMD "parameters:\n  lr: {valeus: [1]}\n",
	          "3:8: unknown key 'valeus' in parameter 'lr' (known: values, value, min, max, distribution)");
	parse_bad(CMD "parameters:\n  lr: {values: [1], value: 1}\n",
	          "3:7: parameter 'lr' needs only one of: values, min and max, or value");
	parse_bad(CMD "parameters:\n  lr: {}\n", "3:7: parameter 'lr' needs one of: values, min and max, or value");
	parse_bad(CMD "parameters:\n  lr: {values: [1], values: [2]}\n", "3:21: duplicate key 'values' (first at 3:8)");
	parse_bad(CMD "env:\n  E: {vals: [1]}\n",
	          "3:7: unknown key 'vals' in environment variable 'E' (known: values, value, min, max, distribution)");
	parse_bad(CMD "parameters:\n  lr: 0.1\n",
	          "3:7: parameter 'lr' must be a mapping: {values: [...]}, {min: ..., max: ...} or {value: ...}");
	parse_bad(CMD "parameters:\n  lr: {values: [1]}\n  lr: {values: [2]}\n",
	          "4:3: duplicate parameter 'lr' (first at 3:3)");
	parse_bad(CMD "env:\n  E: {value: 1}\n  E: {value: 2}\n", "4:3: duplicate environment variable 'E' (first at 3:3)");
	parse_bad(CMD "parameters: [lr]\n",
	          "2:13: parameters must be a mapping of name: {values: [...]}, {min: ..., max: ...} or {value: ...}, "
	          "not a list");
	parse_bad(CMD "env: OMP_NUM_THREADS=1\n",
	          "2:6: env must be a mapping of NAME: {values: [...]}, {min: ..., max: ...} or {value: ...}, "
	          "not 'OMP_NUM_THREADS=1'");
	parse_bad(CMD "parameters:\n  'learning rate': {value: 1}\n",
	          "3:3: invalid parameter name 'learning rate': use letters, digits, '_', '.' and '-' (not first)");
	parse_bad(CMD "parameters:\n  -x: {value: 1}\n",
	          "3:3: invalid parameter name '-x': use letters, digits, '_', '.' and '-' (not first)");
	parse_bad(CMD "env:\n  1X: {value: 1}\n",
	          "3:3: invalid environment variable name '1X': use letters, digits and '_' (not a digit first)");
	parse_bad(CMD "parameters:\n  {a: 1}: {value: 1}\n", "3:3: keys must be strings, not a mapping");
}

static void test_errors_memory(void)
{
	parse_bad(CMD "memory: {max: 12Q}\n", "2:15: memory.max: invalid size '12Q': unknown unit 'Q' (use K, M, G or T)");
	parse_bad(CMD "memory:\n  max: lots\n",
	          "3:8: memory.max: invalid size 'lots': expected a number with an optional unit, such as 512M or 12G");
	parse_bad(CMD "memory:\n  max: 0\n", "3:8: memory.max: invalid size '0': must be at least 1M");
	parse_bad(CMD "memory:\n  max: 1\n", "3:8: memory.max: invalid size '1': must be at least 1M");
	parse_bad(CMD "memory:\n  expect: 0\n", "3:11: memory.expect: invalid size '0': must be at least 1 byte");
	parse_bad(CMD "memory:\n  max: 150%\n", "3:8: memory.max: invalid size '150%': a percentage must be in (0, 100]");
	parse_bad(CMD "memory:\n  max: 1000000000000G\n", "3:8: memory.max: invalid size '1000000000000G': too large");
	parse_bad(CMD "memory:\n  max: 0x10G\n", "3:8: memory.max: invalid size '0x10G': write a plain decimal number, such as 512M or 1.5G (no hexadecimal or exponent)");
	parse_bad(CMD "memory:\n  max: 1e3M\n", "3:8: memory.max: invalid size '1e3M': write a plain decimal number, such as 512M or 1.5G (no hexadecimal or exponent)");
	parse_bad(CMD "memory:\n  expect: 50%\n",
	          "3:11: memory.expect: invalid size '50%': a percentage is not allowed here");
	parse_bad(CMD "memory:\n  expect: [1G]\n", "3:11: memory.expect must be a size such as 512M or 12G, not a list");
	parse_bad(CMD "memory: {restart: sometimes}\n",
	          "2:19: memory.restart: unknown policy 'sometimes' (use at-limit, every=N, on-oom or never)");
	parse_bad(CMD "memory: {restart: 'on-oom,every=0'}\n",
	          "2:19: memory.restart 'every=0': every=N needs a whole number of steps, at least 1");
	parse_bad(CMD "memory: {restart: 'on-oom,'}\n",
	          "2:19: memory.restart: unknown policy '' (use at-limit, every=N, on-oom or never)");
	parse_bad(CMD "memory: {limit: 2G}\n", "2:10: unknown key 'limit' in memory (known: max, restart, expect, max_mem)");
	parse_bad(CMD "memory: 2G\n", "2:9: memory must be a mapping {max: SIZE, max_mem: SIZE, restart: POLICY, "
	          "expect: SIZE}, not '2G'");
	parse_bad(CMD "memory: {max_mem: 2G}\n", "2:19: memory.max_mem is the most a trial is given when memory.max is "
	          "not enough: give memory.max too (the allocation trials start with)");
	parse_bad(CMD "memory: {max: 2G, max_mem: 1G}\n", "2:28: memory.max_mem (1G) is less than memory.max (2G)");
}

static void test_errors_on_oom(void)
{
	const char *p = CMD "parameters:\n  bs: {values: [32, 64]}\n  opt: {values: [adam, sgd]}\n";
	char buf[512];
	snprintf(buf, sizeof(buf), "%son_oom: {retry_with: {bs: third}}\n", p);
	parse_bad(buf, "5:27: on_oom.retry_with rule for 'bs' must be half or fit, not 'third'");
	snprintf(buf, sizeof(buf), "%son_oom: {retry_with: {batch: half}}\n", p);
	parse_bad(buf, "5:23: on_oom.retry_with names 'batch', which is not a parameter");
	snprintf(buf, sizeof(buf), "%son_oom: {retry_with: {bs: half, opt: half}}\n", p);
	parse_bad(buf, "5:33: on_oom.retry_with: parameter 'opt' has a value that is not a number ('adam'); "
	               "half needs numbers");
	snprintf(buf, sizeof(buf), "%son_oom: {retry_with: {opt: fit}}\n", p);
	parse_bad(buf, "5:23: on_oom.retry_with: parameter 'opt' has a value that is not a number ('adam'); "
	               "fit needs numbers");
	snprintf(buf, sizeof(buf), "%smax_consecutive_failures: -1\n", p);
	parse_bad(buf, "5:27: max_consecutive_failures must be a whole number, 0 (never stop) or more, not '-1'");
	snprintf(buf, sizeof(buf), "%son_oom: {retry_with: {bs: half, bs: half}}\n", p);
	parse_bad(buf, "5:33: duplicate key 'bs' (first at 5:23)");
	snprintf(buf, sizeof(buf), "%son_oom: {retry: {bs: half}}\n", p);
	parse_bad(buf, "5:10: unknown key 'retry' in on_oom (known: retry_with, resize)");
	snprintf(buf, sizeof(buf), "%son_oom: {retry_with: bs}\n", p);
	parse_bad(buf, "5:22: on_oom.retry_with must be a mapping {PARAMETER: half|fit}, not 'bs'");
	snprintf(buf, sizeof(buf), "%son_oom: grow\n", p);
	parse_bad(buf, "5:9: on_oom must be resize or a mapping {retry_with: {PARAMETER: half|fit}, resize: true|false}, "
	               "not 'grow'");
	snprintf(buf, sizeof(buf), "%son_oom: resize\nmemory: {max: 700M}\n", p);
	parse_bad(buf, "5:9: on_oom: resize needs memory: {max: SIZE, max_mem: SIZE}: the allocation trials start "
	               "with, and the most one is given");
	snprintf(buf, sizeof(buf), "%son_oom: {resize: yes}\n", p);
	parse_bad(buf, "5:18: on_oom.resize must be true or false, not 'yes'");
	/* Names checked against parameters that come later in the file. */
	struct sweep_spec s;
	if (parse_ok("on_oom: {retry_with: {bs: half}}\n" CMD "parameters: {bs: {min: 1, max: 64}}\n"
	             "method: random\nrun_cap: 2\n", &s) == 0) {
		CHECK_EQ_INT(s.max_consecutive_failures, 5);
		sweep_spec_free(&s);
	}
	if (parse_ok("on_oom: {retry_with: {bs: fit}}\n" CMD "parameters: {bs: {values: [8, 16]}}\n"
	             "max_consecutive_failures: 0\n", &s) == 0) {
		CHECK_STR(s.retry_rules[0], "fit");
		CHECK_EQ_INT(s.max_consecutive_failures, 0);
		CHECK(!s.on_oom_resize);
		sweep_spec_free(&s);
	}
	/* resize: the default with max_mem, whichever comes first in the file;
	 * on_oom says otherwise */
	if (parse_ok(CMD "memory: {max: 700M, max_mem: 2G}\n", &s) == 0) {
		CHECK(s.on_oom_resize);
		CHECK_STR(s.memory_max_mem, "2G");
		sweep_spec_free(&s);
	}
	if (parse_ok("on_oom: {resize: false}\n" CMD "memory: {max: 700M, max_mem: 2G}\n", &s) == 0) {
		CHECK(!s.on_oom_resize);
		sweep_spec_free(&s);
	}
	if (parse_ok(CMD "memory: {max: 700M, max_mem: 2G}\non_oom: resize\n", &s) == 0) {
		CHECK(s.on_oom_resize);
		sweep_spec_free(&s);
	}
}

static void test_errors_misc(void)
{
	parse_bad(CMD "result_regex: 'val_loss=(\\S+'\n",
	          "2:15: invalid result_regex 'val_loss=(\\S+' at offset 13: missing closing parenthesis");
	parse_bad(CMD "result_regex: ''\n",
	          "2:15: result_regex must be a regular expression such as '^val_loss=(\\S+)', not ''");
	parse_bad(CMD "run_options: --interval 50ms\n",
	          "2:14: run_options must be a list such as [--interval, 50ms], not one string: there is no shell to split it");
	parse_bad(CMD "run_options: [--interval, {a: 1}]\n", "2:27: the items of run_options must be strings, not a mapping");
	/* as --result-regex refuses it: each group widens PCRE2's frames (fuzz/corpus/regex/many-groups) */
	parse_bad(CMD "result_regex: '(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)'\n",
	          "2:15: invalid result_regex '(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a)(a': "
	          "33 capture groups, at most 32 (group 1 is the result)");
	parse_bad(CMD "optuna: TPESampler\n",
	          "2:9: optuna must be a mapping {sampler: TPESampler, sampler_kwargs: {...}, pruner: MedianPruner, "
	          "pruner_kwargs: {...}}, not 'TPESampler'");
	parse_bad(CMD "optuna: {sampler: 'os.system'}\n",
	          "2:19: optuna.sampler must be the name of a class of optuna.samplers, such as TPESampler, "
	          "not 'os.system'");
	parse_bad(CMD "optuna: {sampler_kwargs: [1]}\n",
	          "2:26: optuna.sampler_kwargs must be a mapping of keyword arguments, not a list");
	parse_bad(CMD "optuna: {samplr: X}\n", "2:10: unknown key 'samplr' in optuna (known: sampler, sampler_kwargs, "
	          "pruner, pruner_kwargs)");
	parse_bad(CMD "prefork: torch\n",
	          "2:10: prefork must be a list such as [torch, numpy], not one string: there is no shell to split it");
	parse_bad(CMD "prefork: [torch, 'os; rm']\n", "2:18: prefork: 'os; rm' is not a Python module name");
	parse_bad(CMD "prefork: [..x]\n", "2:11: prefork: '..x' is not a Python module name");
}

/* optuna: and prefork: as the runner gets them */
static void test_optuna_and_prefork(void)
{
	struct sweep_spec s;
	if (parse_ok(CMD "optuna:\n  sampler: TPESampler\n"
	             "  sampler_kwargs: {n_startup_trials: 5, constant_liar: true, gamma: ~, name: 'x', f: -1.5e-3}\n"
	             "  pruner: MedianPruner\n  pruner_kwargs: {n_warmup_steps: 3, l: [1, a]}\n"
	             "prefork: [torch, numpy, torch.nn]\n", &s))
		return;
	CHECK_STR(s.optuna_sampler, "TPESampler");
	CHECK_STR(s.optuna_sampler_kwargs,
	          "{\"n_startup_trials\": 5, \"constant_liar\": true, \"gamma\": null, \"name\": \"x\", \"f\": -1.5e-3}");
	CHECK_STR(s.optuna_pruner, "MedianPruner");
	CHECK_STR(s.optuna_pruner_kwargs, "{\"n_warmup_steps\": 3, \"l\": [1, \"a\"]}");
	CHECK_EQ_INT(s.nprefork, 3);
	CHECK_STR(s.prefork[2], "torch.nn");
	CHECK(s.prefork[3] == NULL);
	sweep_spec_free(&s);
	if (parse_ok(CMD "optuna: ~\nprefork: []\n", &s))
		return;
	CHECK(s.optuna_sampler == NULL && s.optuna_sampler_kwargs == NULL && s.nprefork == 0);
	sweep_spec_free(&s);
}

/* ---- grid -------------------------------------------------------------- */

static void test_grid(void)
{
	struct sweep_spec s;
	if (parse_ok(CMD "parameters:\n  a: {values: [1, 2, 3]}\n  k: {value: x}\n  b: {values: [p, q]}\n"
	             "env:\n  E: {values: ['0', '1']}\n", &s))
		return;
	CHECK_EQ_INT(sweep_grid_size(&s), 12);
	static const char *const want[12][4] = {
		{ "1", "x", "p", "0" }, { "1", "x", "p", "1" }, { "1", "x", "q", "0" }, { "1", "x", "q", "1" },
		{ "2", "x", "p", "0" }, { "2", "x", "p", "1" }, { "2", "x", "q", "0" }, { "2", "x", "q", "1" },
		{ "3", "x", "p", "0" }, { "3", "x", "p", "1" }, { "3", "x", "q", "0" }, { "3", "x", "q", "1" },
	};
	for (uint64_t i = 0; i < 12; i++) {
		struct sweep_assign a;
		sweep_grid_trial(&s, i, &a);
		for (size_t d = 0; d < 4; d++)
			CHECK_STR(a.values[d], want[i][d]);
		sweep_assign_free(&a, s.ndims);
		CHECK(a.values == NULL);
	}
	s.run_cap = 5;
	CHECK_EQ_INT(sweep_grid_size(&s), 5);
	s.run_cap = 100;
	CHECK_EQ_INT(sweep_grid_size(&s), 12);
	sweep_spec_free(&s);

	if (parse_ok(CMD "run_cap: 4\nparameters:\n  a: {values: [1, 2, 3]}\n  b: {values: [1, 2, 3]}\n", &s))
		return;
	CHECK_EQ_INT(sweep_grid_size(&s), 4);
	struct sweep_assign a;
	sweep_grid_trial(&s, 3, &a);     /* the cap cuts; it does not reorder */
	CHECK_STR(a.values[0], "2");
	CHECK_STR(a.values[1], "1");
	sweep_assign_free(&a, s.ndims);
	sweep_spec_free(&s);

	if (parse_ok(CMD, &s))          /* no dimensions: one trial */
		return;
	CHECK_EQ_INT(sweep_grid_size(&s), 1);
	sweep_grid_trial(&s, 0, &a);
	sweep_assign_free(&a, s.ndims);
	sweep_spec_free(&s);

	/* 2^64 trials do not fit the count. */
	struct strbuf big = STRBUF_INIT;
	strbuf_addstr(&big, CMD "parameters:\n");
	for (int d = 0; d < 65; d++)
		strbuf_addf(&big, "  p%d: {values: [0, 1]}\n", d);
	parse_bad(strbuf_str(&big), "66:3: the grid has more than 2^64 trials");
	strbuf_release(&big);
}

/* ---- random ------------------------------------------------------------ */

static const char random_yaml[] = CMD
	"method: random\nrun_cap: 10\nseed: 42\n"
	"parameters:\n"
	"  u: {min: -1.5, max: 2.5}\n"
	"  i: {min: -2, max: 3}\n"
	"  l: {min: 1e-6, max: 1e-2, distribution: log_uniform}\n"
	"  li: {min: 1, max: 1000, distribution: log_uniform}\n"
	"  c: {values: [a, b, c, d]}\n"
	"  k: {value: '0.10'}\n"
	"  same: {min: 0.1, max: 0.1}\n"
	"env:\n"
	"  E: {min: 1, max: 8}\n";

static void test_random_reproducible(void)
{
	struct sweep_spec s, s2;
	if (parse_ok(random_yaml, &s))
		return;
	if (parse_ok(random_yaml, &s2)) {
		sweep_spec_free(&s);
		return;
	}
	/* Trial 7 alone, after others, and from another parse: the same. */
	struct sweep_assign first, again, other;
	sweep_random_trial(&s, 7, &first);
	for (uint64_t i = 0; i < 7; i++) {
		struct sweep_assign a;
		sweep_random_trial(&s, i, &a);
		sweep_assign_free(&a, s.ndims);
	}
	sweep_random_trial(&s2, 7, &again);
	for (size_t d = 0; d < s.ndims; d++)
		CHECK_STR(again.values[d], first.values[d]);
	sweep_assign_free(&again, s.ndims);

	/* Neighbouring trials differ in their draws (not a shifted stream). */
	struct sweep_assign next;
	sweep_random_trial(&s, 8, &next);
	CHECK(strcmp(first.values[0], next.values[0]) != 0);
	CHECK(strcmp(first.values[2], next.values[2]) != 0);
	CHECK(strcmp(next.values[0], first.values[1]) != 0);
	sweep_assign_free(&next, s.ndims);

	/* Another seed, other draws. */
	s2.seed = 43;
	sweep_random_trial(&s2, 7, &other);
	CHECK(strcmp(first.values[0], other.values[0]) != 0);
	CHECK(strcmp(first.values[2], other.values[2]) != 0);
	sweep_assign_free(&other, s.ndims);
	sweep_assign_free(&first, s.ndims);
	sweep_spec_free(&s2);
	sweep_spec_free(&s);
}

static void test_random_bounds(void)
{
	struct sweep_spec s;
	if (parse_ok(random_yaml, &s))
		return;
	enum { N = 20000 };
	int int_hits[6] = { 0 }, cat_hits[4] = { 0 }, env_hits[9] = { 0 };
	int li_ends = 0, li_top = 0, log_low = 0, u_low = 0;
	bool ok_text = true, ok_bounds = true;
	for (uint64_t t = 0; t < N; t++) {
		struct sweep_assign a;
		sweep_random_trial(&s, t, &a);
		char *end;
		double u = strtod(a.values[0], &end);
		ok_text &= !*end;
		ok_bounds &= u >= -1.5 && u <= 2.5;
		u_low += u < 0.5;

		long i = strtol(a.values[1], &end, 10);
		ok_text &= !*end;
		ok_bounds &= i >= -2 && i <= 3;
		if (i >= -2 && i <= 3)
			int_hits[i + 2]++;

		double l = strtod(a.values[2], &end);
		ok_text &= !*end;
		ok_bounds &= l >= 1e-6 && l <= 1e-2;
		log_low += l < 1e-4;   /* the lower half of the decades */

		long li = strtol(a.values[3], &end, 10);
		ok_text &= !*end;
		ok_bounds &= li >= 1 && li <= 1000;
		li_ends += li == 1;
		li_top += li == 1000;

		CHECK(strlen(a.values[4]) == 1 && a.values[4][0] >= 'a' && a.values[4][0] <= 'd');
		cat_hits[a.values[4][0] - 'a']++;
		CHECK_STR(a.values[5], "0.10");     /* constants as written */
		CHECK_STR(a.values[6], "0.1");      /* shortest text, not 0.10000000000000001 */

		long e = strtol(a.values[7], &end, 10);
		ok_text &= !*end;
		ok_bounds &= e >= 1 && e <= 8;
		if (e >= 1 && e <= 8)
			env_hits[e]++;

		/* Shortest text: reads back equal, and one digit fewer would not. */
		char shorter[400];
		int digits = 0;
		bool significant = false;
		for (const char *p = a.values[0]; *p && *p != 'e'; p++) {
			significant |= *p >= '1' && *p <= '9';
			digits += significant && *p >= '0' && *p <= '9';
		}
		snprintf(shorter, sizeof(shorter), "%.*g", digits > 1 ? digits - 1 : 1, u);
		ok_text &= digits <= 17 && (digits <= 1 || strtod(shorter, NULL) != u || u == 0);
		sweep_assign_free(&a, s.ndims);
	}
	CHECK(ok_text);
	CHECK(ok_bounds);
	/* Uniform: about half below the middle; each integer about 1/6, both ends included. */
	CHECK_NEAR(u_low / (double)N, 0.5, 0.03);
	for (int k = 0; k < 6; k++)
		CHECK_NEAR(int_hits[k] / (double)N, 1 / 6.0, 0.02);
	for (int k = 0; k < 4; k++)
		CHECK_NEAR(cat_hits[k] / (double)N, 0.25, 0.02);
	for (int k = 1; k <= 8; k++)
		CHECK(env_hits[k] > 0);
	/* Log-uniform over four decades: half below 1e-4 (uniform: 1%). */
	CHECK_NEAR(log_low / (double)N, 0.5, 0.03);
	/* Integer log-uniform: both ends come out, the small end far more. */
	CHECK(li_ends > 0 && li_top > 0);
	CHECK(li_ends > 20 * li_top);
	sweep_spec_free(&s);
}

/* ---- argv and JSON ----------------------------------------------------- */

/* executor and the slurm: block */
static void test_slurm_block(void)
{
	struct sweep_spec s;
	const char *ok = CMD "parameters:\n  lr: {values: [1, 2]}\nexecutor: slurm\nslurm:\n  workers: 8\n"
	                 "  partition: gpu\n  time: \"04:00:00\"\n  mem: 16G\n  gpus_per_task: 1\n"
	                 "  sbatch_args: [\"--account=ml\", --qos=low]\n";
	CHECK_EQ_INT(sweep_spec_parse(ok, strlen(ok), "sweep.yaml", &s), 0);
	CHECK_EQ_INT(s.executor, SWEEP_SLURM);
	CHECK_EQ_INT(s.slurm.workers, 8);
	CHECK_STR(s.slurm.partition, "gpu");
	CHECK_STR(s.slurm.time, "04:00:00");
	CHECK(s.slurm.mem_bytes == (UINT64_C(16) << 30));
	CHECK_EQ_INT(s.slurm.gpus_per_task, 1);
	CHECK_EQ_INT((int)s.slurm.nsbatch_args, 2);
	CHECK_STR(s.slurm.sbatch_args[1], "--qos=low");
	sweep_spec_free(&s);

	parse_bad(CMD "executor: k8s\n", "2:11: executor must be local or slurm, not 'k8s'");
	parse_bad(CMD "slurm: {workers: 0}\n", "2:18: slurm.workers must be a whole number from 1 to 100000, not '0'");
	parse_bad(CMD "slurm: {time: \"4h\"}\n", "2:15: slurm.time must be a SLURM time limit such as \"04:00:00\", "
	          "\"90\" (minutes) or \"1-12:00:00\", not '4h'");
	parse_bad(CMD "slurm: {mem: lots}\n", "2:14: slurm.mem: invalid size 'lots': expected a number with an optional "
	          "unit, such as 512M or 12G");
	parse_bad(CMD "slurm: {sbatch_args: [--array=0-9]}\n", "2:23: slurm.sbatch_args: --array is set by the sweep itself");
	parse_bad(CMD "slurm: {sbatch_args: [account]}\n", "2:23: slurm.sbatch_args: 'account' is not an option (they start with -)");
	parse_bad(CMD "slurm: {sbatch_args: \"--account=ml\"}\n", "2:22: slurm.sbatch_args must be a list such as "
	          "[\"--account=ml\"], not one string: there is no shell to split it");
	parse_bad(CMD "slurm: {nodes: 2}\n", "2:9: unknown key 'nodes' in slurm (known: workers, partition, time, mem, "
	          "gpus_per_task, sbatch_args, max_mem)");
	parse_bad(CMD "slurm: {workers: 2, workers: 3}\n", "2:21: duplicate key 'workers' (first at 2:9)");
	parse_bad(CMD "slurm: 4\n", "2:8: slurm must be a mapping {workers: N, partition: NAME, time: TIME, mem: SIZE, "
	          "max_mem: SIZE, gpus_per_task: N, sbatch_args: [...]}, not '4'");
	parse_bad(CMD "executor: [slurm]\n", "2:11: executor must be local or slurm, not a list");
	parse_bad(CMD "method: optuna\nrun_cap: 3\nparameters:\n  lr: {min: 0.1, max: 1}\nexecutor: slurm\n",
	          "6:11: executor slurm runs grid and random sweeps; method optuna runs locally");

	/* slurm.max_mem: workers of more than one size, on_oom resize the default */
	const char *sized = CMD "executor: slurm\nslurm: {workers: 2, mem: 700M, max_mem: 2G}\n";
	if (parse_ok(sized, &s) == 0) {
		CHECK(s.on_oom_resize);
		CHECK(s.slurm.mem_bytes == UINT64_C(700) << 20 && s.slurm.max_mem_bytes == UINT64_C(2) << 30);
		sweep_spec_free(&s);
	}
	if (parse_ok(CMD "executor: slurm\nslurm: {mem: 700M, max_mem: 2G}\non_oom: {resize: false}\n", &s) == 0) {
		CHECK(!s.on_oom_resize);
		sweep_spec_free(&s);
	}
	parse_bad(CMD "executor: slurm\nslurm: {max_mem: 2G}\n", "3:18: slurm.max_mem is the largest worker when "
	          "slurm.mem is not enough: it needs slurm.mem, the size workers start with");
	parse_bad(CMD "executor: slurm\nslurm: {mem: 2G, max_mem: 1G}\n", "3:27: slurm.max_mem (1G) is less than "
	          "slurm.mem (2G)");
	parse_bad(CMD "executor: slurm\nslurm: {mem: 700M}\non_oom: resize\n", "4:9: on_oom: resize needs slurm: "
	          "{mem: SIZE, max_mem: SIZE}: the memory workers start with, and the most one is given");
	parse_bad(CMD "executor: slurm\nmemory: {max: 700M, max_mem: 2G}\n", "3:30: memory.max_mem sizes the trials of "
	          "a local sweep; with executor slurm the workers are sized: slurm: {mem: SIZE, max_mem: SIZE}");
	/* the size classes: x1.5 in whole MiB from mem, the last max_mem */
	const uint64_t M = UINT64_C(1) << 20;
	CHECK(slurm_size_class(700 * M, 2048 * M, 0) == 700 * M);
	CHECK(slurm_size_class(700 * M, 2048 * M, 700 * M) == 700 * M);
	CHECK(slurm_size_class(700 * M, 2048 * M, 700 * M + 1) == 1050 * M);
	CHECK(slurm_size_class(700 * M, 2048 * M, 1200 * M) == 1575 * M);
	CHECK(slurm_size_class(700 * M, 2048 * M, 1576 * M) == 2048 * M);
	CHECK(slurm_size_class(700 * M, 2048 * M, 9000 * M) == 2048 * M);   /* the caller skips it */
	CHECK(slurm_size_class(700 * M, 700 * M, 900 * M) == 700 * M);

	CHECK(sweep_slurm_time_ok("90") && sweep_slurm_time_ok("90:30") && sweep_slurm_time_ok("1-12") &&
	      sweep_slurm_time_ok("1-12:00") && sweep_slurm_time_ok("1-12:00:00") && sweep_slurm_time_ok("UNLIMITED"));
	CHECK(!sweep_slurm_time_ok("") && !sweep_slurm_time_ok("1:2:3:4") && !sweep_slurm_time_ok("-1") &&
	      !sweep_slurm_time_ok("1-") && !sweep_slurm_time_ok("12:") && !sweep_slurm_time_ok("4h"));
	CHECK(sweep_slurm_owned_arg("-a3") && sweep_slurm_owned_arg("--output=x") && sweep_slurm_owned_arg("--export=NONE"));
	CHECK(!sweep_slurm_owned_arg("--account=ml") && !sweep_slurm_owned_arg("--exclusive") &&
	      !sweep_slurm_owned_arg("--array-limit"));
}

static void test_argv(void)
{
	struct sweep_spec s;
	if (parse_ok("command:\n"
	             "  - /usr/bin/python3\n"
	             "  - train.py\n"
	             "  - --lr={lr}\n"
	             "  - '{{literal}} {opt}{opt} }}{{'\n"
	             "  - ${args}\n"
	             "  - --tail\n"
	             "  - '${args}x'\n"         /* not exactly ${args}: a placeholder 'args' */
	             "parameters:\n"
	             "  lr: {values: [0.1]}\n"
	             "  opt: {values: [adam]}\n"
	             "  args: {value: A}\n"
	             "env:\n"
	             "  OMP: {value: 1}\n", &s))
		return;
	const char *hostile[] = { "a b", "'q\"", "x; rm -rf /", "$(reboot)", "{lr}" };
	for (size_t h = 0; h < sizeof(hostile) / sizeof(hostile[0]); h++) {
		struct sweep_assign a;
		a.values = xcalloc(s.ndims + 1, sizeof(char *));
		a.values[0] = xstrdup("0.1");
		a.values[1] = xstrdup(hostile[h]);
		a.values[2] = xstrdup("A");
		a.values[3] = xstrdup("1");
		char **argv = sweep_trial_argv(&s, &a);
		char want[128];
		CHECK_STR(argv[0], "/usr/bin/python3");
		CHECK_STR(argv[1], "train.py");
		CHECK_STR(argv[2], "--lr=0.1");
		snprintf(want, sizeof(want), "{literal} %s%s }{", hostile[h], hostile[h]);
		CHECK_STR(argv[3], want);     /* a value's braces are not expanded again */
		CHECK_STR(argv[4], "--lr=0.1");
		snprintf(want, sizeof(want), "--opt=%s", hostile[h]);
		CHECK_STR(argv[5], want);
		CHECK_STR(argv[6], "--args=A");
		CHECK_STR(argv[7], "--tail");
		CHECK_STR(argv[8], "$Ax");
		CHECK(argv[9] == NULL);        /* no --OMP: env is not an argument */
		sweep_argv_free(argv);
		sweep_assign_free(&a, s.ndims);
	}
	sweep_spec_free(&s);

	/* A template with no parameters at all. */
	if (parse_ok("command: [prog, '${args}', '{{}}']\n", &s))
		return;
	struct sweep_assign a;
	sweep_grid_trial(&s, 0, &a);
	char **argv = sweep_trial_argv(&s, &a);
	CHECK_STR(argv[0], "prog");
	CHECK_STR(argv[1], "{}");
	CHECK(argv[2] == NULL);
	sweep_argv_free(argv);
	sweep_assign_free(&a, s.ndims);
	sweep_spec_free(&s);
}

static void test_json(void)
{
	struct sweep_spec s;
	if (parse_ok(CMD "method: random\nrun_cap: 1\n"
	             "parameters:\n"
	             "  n: {values: [1, +5, 007, .5, 1e-3, -0.25]}\n"
	             "  s: {values: ['2', adam, 'true', '16', 1x]}\n"
	             "  r: {min: 0, max: 1}\n"
	             "  w.e-ird: {value: x}\n"
	             "env:\n"
	             "  E: {values: [1, 'a\"b']}\n", &s))
		return;
	struct sweep_assign a;
	a.values = xcalloc(s.ndims + 1, sizeof(char *));
	static const char *const nums[] = { "1", "+5", "007", ".5", "1e-3", "-0.25" };
	static const char *const nums_json[] = { "1", "5", "7", "0.5", "1e-3", "-0.25" };
	for (size_t k = 0; k < 6; k++) {
		a.values[0] = xstrdup(nums[k]);
		a.values[1] = xstrdup("adam");
		a.values[2] = xstrdup("0.25");
		a.values[3] = xstrdup("x");
		a.values[4] = xstrdup("1");
		char *j = sweep_params_json(&s, &a);
		char want[256];
		snprintf(want, sizeof(want), "{\"n\": %s, \"s\": \"adam\", \"r\": 0.25, \"w.e-ird\": \"x\"}", nums_json[k]);
		CHECK_STR(j, want);
		free(j);
		for (size_t d = 0; d < s.ndims; d++) {
			free(a.values[d]);
			a.values[d] = NULL;
		}
	}
	/* Quoted numbers stay strings; escaping; a value the file does not
	 * list (a halved retry) is a number by its syntax. */
	static const char *const strs[][3] = {
		/* value, as n (numbers in the file), as s (quoted '2' and '16') */
		{ "2", "2", "\"2\"" }, { "16", "16", "\"16\"" }, { "1", "1", "1" },
		{ "true", "\"true\"", "\"true\"" }, { "1x", "\"1x\"", "\"1x\"" },
		{ "a\"b\\c\nd\te\x01", "\"a\\\"b\\\\c\\nd\\te\\u0001\"", "\"a\\\"b\\\\c\\nd\\te\\u0001\"" },
	};
	for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]); k++) {
		a.values[0] = xstrdup(strs[k][0]);
		a.values[1] = xstrdup(strs[k][0]);
		a.values[2] = xstrdup("1e-07");
		a.values[3] = xstrdup("x");
		a.values[4] = xstrdup("a\"b");
		char *j = sweep_params_json(&s, &a);
		char want[256];
		snprintf(want, sizeof(want), "{\"n\": %s, \"s\": %s, \"r\": 1e-07, \"w.e-ird\": \"x\"}",
		         strs[k][1], strs[k][2]);
		CHECK_STR(j, want);
		free(j);
		j = sweep_env_json(&s, &a);
		CHECK_STR(j, "{\"E\": \"a\\\"b\"}");
		free(j);
		for (size_t d = 0; d < s.ndims; d++) {
			free(a.values[d]);
			a.values[d] = NULL;
		}
	}
	sweep_assign_free(&a, s.ndims);

	/* Env values that look like numbers are strings. */
	sweep_random_trial(&s, 0, &a);
	char *j = sweep_env_json(&s, &a);
	CHECK(!strcmp(j, "{\"E\": \"1\"}") || !strcmp(j, "{\"E\": \"a\\\"b\"}"));
	free(j);
	/* A drawn float is a JSON number that reads back. */
	j = sweep_params_json(&s, &a);
	char *r = strstr(j, "\"r\": ");
	CHECK(r && r[5] >= '0' && r[5] <= '9');
	free(j);
	sweep_assign_free(&a, s.ndims);
	sweep_spec_free(&s);

	/* Nothing: empty objects. */
	if (parse_ok(CMD, &s))
		return;
	sweep_grid_trial(&s, 0, &a);
	j = sweep_params_json(&s, &a);
	CHECK_STR(j, "{}");
	free(j);
	j = sweep_env_json(&s, &a);
	CHECK_STR(j, "{}");
	free(j);
	sweep_assign_free(&a, s.ndims);
	sweep_spec_free(&s);
}

TEST_MAIN("sweep_spec", TEST(test_example_file), TEST(test_example_as_grid), TEST(test_load_errors),
          TEST(test_defaults_and_values), TEST(test_errors_keys), TEST(test_errors_yaml_syntax),
          TEST(test_errors_command), TEST(test_errors_placeholders), TEST(test_errors_method),
          TEST(test_errors_numbers), TEST(test_errors_metric), TEST(test_errors_dims), TEST(test_errors_memory),
          TEST(test_errors_on_oom), TEST(test_errors_misc), TEST(test_optuna_and_prefork), TEST(test_grid),
          TEST(test_random_reproducible), TEST(test_random_bounds), TEST(test_argv), TEST(test_json),
          TEST(test_slurm_block))

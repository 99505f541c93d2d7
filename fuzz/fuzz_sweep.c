/*
 * fuzz_sweep.c — libFuzzer target for sweep files: the YAML parser and its
 * checks (sweep/spec.c), then the trials a spec that loads expands to
 * (sweep/expand.c), as `leakproof sweep` and `--dry-run` do.
 *
 * Input: the file's text. For a spec that loads: the grid's size and its
 * first and last trials (grid specs), a few random draws (every spec), each
 * trial's argv and its parameters and environment as JSON. Checked beyond
 * the sanitizers: the JSON parses to an object, a drawn range value reads
 * back as a finite number, the command is NULL-terminated.
 */
#include <math.h>
#include <stdbool.h>

#include "sweep/spec.h"
#include "util/json.h"
#include "fuzz.h"

static void check_json(char *text)
{
	struct jval v;
	const char *err;
	size_t at;
	fuzz_check(jval_parse(text, &v, &err, &at) == 0 && v.type == J_OBJ);
	jval_release(&v);
	free(text);
}

static void one_trial(const struct sweep_spec *s, const struct sweep_assign *a)
{
	for (size_t d = 0; d < s->ndims; d++) {
		fuzz_check(a->values[d] != NULL);
		if (s->dims[d].kind == DIM_RANGE) {
			char *end;
			double v = strtod(a->values[d], &end);
			fuzz_check(end != a->values[d] && !*end && isfinite(v));
		}
	}
	sweep_argv_free(sweep_trial_argv(s, a));
	check_json(sweep_params_json(s, a));
	check_json(sweep_env_json(s, a));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sweep_spec s;
	memset(&s, 0, sizeof(s));
	if (sweep_spec_parse((const char *)data, size, "fuzz.yaml", &s) != 0)
		return 0;
	fuzz_check(s.ncommand >= 1 && s.command[s.ncommand] == NULL);
	struct sweep_assign a;
	if (s.method == SWEEP_GRID) {
		uint64_t n = sweep_grid_size(&s);
		uint64_t pick[] = { 0, 1, n / 2, n - 1 };
		for (size_t k = 0; n && k < sizeof(pick) / sizeof(pick[0]); k++) {
			if (pick[k] >= n)
				continue;
			memset(&a, 0, sizeof(a));
			sweep_grid_trial(&s, pick[k], &a);
			one_trial(&s, &a);
			sweep_assign_free(&a, s.ndims);
		}
	}
	for (uint64_t i = 0; i < 4; i++) {
		memset(&a, 0, sizeof(a));
		sweep_random_trial(&s, i == 3 ? UINT64_MAX - 1 : i, &a);
		one_trial(&s, &a);
		sweep_assign_free(&a, s.ndims);
	}
	sweep_spec_free(&s);
	return 0;
}

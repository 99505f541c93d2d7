/*
 * sample.c — names of the memory measures and access by measure.
 */
#include "base/sample.h"

#include <string.h>

static const char *const names[MEASURE_COUNT] = { "pss", "rss", "uss", "cgroup", "gpu" };

const char *measure_name(enum measure m)
{
	return (unsigned)m < MEASURE_COUNT ? names[m] : NULL;
}

int measure_parse(const char *name, enum measure *out)
{
	for (int i = 0; i < MEASURE_COUNT; i++)
		if (!strcmp(name, names[i])) {
			*out = (enum measure)i;
			return 0;
		}
	return -1;
}

double mem_sample_value(const struct mem_sample *s, enum measure m)
{
	switch (m) {
	case MEASURE_PSS: return (double)s->pss;
	case MEASURE_RSS: return (double)s->rss;
	case MEASURE_USS: return (double)s->uss;
	case MEASURE_CGROUP: return s->has_cgroup ? (double)s->cgroup : -1;
	case MEASURE_GPU: return s->has_gpu ? (double)s->gpu : -1;
	default: return -1;
	}
}

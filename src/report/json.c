/*
 * json.c — a run's summary as one JSON object, for scripts and CI. Field
 * names are a stable contract, listed in docs/internals/store.md. Sizes in
 * bytes, times in seconds; "per step" fields are per unit of x_unit (per
 * second when the run marked no steps). Every number is finite: what is not
 * known is null, never NaN or Infinity.
 */
#include <math.h>
#include <string.h>

#include "platform/placement.h"
#include "report/render.h"

#define EVENTS_MAX 1000

static void key(struct strbuf *sb, const char *name)
{
	strbuf_addstr(sb, ",\n  ");
	strbuf_add_json_str(sb, name);
	strbuf_addstr(sb, ": ");
}

static void key_num(struct strbuf *sb, const char *name, double v)
{
	key(sb, name);
	report_add_json_num(sb, v);
}

static void key_str(struct strbuf *sb, const char *name, const char *v)
{
	key(sb, name);
	if (v)
		strbuf_add_json_str(sb, v);
	else
		strbuf_addstr(sb, "null");
}

/* "name": value inside a nested object; first says whether it opens it. */
static void inner(struct strbuf *sb, const char *name, bool first)
{
	strbuf_addstr(sb, first ? "" : ", ");
	strbuf_add_json_str(sb, name);
	strbuf_addstr(sb, ": ");
}

/* "placement": {...}: where the run ran (base/placement.h); unknowns null. */
static void add_placement(struct strbuf *sb, const struct placement *p)
{
	inner(sb, "placement", false);
	strbuf_addch(sb, '{');
	inner(sb, "slurm_job_id", true);
	report_add_json_str_or_null(sb, p->slurm_job_id);
	inner(sb, "slurm_array_job_id", false);
	report_add_json_str_or_null(sb, p->slurm_array_job_id);
	inner(sb, "slurm_array_task_id", false);
	report_add_json_str_or_null(sb, p->slurm_array_task_id);
	inner(sb, "slurm_step_id", false);
	report_add_json_str_or_null(sb, p->slurm_step_id);
	inner(sb, "allocation_bytes", false);
	report_add_json_num(sb, p->alloc_mem_bytes ? (double)p->alloc_mem_bytes : NAN);
	inner(sb, "gpus", false);
	report_add_json_str_or_null(sb, p->gpus);
	inner(sb, "launcher", false);
	report_add_json_str_or_null(sb, p->launcher);
	inner(sb, "job_key", false);
	report_add_json_str_or_null(sb, p->job_key);
	inner(sb, "rank", false);
	report_add_json_num(sb, p->rank >= 0 ? p->rank : NAN);
	inner(sb, "local_rank", false);
	report_add_json_num(sb, p->local_rank >= 0 ? p->local_rank : NAN);
	inner(sb, "world_size", false);
	report_add_json_num(sb, p->world_size > 0 ? p->world_size : NAN);
	inner(sb, "node_id", false);
	report_add_json_num(sb, p->node_id >= 0 ? p->node_id : NAN);
	strbuf_addch(sb, '}');
}

static void add_run(struct strbuf *sb, const struct run_summary *s)
{
	const struct run_row *r = &s->run;
	bool ended = r->ended_at > 0;

	strbuf_addstr(sb, "{\n    ");
	inner(sb, "id", true);
	strbuf_addf(sb, "%lld", (long long)r->id);
	inner(sb, "command", false);
	strbuf_addch(sb, '[');
	for (size_t i = 0; i < s->argc; i++) {
		if (i)
			strbuf_addstr(sb, ", ");
		strbuf_add_json_str(sb, s->argv[i]);
	}
	strbuf_addstr(sb, "],\n    ");
	inner(sb, "cwd", true);
	strbuf_add_json_str(sb, r->cwd);
	inner(sb, "hostname", false);
	strbuf_add_json_str(sb, r->hostname);
	if (r->has_place && placement_known(&r->place))   /* a SLURM job, GPUs, a rank */
		add_placement(sb, &r->place);
	strbuf_addstr(sb, ",\n    ");
	inner(sb, "status", true);
	strbuf_add_json_str(sb, r->status);
	if (r->lost && r->lost[0]) {   /* the run is partial: what its store lost */
		inner(sb, "lost", false);
		strbuf_add_json_str(sb, r->lost);
	}
	inner(sb, "exit_code", false);
	if (ended && !r->exit_signal)
		strbuf_addf(sb, "%d", r->exit_code);
	else
		strbuf_addstr(sb, "null");
	inner(sb, "exit_signal", false);
	if (ended && r->exit_signal)
		strbuf_addf(sb, "%d", r->exit_signal);
	else
		strbuf_addstr(sb, "null");
	inner(sb, "started_at", false);
	report_add_json_num(sb, r->started_at);
	inner(sb, "ended_at", false);
	report_add_json_num(sb, ended ? r->ended_at : NAN);
	strbuf_addstr(sb, ",\n    ");
	inner(sb, "step_source", true);
	strbuf_add_json_str(sb, step_source_name(r->step_source));
	inner(sb, "step_regex", false);
	report_add_json_str_or_null(sb, r->step_regex);
	inner(sb, "interval_seconds", false);
	report_add_json_num(sb, (double)r->interval_ns / 1e9);
	inner(sb, "cgroup_mode", false);
	strbuf_add_json_str(sb, r->cgroup_mode);
	strbuf_addstr(sb, "}");
}

/* One object per start of the job's main process: how and why it ended. */
static void add_segments(struct strbuf *sb, const struct run_summary *s)
{
	key(sb, "segments");
	strbuf_addch(sb, '[');
	for (size_t i = 0; i < s->nsegments; i++) {
		const struct segment_row *g = &s->segments[i];
		bool g_ended = g->ended_at > 0;
		strbuf_addstr(sb, i ? ",\n    {" : "\n    {");
		inner(sb, "seq", true);
		strbuf_addf(sb, "%lld", (long long)g->seq);
		inner(sb, "pid", false);
		if (g->pid > 0)
			strbuf_addf(sb, "%d", g->pid);
		else
			strbuf_addstr(sb, "null");
		inner(sb, "started_at", false);
		report_add_json_num(sb, g->started_at);
		inner(sb, "ended_at", false);
		report_add_json_num(sb, g_ended ? g->ended_at : NAN);
		inner(sb, "exit_code", false);
		report_add_json_num(sb, g_ended && !g->exit_signal ? g->exit_code : NAN);
		inner(sb, "exit_signal", false);
		report_add_json_num(sb, g_ended && g->exit_signal ? g->exit_signal : NAN);
		inner(sb, "cause", false);
		report_add_json_str_or_null(sb, g->cause);
		inner(sb, "evidence", false);
		report_add_json_str_or_null(sb, g->evidence);
		inner(sb, "step", false);
		report_add_json_num(sb, g->has_step ? (double)g->end_step : NAN);
		inner(sb, "memory_start_bytes", false);
		report_add_json_num(sb, s->segment_start_bytes[i] >= 0 ? s->segment_start_bytes[i] : NAN);
		inner(sb, "memory_bytes", false);
		report_add_json_num(sb, g->memory_bytes ? (double)g->memory_bytes : NAN);
		inner(sb, "restart", false);
		report_add_json_str_or_null(sb, g->restart);
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, s->nsegments ? "\n  ]" : "]");
	key_num(sb, "restarts", s->nsegments ? (double)(s->nsegments - 1) : 0);
	key_num(sb, "judged_segment", s->judged_seq >= 0 ? (double)s->judged_seq : NAN);
}

static void add_num_array(struct strbuf *sb, const double *v, size_t n)
{
	strbuf_addch(sb, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			strbuf_addstr(sb, ", ");
		report_add_json_num(sb, v[i]);
	}
	strbuf_addch(sb, ']');
}

void report_write_json(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	const struct analysis *a = &s->a;
	bool steps = strcmp(s->x_unit, "s") != 0;
	bool fit = a->points >= 2;
	bool growing = fit && a->slope > 0 && a->projected_to_limit >= 0 && isfinite(a->projected_to_limit);

	strbuf_addstr(sb, "{\n  \"run\": ");
	add_run(sb, s);
	key_str(sb, "verdict", verdict_name(a->verdict));
	key_str(sb, "reason", s->reason);
	key_str(sb, "analysis_reason", a->reason);
	key_str(sb, "measure", measure_name(s->measure));
	/* the measure judged: "pss+shm" when it counts shared memory no process maps */
	key_str(sb, "measure_judged", run_summary_measure_label(s));
	key_str(sb, "x_unit", s->x_unit);
	key_num(sb, "bin_seconds", steps ? NAN : s->bin_seconds);
	key_num(sb, "points", (double)a->points);
	key_num(sb, "growth_bytes_per_step", fit ? a->slope : NAN);
	key(sb, "growth_interval_bytes_per_step");
	double interval[2] = { fit ? a->slope_low : NAN, fit ? a->slope_high : NAN };
	add_num_array(sb, interval, 2);
	key_num(sb, "warmup_steps", s->warmup_steps);
	key_num(sb, "warmup_points", (double)a->warmup_points);
	key_num(sb, "steps", (double)s->steps);
	key_num(sb, "steps_per_second", s->steps_per_second > 0 ? s->steps_per_second : NAN);
	key_num(sb, "samples", (double)s->nsamples);
	key_num(sb, "peak_bytes", (double)s->peak_bytes);
	key_num(sb, "max_processes", s->nsamples ? (double)s->max_processes : NAN);
	key(sb, "step_change_quantiles_bytes");
	double q[5];
	for (int i = 0; i < 5; i++)
		q[i] = fit ? a->q[i] : NAN;
	add_num_array(sb, q, 5);
	key_num(sb, "projected_steps_to_limit", growing ? a->projected_to_limit : NAN);
	key_num(sb, "projected_seconds_to_limit", growing && s->projected_seconds >= 0 ? s->projected_seconds : NAN);
	key_num(sb, "limit_bytes", s->limit_bytes > 0 ? s->limit_bytes : NAN);
	key_str(sb, "limit_source", s->limit_bytes > 0 ? s->limit_source : NULL);
	key_num(sb, "mann_kendall_z", fit ? a->mk_z : NAN);
	key_num(sb, "mann_kendall_p", fit ? a->mk_p : NAN);
	key_num(sb, "baseline_bytes", a->points ? a->baseline_bytes : NAN);
	key_num(sb, "floor_growth_bytes", a->points ? a->floor_growth_bytes : NAN);
	key_num(sb, "duration_seconds", s->duration_s);
	key_num(sb, "channel_bad_lines", (double)s->run.bad_lines);
	key_num(sb, "channel_long_lines", (double)s->run.long_lines);
	add_segments(sb, s);

	key(sb, "top_process");
	if (s->has_top_proc) {
		const struct proc_row *p = &s->top_proc;
		strbuf_addch(sb, '{');
		inner(sb, "pid", true);
		strbuf_addf(sb, "%d", p->pid);
		inner(sb, "ppid", false);
		strbuf_addf(sb, "%d", p->ppid);
		inner(sb, "name", false);
		strbuf_add_json_str(sb, p->name);
		inner(sb, "t", false);
		report_add_json_num(sb, p->t);
		inner(sb, "rss_bytes", false);
		report_add_json_num(sb, (double)p->rss);
		inner(sb, "pss_bytes", false);
		report_add_json_num(sb, (double)p->pss);
		inner(sb, "uss_bytes", false);
		report_add_json_num(sb, (double)p->uss);
		inner(sb, "swap_bytes", false);
		report_add_json_num(sb, (double)p->swap);
		inner(sb, "gpu_bytes", false);
		report_add_json_num(sb, (double)p->gpu);
		strbuf_addch(sb, '}');
	} else {
		strbuf_addstr(sb, "null");
	}

	key(sb, "results");
	strbuf_addch(sb, '{');
	for (size_t i = 0; i < s->nresults; i++) {
		strbuf_addstr(sb, i ? ", " : "");
		strbuf_add_json_str(sb, s->results[i].name);
		strbuf_addstr(sb, ": ");
		report_add_json_num(sb, s->results[i].value);
	}
	strbuf_addch(sb, '}');

	key(sb, "events");
	strbuf_addch(sb, '[');
	size_t shown = s->nevents < EVENTS_MAX ? s->nevents : EVENTS_MAX;
	for (size_t i = 0; i < shown; i++) {
		strbuf_addstr(sb, i ? ",\n    {" : "\n    {");
		inner(sb, "t", true);
		report_add_json_num(sb, s->events[i].t);
		inner(sb, "kind", false);
		strbuf_add_json_str(sb, s->events[i].kind);
		inner(sb, "detail", false);
		strbuf_add_json_str(sb, s->events[i].detail);
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, shown ? "\n  ]" : "]");
	key_num(sb, "events_omitted", (double)(s->nevents - shown));
	key(sb, "trace");
	if (s->trace)
		trace_report_json(s->trace, sb);
	else
		strbuf_addstr(sb, "null");
	key(sb, "census");
	if (s->census)
		census_report_json(s->census, sb);
	else
		strbuf_addstr(sb, "null");
	key(sb, "gpu_memory");
	if (s->gpu)
		gpu_report_json(s->gpu, sb);
	else
		strbuf_addstr(sb, "null");
	render_kinds_json(s, sb);
	strbuf_addstr(sb, "\n}\n");
}

/*
 * json.c — a run's summary as one JSON object, for scripts and CI; and the
 * run object that `report`, `ls` and `top` all write (report_json_run()).
 * Every key is a stable contract, each listed once in
 * docs/internals/json.md. Sizes in bytes, times in seconds; "per step"
 * fields are per unit of x_unit (per second when the run marked no steps).
 * Every number is finite: what is not known is null, never NaN or Infinity.
 */
#include <math.h>
#include <string.h>

#include "platform/placement.h"
#include "report/render.h"
#include "util/jsonw.h"

#define EVENTS_MAX 1000

/* "placement": where the run ran (base/placement.h); unknowns null. */
static void add_placement(struct json_writer *jw, const struct placement *p)
{
	jw_object_object(jw, "placement", false);
	jw_object_string(jw, "slurm_job_id", render_json_known(p->slurm_job_id));
	jw_object_string(jw, "slurm_array_job_id", render_json_known(p->slurm_array_job_id));
	jw_object_string(jw, "slurm_array_task_id", render_json_known(p->slurm_array_task_id));
	jw_object_string(jw, "slurm_step_id", render_json_known(p->slurm_step_id));
	jw_object_double(jw, "allocation_bytes", p->alloc_mem_bytes ? (double)p->alloc_mem_bytes : NAN);
	jw_object_string(jw, "gpus", render_json_known(p->gpus));
	jw_object_string(jw, "launcher", render_json_known(p->launcher));
	jw_object_string(jw, "job_key", render_json_known(p->job_key));
	jw_object_double(jw, "rank", p->rank >= 0 ? p->rank : NAN);
	jw_object_double(jw, "local_rank", p->local_rank >= 0 ? p->local_rank : NAN);
	jw_object_double(jw, "world_size", p->world_size > 0 ? p->world_size : NAN);
	jw_object_double(jw, "node_id", p->node_id >= 0 ? p->node_id : NAN);
	jw_end(jw);
}

static void add_command(struct json_writer *jw, char *const *argv, size_t argc)
{
	jw_object_array(jw, "command", false);
	for (size_t i = 0; i < argc; i++)
		jw_array_string(jw, argv[i]);
	jw_end(jw);
}

void report_json_run(struct json_writer *jw, const struct run_row *r, const struct run_json_now *now)
{
	bool ended = r->ended_at > 0;
	double end = ended ? r->ended_at : wall_seconds();
	const char *verdict = now ? now->verdict : render_json_known(r->verdict);
	char **argv;
	size_t argc;

	jw_object_intmax(jw, "id", r->id);
	run_command_parse(r->command_json, &argv, &argc);
	add_command(jw, argv, argc);
	run_argv_free(argv, argc);
	jw_object_string(jw, "cwd", r->cwd ? r->cwd : "");
	jw_object_string(jw, "hostname", r->hostname ? r->hostname : "");
	if (r->has_place && placement_known(&r->place)) {   /* a SLURM job, GPUs, a rank */
		jw_break(jw);
		add_placement(jw, &r->place);
	}
	jw_break(jw);
	jw_object_double(jw, "started_at", r->started_at);
	jw_object_double(jw, "ended_at", ended ? r->ended_at : NAN);
	jw_object_double(jw, "duration_seconds", end > r->started_at ? end - r->started_at : 0);
	jw_object_string(jw, "status", run_status_name(r->status));
	if (r->lost && r->lost[0])   /* the run is partial: what its store lost */
		jw_object_string(jw, "lost", r->lost);
	jw_object_double(jw, "exit_code", ended && !r->exit_signal ? r->exit_code : NAN);
	jw_object_double(jw, "exit_signal", ended && r->exit_signal ? r->exit_signal : NAN);
	jw_break(jw);
	jw_object_string(jw, "measure", measure_name(r->measure));
	jw_object_intmax(jw, "steps", now ? now->steps : r->steps);
	jw_object_double(jw, "peak_bytes", now ? now->peak_bytes : (double)r->peak_bytes);
	jw_object_string(jw, "verdict", verdict);
	jw_object_double(jw, "growth_bytes_per_step",
	                 !verdict ? NAN : now ? now->growth_bytes_per_step : r->growth_bytes_per_step);
	/* which judgment wrote that verdict: null when it is older than the
	 * record of one (this build's is JUDGE_VERSION; `report` judges again) */
	jw_object_double(jw, "judge_version", !verdict ? NAN : now ? JUDGE_VERSION :
	                 r->judge_version > 0 ? r->judge_version : NAN);
	jw_break(jw);
	jw_object_string(jw, "step_source", step_source_name(r->step_source));
	jw_object_string(jw, "step_regex", render_json_known(r->step_regex));
	jw_object_double(jw, "interval_seconds", (double)r->interval_ns / 1e9);
	jw_object_string(jw, "cgroup_mode", r->cgroup_mode ? r->cgroup_mode : "");
}

/* One object per start of the job's main process: how and why it ended. */
static void add_segments(struct json_writer *jw, const struct run_summary *s)
{
	jw_object_array(jw, "segments", true);
	for (size_t i = 0; i < s->nsegments; i++) {
		const struct segment_row *g = &s->segments[i];
		bool g_ended = g->ended_at > 0;
		jw_array_object(jw, false);
		jw_object_intmax(jw, "seq", g->seq);
		jw_object_double(jw, "pid", g->pid > 0 ? g->pid : NAN);
		jw_object_double(jw, "started_at", g->started_at);
		jw_object_double(jw, "ended_at", g_ended ? g->ended_at : NAN);
		jw_object_double(jw, "exit_code", g_ended && !g->exit_signal ? g->exit_code : NAN);
		jw_object_double(jw, "exit_signal", g_ended && g->exit_signal ? g->exit_signal : NAN);
		jw_object_string(jw, "cause", render_json_known(cause_name(g->cause)));
		jw_object_string(jw, "evidence", render_json_known(g->evidence));
		jw_object_double(jw, "step", g->has_step ? (double)g->end_step : NAN);
		jw_object_double(jw, "memory_start_bytes",
		                 s->segment_start_bytes[i] >= 0 ? s->segment_start_bytes[i] : NAN);
		jw_object_double(jw, "memory_bytes", g->memory_bytes ? (double)g->memory_bytes : NAN);
		jw_object_string(jw, "restart", render_json_known(g->restart));
		jw_end(jw);
	}
	jw_end(jw);
	jw_object_double(jw, "restarts", s->nsegments ? (double)(s->nsegments - 1) : 0);
	jw_object_double(jw, "judged_segment", s->judged_seq >= 0 ? (double)s->judged_seq : NAN);
}

static void add_num_array(struct json_writer *jw, const char *key, const double *v, size_t n)
{
	jw_object_array(jw, key, false);
	for (size_t i = 0; i < n; i++)
		jw_array_double(jw, v[i]);
	jw_end(jw);
}

static void add_top_process(struct json_writer *jw, const struct run_summary *s)
{
	if (!render_json_object_or_null(jw, "top_process", s->has_top_proc))
		return;
	const struct proc_row *p = &s->top_proc;
	jw_object_intmax(jw, "pid", p->pid);
	jw_object_intmax(jw, "ppid", p->ppid);
	jw_object_string(jw, "name", p->name);
	jw_object_double(jw, "t", p->t);
	jw_object_double(jw, "rss_bytes", (double)p->rss);
	jw_object_double(jw, "pss_bytes", (double)p->pss);
	jw_object_double(jw, "uss_bytes", (double)p->uss);
	jw_object_double(jw, "swap_bytes", (double)p->swap);
	jw_object_double(jw, "gpu_bytes", (double)p->gpu);
	jw_end(jw);
}

void report_write_json(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	const struct analysis *a = &s->a;
	bool steps = strcmp(s->x_unit, "s") != 0;
	bool fit = a->points >= 2;
	bool growing = fit && a->slope > 0 && a->projected_to_limit >= 0 && isfinite(a->projected_to_limit);
	struct json_writer jw;

	jw_init(&jw, sb);
	jw_object_begin(&jw, true);
	jw_object_object(&jw, "run", false);
	jw_break(&jw);
	report_json_run(&jw, &s->run, NULL);
	jw_end(&jw);
	jw_object_string(&jw, "verdict", verdict_name(a->verdict));
	jw_object_string(&jw, "reason", s->reason);
	jw_object_string(&jw, "analysis_reason", a->reason);
	jw_object_string(&jw, "measure", measure_name(s->measure));
	/* the measure judged: "pss+shm" when it counts shared memory no process maps */
	jw_object_string(&jw, "measure_judged", run_summary_measure_label(s));
	jw_object_string(&jw, "x_unit", s->x_unit);
	jw_object_double(&jw, "bin_seconds", steps ? NAN : s->bin_seconds);
	jw_object_double(&jw, "points", (double)a->points);
	jw_object_double(&jw, "growth_bytes_per_step", fit ? a->slope : NAN);
	double interval[2] = { fit ? a->slope_low : NAN, fit ? a->slope_high : NAN };
	add_num_array(&jw, "growth_interval_bytes_per_step", interval, 2);
	jw_object_double(&jw, "warmup_steps", s->warmup_steps);
	jw_object_double(&jw, "warmup_points", (double)a->warmup_points);
	jw_object_double(&jw, "window_from", fit ? a->window_from_x : NAN);
	jw_object_double(&jw, "growth_before_bend_bytes_per_step",
	                 a->rate_late > a->rate_early ? a->rate_early : NAN);
	jw_object_double(&jw, "steps", (double)s->steps);
	jw_object_double(&jw, "steps_per_second", s->steps_per_second > 0 ? s->steps_per_second : NAN);
	jw_object_double(&jw, "samples", (double)s->nsamples);
	jw_object_double(&jw, "peak_bytes", (double)s->peak_bytes);
	jw_object_double(&jw, "max_processes", s->nsamples ? (double)s->max_processes : NAN);
	double q[5];
	for (int i = 0; i < 5; i++)
		q[i] = fit ? a->q[i] : NAN;
	add_num_array(&jw, "step_change_quantiles_bytes", q, 5);
	jw_object_double(&jw, "projected_steps_to_limit", growing ? a->projected_to_limit : NAN);
	jw_object_double(&jw, "projected_seconds_to_limit",
	                 growing && s->projected_seconds >= 0 ? s->projected_seconds : NAN);
	jw_object_double(&jw, "limit_bytes", s->limit_bytes > 0 ? s->limit_bytes : NAN);
	jw_object_string(&jw, "limit_source", s->limit_bytes > 0 ? s->limit_source : NULL);
	jw_object_double(&jw, "mann_kendall_z", fit ? a->mk_z : NAN);
	jw_object_double(&jw, "mann_kendall_p", fit ? a->mk_p : NAN);
	jw_object_double(&jw, "baseline_bytes", a->points ? a->baseline_bytes : NAN);
	jw_object_double(&jw, "floor_growth_bytes", a->points ? a->floor_growth_bytes : NAN);
	jw_object_double(&jw, "duration_seconds", s->duration_s);
	jw_object_double(&jw, "channel_bad_lines", (double)s->run.bad_lines);
	jw_object_double(&jw, "channel_long_lines", (double)s->run.long_lines);
	add_segments(&jw, s);
	add_top_process(&jw, s);

	jw_object_object(&jw, "results", false);
	for (size_t i = 0; i < s->nresults; i++)
		jw_object_double(&jw, s->results[i].name, s->results[i].value);
	jw_end(&jw);

	jw_object_array(&jw, "events", true);
	size_t shown = s->nevents < EVENTS_MAX ? s->nevents : EVENTS_MAX;
	for (size_t i = 0; i < shown; i++) {
		jw_array_object(&jw, false);
		jw_object_double(&jw, "t", s->events[i].t);
		jw_object_string(&jw, "kind", s->events[i].kind);
		jw_object_string(&jw, "detail", s->events[i].detail ? s->events[i].detail : "");
		jw_end(&jw);
	}
	jw_end(&jw);
	jw_object_double(&jw, "events_omitted", (double)(s->nevents - shown));
	if (render_json_object_or_null(&jw, "trace", s->trace)) {
		trace_report_json(s->trace, &jw);
		jw_end(&jw);
	}
	if (render_json_object_or_null(&jw, "census", s->census)) {
		census_report_json(s->census, &jw);
		jw_end(&jw);
	}
	if (render_json_object_or_null(&jw, "gpu_memory", s->gpu)) {
		gpu_report_json(s->gpu, &jw);
		jw_end(&jw);
	}
	render_kinds_json(s, &jw);
	jw_end(&jw);
	strbuf_addch(sb, '\n');
}

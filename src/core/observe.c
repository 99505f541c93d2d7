/*
 * observe.c — what the job says and what it holds: its output lines
 * (passed through, and scanned for steps, results and out-of-memory
 * messages), the client channel's messages, the steps they mark, and the
 * samples of its memory, taken on the timer's tick and at each step. Each
 * goes to the store as it comes. Part of the supervisor (supervise-int.h).
 *
 * Times are CLOCK_MONOTONIC nanoseconds (seconds since the run began in the
 * store); memory is bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/channel.h"
#include "core/sampler.h"
#include "core/supervise-int.h"
#include "platform/cgroup.h"
#include "platform/proc.h"
#include "store/store.h"

#define STEP_RESAMPLE_NS 200000LL          /* steps closer than this share a sample */
#define PENDING_STEPS_MAX 65536            /* steps held for the first sample */
#define EXIT_DROP_BYTES (1024.0 * 1024.0)   /* a drop that may be the main process exiting */
#define READ_CHUNK (256 * 1024)   /* one read of output; the pipes hold 1 MiB */

/* The per-process rows of the latest sample. */
static void store_proc_rows(struct sv *sv, double t)
{
	const struct proc_mem *pm;
	size_t n = sampler_procs(sv->sampler, &pm);
	for (size_t i = 0; i < n; i++)
		store_add_proc_sample(sv->st, sv->run_id, t, pm[i].pid, pm[i].ppid, pm[i].name,
		                      pm[i].rss, pm[i].pss, pm[i].uss, pm[i].swap, pm[i].gpu);
}

/* Memory by kind (growth kinds): the processes whose kinds moved, and the
 * job cgroup's page cache and shmem as pid 0 when it was read again. */
static void store_kind_rows(struct sv *sv, int64_t now_ns, double t)
{
	const struct proc_mem *pm;
	size_t n = sampler_kinds_due(sv->sampler, now_ns, &pm);
	for (size_t i = 0; i < n; i++) {
		struct kind_row k = { .t = t, .pid = pm[i].pid, .ppid = pm[i].ppid, .anon = pm[i].anon,
		                      .cow = pm[i].cow, .cow_base = pm[i].cow_base, .file = pm[i].file,
		                      .shmem = pm[i].shmem, .gpu = pm[i].gpu };
		memcpy(k.name, pm[i].name, sizeof(k.name));
		store_add_kind_sample(sv->st, sv->run_id, &k);
	}
	struct cgroup_memstat ms;
	uint64_t reads = sampler_job_kinds(sv->sampler, &ms);
	if (reads && reads != sv->memstat_reads) {
		sv->memstat_reads = reads;
		struct kind_row k = { .t = t, .name = "cgroup", .anon = ms.anon_bytes,
		                      .file = ms.file_cache_bytes, .shmem = ms.shmem_bytes };
		if (sampler_job_kinds_dev_shm(sv->sampler))
			snprintf(k.name, sizeof(k.name), "/dev/shm");   /* no cgroup: the machine's */
		store_add_kind_sample(sv->st, sv->run_id, &k);
	}
	sv->last_kinds_ns = now_ns;
}

static void store_step(struct sv *sv, const struct step_rec *rec);

/* s is the latest sample: stored, and given to the steps that waited for it. */
static void keep_sample(struct sv *sv, const struct mem_sample *s, int64_t now_ns)
{
	sv->last = *s;
	sv->have_last = true;
	sv->last_sample_ns = now_ns;
	double v = mem_sample_value(s, sv->o->measure);
	if (v > sv->peak)
		sv->peak = v;
	store_add_sample(sv->st, sv->run_id, s);
	for (size_t i = 0; i < sv->npending; i++) {
		struct step_rec rec = sv->pending[i];
		double t = rec.mem.t;
		rec.mem = *s;
		rec.mem.t = t;
		store_step(sv, &rec);
	}
	sv->npending = 0;
}

/* Whether the sample s, lower than the last, was taken while the job's
 * main process is exiting: the kernel unmaps its memory before it becomes
 * a zombie, and a tick in between reads part of it gone. Such a sample is
 * not the job's memory (on a busy machine a run judged per second ended in
 * a drop of 58 MiB there, and its rising floor was not seen). Its stat is
 * read only on a drop. */
static bool main_exiting(struct sv *sv, const struct mem_sample *s)
{
	if (!sv->have_last || sv->child <= 0 || sv->child_exited)
		return false;
	double v = mem_sample_value(s, sv->o->measure), last = mem_sample_value(&sv->last, sv->o->measure);
	if (!(v >= 0 && last >= 0 && last - v > fmax(EXIT_DROP_BYTES, 0.05 * last)))
		return false;
	struct proc_stat ps;
	return read_proc_stat(NULL, sv->child, &ps) == 0 && (ps.flags & PROC_PF_EXITING);
}

/* Sample the tree now: store it, check the budgets, and the per-process
 * rows when due; commit the store once a second. */
void sv_take_sample(struct sv *sv, int64_t now_ns)
{
	struct mem_sample s;
	memset(&s, 0, sizeof(s));
	if (sampler_sample(sv->sampler, now_ns, false, &s) <= 0)
		return;  /* the tree is empty: between the exit and the reaping */
	if (main_exiting(sv, &s))
		return;
	s.t = sv_now_t(sv, now_ns);
	keep_sample(sv, &s, now_ns);
	sv_check_budgets(sv, &s, now_ns);
	double v = mem_sample_value(&s, sv->o->measure);
	sv_census_watch(sv, s.t, v);

	/* per-process rows (and their kinds) once a second, and sooner while
	 * memory climbs, so that "which process held the most" sees a job
	 * that dies fast; near the limit, rows and flushes every 200 ms, so
	 * that the last steps before an out-of-memory end are in the store */
	double level = s.has_cgroup && (double)s.cgroup > v ? (double)s.cgroup : v;
	bool near = sv->near_limit_bytes > 0 && level >= sv->near_limit_bytes;
	int64_t proc_every = near ? NEAR_LIMIT_EVERY_NS : PROC_SAMPLE_EVERY_NS;
	if (now_ns - sv->last_proc_ns >= proc_every || v > sv->proc_level * 1.1) {
		sv->proc_level = v;
		store_proc_rows(sv, s.t);
		sv->last_proc_ns = now_ns;
	}
	/* kind rows every 200 ms; while memory moves fast (a MiB since the
	 * last look), every 10 ms (every tick at 100 Hz) for the first 3 s
	 * of it, then twice as long apart every 3 s, back to
	 * 200 ms after 18 s: growth that lasts a fraction of a second has its
	 * kinds stored as it goes, a job that grows for hours is not stored
	 * at the sampling rate (docs/internals/growth-kinds.md, "Fast growth") */
	bool fast = fabs(level - sv->kinds_level) >= KINDS_FAST_MOVE_BYTES;
	int64_t kinds_every = KINDS_EVERY_NS;
	if (fast && !sv->kinds_fast_since_ns)
		sv->kinds_fast_since_ns = now_ns;
	if (fast) {
		int64_t periods = (now_ns - sv->kinds_fast_since_ns) / KINDS_FAST_FOR_NS;
		if (periods < 6 && KINDS_FAST_EVERY_NS << periods < KINDS_EVERY_NS)
			kinds_every = KINDS_FAST_EVERY_NS << periods;
	}
	if (now_ns - sv->last_kinds_ns >= kinds_every) {
		if (!fast)
			sv->kinds_fast_since_ns = 0;   /* a look that saw no fast move ends it */
		sv->kinds_level = level;
		store_kind_rows(sv, now_ns, s.t);
	}
	if (now_ns - sv->last_flush_ns >= (near ? NEAR_LIMIT_EVERY_NS : FLUSH_EVERY_NS)) {
		store_flush(sv->st);
		sv->last_flush_ns = now_ns;
	}
}

/* Store a step with its memory, and keep it for the live projection. */
static void store_step(struct sv *sv, const struct step_rec *rec)
{
	store_add_step(sv->st, sv->run_id, rec);
	if (sv->ring_n == LIVE_RING) {
		memmove(sv->ring_x, sv->ring_x + 1, (LIVE_RING - 1) * sizeof(double));
		memmove(sv->ring_y, sv->ring_y + 1, (LIVE_RING - 1) * sizeof(double));
		sv->ring_n--;
	}
	sv->ring_x[sv->ring_n] = (double)rec->step;
	sv->ring_y[sv->ring_n] = mem_sample_value(&rec->mem, sv->o->measure);
	sv->ring_n++;
}

/* Hold a step marked before any sample for the first one (keep_sample), or
 * for the end (sv_store_pending_steps). */
static void hold_step(struct sv *sv, const struct step_rec *rec)
{
	if (sv->npending == sv->pending_cap) {
		size_t cap = sv->pending_cap ? sv->pending_cap * 2 : 64;
		struct step_rec *p = cap <= PENDING_STEPS_MAX ? realloc(sv->pending, cap * sizeof(*p)) : NULL;
		if (!p) {
			sv->pending_dropped++;
			return;
		}
		sv->pending = p;
		sv->pending_cap = cap;
	}
	sv->pending[sv->npending++] = *rec;
}

/* Record step `step`, ended now, with the memory just sampled; before the
 * first sample, with the first (or the end's figure). */
static void record_step(struct sv *sv, int64_t step, int64_t now)
{
	struct step_rec rec;
	rec.step = step;
	rec.epoch = sv->epoch;
	rec.mem = sv->last;
	rec.mem.t = sv_now_t(sv, now);
	if (sv->have_last)
		store_step(sv, &rec);
	else
		hold_step(sv, &rec);
	if (sv->steps == 0)
		sv->first_step_t = rec.mem.t;
	sv->steps++;
	sv->last_step = rec.step;
	if (sv->step_word)
		__atomic_store_n(sv->step_word, (uint64_t)sv->steps, __ATOMIC_RELAXED);
}

/*
 * The job's main process has ended and steps still wait for a first
 * sample: the job ended before one could be taken (a job of a few
 * milliseconds). Its only figure then is the peak resident size the kernel
 * kept for it (wait4's ru_maxrss, its reaped descendants included): stored
 * as the run's one sample, for every measure, not exact, and said in an
 * event, so that the steps are kept with an honest upper bound rather than
 * lost.
 */
void sv_store_pending_steps(struct sv *sv)
{
	int64_t now = mono_ns();
	if (!sv->have_last && !sv->child_maxrss) {
		sv->pending_dropped += (int64_t)sv->npending;   /* no figure at all */
		sv->npending = 0;
	}
	if (sv->pending_dropped) {
		char detail[160];
		snprintf(detail, sizeof(detail), "%lld step%s marked before the first sample could not be stored",
		         (long long)sv->pending_dropped, sv->pending_dropped == 1 ? "" : "s");
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "steps-dropped", detail);
		sv->pending_dropped = 0;
	}
	if (!sv->npending || sv->have_last)
		return;
	struct mem_sample s = { .t = sv_now_t(sv, now), .nprocs = 1, .rss = sv->child_maxrss,
	                        .pss = sv->child_maxrss, .uss = sv->child_maxrss };
	store_add_event(sv->st, sv->run_id, s.t, "peak-rss",
	                "the job ended before its memory was first sampled: its steps carry the peak"
	                " resident size the kernel recorded for it (an upper bound for every measure)");
	keep_sample(sv, &s, now);
}

/* A line of the channel that is not understood: counted, the first few
 * kept as events. */
static void bad_line(struct sv *sv, double t, const char *err)
{
	if (sv->bad_lines++ < 5) {
		char detail[256];
		snprintf(detail, sizeof(detail), "bad channel line: %s", err);
		store_add_event(sv->st, sv->run_id, t, "channel-error", detail);
	}
}

/* A step ended: measure now and record it. */
static void on_step(struct sv *sv, bool has_n, int64_t n, enum step_source src)
{
	int64_t now = mono_ns();

	/* Numbers are capped (CHANNEL_NUMBER_MAX) so counting on cannot overflow. */
	if ((has_n && n > CHANNEL_NUMBER_MAX) ||
	    (!has_n && sv->steps > 0 && sv->last_step >= CHANNEL_NUMBER_MAX)) {
		bad_line(sv, sv_now_t(sv, now), "step number above 2^53");
		return;
	}

	if (sv->o->step_regex && src == STEP_SOURCE_CHANNEL) {
		sv->ignored_channel_steps++;   /* --step-regex chooses the source */
		return;
	}
	sv->step_source = src;
	sampler_mark_step(sv->sampler);     /* the dear sources, at the boundary */
	/* A mark read after the job's main process ended (its last lines,
	 * read late on a busy machine) is not sampled again: what is left of
	 * the tree then is not the memory the job had at that step. */
	if (!sv->have_last || (!sv->child_exited && now - sv->last_sample_ns >= STEP_RESAMPLE_NS))
		sv_take_sample(sv, now);

	/* A step announced again with the number it had (a restarted job
	 * printing "Epoch 3/10" once more as it resumes) is not a new step. */
	if (!(has_n && sv->steps > 0 && n == sv->last_step))
		record_step(sv, has_n ? n : sv->last_step + 1, now);

	/* The schedule. A client marks the end of a step; a matched line is
	 * usually a progress line that announces the next one (Keras prints
	 * "Epoch 2/10" as epoch 2 starts), so the first line a process prints
	 * opens its count rather than closing a step. */
	sv->seg_steps++;
	int64_t done = src == STEP_SOURCE_REGEX ? sv->seg_steps - 1 : sv->seg_steps;
	if ((sv->o->restart & RESTART_EVERY) && done >= sv->o->restart_every) {
		char reason[96];
		snprintf(reason, sizeof(reason), "%lld step%s done in this process (--restart every=%lld)",
		         (long long)done, done == 1 ? "" : "s", (long long)sv->o->restart_every);
		sv_request_stop(sv, now, "every", reason);
	}
}

/* One line of an object census (docs/internals/census.md): stored with
 * the last step marked, for judge/census.c to judge. */
static void on_census(struct sv *sv, double t, const struct chan_msg *m)
{
	struct census_row r;
	char holder[CHANNEL_LINE_MAX + 1];
	memset(&r, 0, sizeof(r));
	r.t = t;
	r.step = sv->steps > 0 ? sv->last_step : -1;
	r.seq = m->n;
	snprintf(r.type, sizeof(r.type), "%s", m->census_type);
	r.count = m->count;
	r.bytes = m->bytes;
	r.cost_us = -1;
	if (!strcmp(m->census_type, "*")) {
		for (int i = 0; i < m->nkv; i++)
			if (!strcmp(m->kv[i].name, "hook")) {   /* a dormant hook: not a census */
				sv_census_hook(sv, (int64_t)m->kv[i].value);
				return;
			}
		sv->census_lines++;
		for (int i = 0; i < m->nkv; i++) {
			if (!strcmp(m->kv[i].name, "objects"))
				r.count = (int64_t)m->kv[i].value;
			else if (!strcmp(m->kv[i].name, "cost_us"))
				r.cost_us = (int64_t)m->kv[i].value;
		}
	} else if (m->text_len) {
		memcpy(holder, m->text, m->text_len);
		holder[m->text_len] = '\0';
		r.holder = holder;
	}
	store_add_census(sv->st, sv->run_id, &r);
}

/* One line of the client channel ($LEAKPROOF_FD): a step, epoch, metric,
 * GPU figure, result or mark (core/channel.h). A linebuf callback. */
void sv_on_channel_line(void *ctx, const char *line, size_t len, bool truncated)
{
	struct sv *sv = ctx;
	struct chan_msg m;
	char err[160];
	double t = sv_now_t(sv, mono_ns());

	if (truncated) {
		sv->long_lines++;
		return;
	}
	int rc = channel_parse(line, len, &m, err, sizeof(err));
	if (rc < 0) {
		bad_line(sv, t, err);
		return;
	}
	if (rc == 0)
		return;
	switch (m.type) {
	case CHAN_STEP:
		on_step(sv, m.has_n, m.n, STEP_SOURCE_CHANNEL);
		break;
	case CHAN_EPOCH: {
		char d[32];
		if (!m.has_n && sv->epoch >= CHANNEL_NUMBER_MAX) {
			bad_line(sv, t, "epoch number above 2^53");
			break;
		}
		sv->epoch = m.has_n ? m.n : sv->epoch + 1;
		snprintf(d, sizeof(d), "%lld", (long long)sv->epoch);
		store_add_event(sv->st, sv->run_id, t, "epoch", d);
		break;
	}
	case CHAN_METRIC:
		for (int i = 0; i < m.nkv; i++)
			store_add_metric(sv->st, sv->run_id, sv->last_step, t, m.kv[i].name, m.kv[i].value);
		break;
	case CHAN_GPU:
		for (int i = 0; i < m.nkv; i++) {
			char name[80];
			snprintf(name, sizeof(name), "gpu.%s", m.kv[i].name);
			store_add_metric(sv->st, sv->run_id, sv->last_step, t, name, m.kv[i].value);
		}
		break;
	case CHAN_RESULT:
		for (int i = 0; i < m.nkv; i++)
			store_add_result(sv->st, sv->run_id, m.kv[i].name, m.kv[i].value);
		break;
	case CHAN_CENSUS:
		on_census(sv, t, &m);
		break;
	case CHAN_MARK: {
		char text[CHANNEL_LINE_MAX + 1];
		memcpy(text, m.text, m.text_len);
		text[m.text_len] = '\0';
		store_add_event(sv->st, sv->run_id, t, "mark", text);
		break;
	}
	}
}

/* One line of the job's stdout or stderr: scanned for out-of-memory
 * messages, results (--result-regex) and steps (--step-regex), each when
 * its flag says the line may hold one. */
static void on_output_line(struct sv *sv, const char *line, size_t len, bool cause, bool result, bool step)
{
	bool has_n;
	int64_t n = 0;
	char value[64];
	if (cause)
		cause_scan_line(&sv->scan, line, len);
	if (result && sv->o->result_re && step_regex_capture(sv->o->result_re, line, len, value, sizeof(value))) {
		char *end;
		double v = strtod(value, &end);
		if (end != value && isfinite(v))
			store_add_result(sv->st, sv->run_id, sv->o->result_name ? sv->o->result_name : "result", v);
	}
	if (step && sv->o->step_re && step_regex_match(sv->o->step_re, line, len, &has_n, &n))
		on_step(sv, has_n, n, STEP_SOURCE_REGEX);
}

/* The next place at or after i where re's multi-line twin finds a match
 * beginning (*at, kept between calls; n: none); i itself when every line
 * must be matched alone (the search gave up, or cannot be made). */
static size_t next_match(struct step_regex *re, const char *s, size_t i, size_t n, size_t *at)
{
	if (!re)
		return n;
	if (*at == SIZE_MAX)
		return i;   /* gave up in this block: every line alone */
	if (*at < i)
		*at = step_regex_next(re, s, i, n);
	return *at == SIZE_MAX ? i : *at;
}

/* A place at or after from inside a line that may be longer than
 * CHANNEL_LINE_MAX (such a line is matched alone, on its first
 * CHANNEL_LINE_MAX bytes); n when there is none. Every such line holds a
 * whole window of half that length with no line end, so one short memchr
 * a window tells, not one a line. *at is kept between calls. */
static size_t next_long_line(const char *s, size_t from, size_t n, size_t *at)
{
	const size_t w = CHANNEL_LINE_MAX / 2;
	if (*at != SIZE_MAX && *at >= from)
		return *at;
	size_t x = from;
	for (; x + w <= n; x += w)
		if (!memchr(s + x, '\n', w) && !memchr(s + x, '\r', w))
			break;
	return *at = x + w <= n ? x : n;
}

/* A linebuf callback: a line that was gathered across reads. */
void sv_on_output_line(void *ctx, const char *line, size_t len, bool truncated)
{
	(void)truncated;   /* a cut line is matched on its first CHANNEL_LINE_MAX bytes */
	on_output_line(ctx, line, len, true, true, true);
}

/* The end of the line that starts at i: the first '\n' or '\r' at or
 * after it, or n. *cr is where the next '\r' at or after i is (n: none),
 * kept between calls so a block without one costs one memchr for it, and
 * a block with no line worth a look none. */
static size_t line_end(const char *s, size_t i, size_t n, size_t *cr)
{
	if (*cr == SIZE_MAX || *cr < i) {   /* SIZE_MAX: not looked for yet */
		const char *p = memchr(s + i, '\r', n - i);
		*cr = p ? (size_t)(p - s) : n;
	}
	const char *nl = memchr(s + i, '\n', *cr - i);
	return nl ? (size_t)(nl - s) : *cr;
}

/* Where the line holding position at begins: just after the last '\n' or
 * '\r' in s[from..at), else from. */
static size_t line_start(const char *s, size_t from, size_t at)
{
	const char *nl = memrchr(s + from, '\n', at - from);
	size_t b = nl ? (size_t)(nl - s) + 1 : from;
	const char *cr = memrchr(s + b, '\r', at - b);   /* only after the '\n' */
	return cr ? (size_t)(cr - s) + 1 : b;
}

/*
 * A block of the job's output, as read: its lines scanned where they lie,
 * not copied. The same lines, cut the same way, as linebuf_feed() would
 * deliver them (a carriage return ends a line; "\r\n" and repeated "\r"
 * make no empty line; a line is scanned on its first CHANNEL_LINE_MAX
 * bytes); only a line begun in an earlier block, and the unfinished line
 * at the end of this one, go through the linebuf. Out-of-memory messages
 * are looked for only in lines where cause_scan_skip() finds the end of a
 * key, the regexes only in lines where a search of the whole block with
 * their multi-line twins finds a match beginning (step_regex_next()) and
 * in lines longer than CHANNEL_LINE_MAX (matched alone on their start,
 * where the twin's search of the whole line may differ); no other line is
 * looked at, or even cut out: most output is crossed at the speed of the
 * twin's search and cause_scan_skip().
 */
static void scan_output(struct sv *sv, struct linebuf *lb, const char *s, size_t n)
{
	size_t i = 0, cr = SIZE_MAX;
	if (lb->len || lb->overflow) {   /* the end of a line begun before */
		size_t e = line_end(s, 0, n, &cr);
		i = e < n ? e + 1 : n;
		linebuf_feed(lb, s, i, sv_on_output_line, sv);
	}
	bool every_line = sv->o->step_re || sv->o->result_re;
	size_t key = i + cause_scan_skip(s + i, n - i);
	size_t step_at = 0, result_at = 0, long_at = SIZE_MAX;
	while (i < n) {
		/* the next line worth a look: a key's end, a match's start, a
		 * long line; the lines before it cannot match */
		size_t at = key;
		if (every_line) {
			size_t a = next_match(sv->o->step_re, s, i, n, &step_at);
			size_t b = next_match(sv->o->result_re, s, i, n, &result_at);
			size_t c = next_long_line(s, i, n, &long_at);
			at = at < a ? at : a;
			at = at < b ? at : b;
			at = at < c ? at : c;
		}
		if (at >= n)
			break;
		size_t b = line_start(s, i, at);
		size_t e = line_end(s, at, n, &cr);
		if (e == n)
			break;   /* in the unfinished line: the linebuf scans it */
		bool after_cr = b > 0 ? s[b - 1] == '\r' : lb->after_cr;
		size_t len = e - b;
		if (len || (s[e] == '\n' && !after_cr)) {
			bool cut = len > CHANNEL_LINE_MAX;   /* matched alone, cut as ever */
			bool cause = key < e;
			bool step = sv->o->step_re && (cut || step_at == SIZE_MAX || step_at <= e);
			bool result = sv->o->result_re && (cut || result_at == SIZE_MAX || result_at <= e);
			if (cause || step || result)
				on_output_line(sv, s + b, cut ? CHANNEL_LINE_MAX : len, cause, result, step);
		}
		i = e + 1;
		if (key < i)
			key = i + cause_scan_skip(s + i, n - i);
	}
	size_t tail = line_start(s, i, n);
	if (tail > i || (tail == i && i > 0 && (s[i - 1] == '\n' || s[i - 1] == '\r')))
		lb->after_cr = s[tail - 1] == '\r';
	if (tail < n)
		linebuf_feed(lb, s + tail, n - tail, sv_on_output_line, sv);
}

/*
 * The job's output passed on without going through our memory: tee()
 * duplicates what is in the job's pipe into a scratch pipe of ours (page
 * references, no copy), splice() moves the pipe's pages on to our stdout
 * or stderr, and only the duplicate is read, to scan it. One copy of each
 * byte where read() and write() make two; BENCHMARKS.md section 10. For a
 * job's pipe passed on to a pipe or a file; a terminal (the status line's
 * bookkeeping) or a pty is copied as before, and so is everything after a
 * splice the output refuses (a file opened O_APPEND on an older kernel).
 */
#define TEE_MAX (1 << 20)   /* the pipes' size */

/* May stream k (0 stdout, 1 stderr) be spliced from in to out_fd? */
static bool tee_ready(struct sv *sv, int k, int in, int out_fd)
{
	if (sv->tee_state[k] == 0) {
		struct stat a;
		int *p = sv->tee_pipe[k];
		sv->tee_state[k] = -1;
		if (fstat(in, &a) == 0 && S_ISFIFO(a.st_mode) && !isatty(out_fd) && pipe2(p, O_CLOEXEC) == 0) {
			fcntl(p[0], F_SETPIPE_SZ, TEE_MAX);   /* best effort: tee() takes what fits */
			/* a splice moves what the output pipe has room for: 16 pages
			 * in a shell's pipe; as large as ours (best effort too) */
			struct stat o;
			if (fstat(out_fd, &o) == 0 && S_ISFIFO(o.st_mode) && fcntl(out_fd, F_GETPIPE_SZ) < TEE_MAX)
				fcntl(out_fd, F_SETPIPE_SZ, TEE_MAX);
			sv->tee_state[k] = 1;
		}
	}
	return sv->tee_state[k] > 0;
}

/* Pass on and scan what the job's pipe in holds now: the bytes (> 0), 0 at
 * end of file, -1 when it holds nothing now, -2 when this way cannot serve
 * (copy instead). */
static ssize_t tee_pass(struct sv *sv, int k, int in, int out_fd, bool *broken, struct linebuf *lb, char *buf,
                        size_t bufsz)
{
	int *dup = sv->tee_pipe[k];
	ssize_t t = tee(in, dup[1], TEE_MAX, SPLICE_F_NONBLOCK);
	if (t < 0)
		return errno == EAGAIN || errno == EINTR ? -1 : -2;
	if (t == 0)
		return 0;
	sv_status_clear(sv);   /* our stdout may reach the terminal too (| tee) */
	size_t left = (size_t)t;
	while (left && !*broken) {
		ssize_t m = splice(in, NULL, out_fd, NULL, left, SPLICE_F_MOVE);
		if (m > 0) {
			left -= (size_t)m;
		} else if (m < 0 && errno == EINTR) {
			continue;
		} else if (m < 0 && errno == EAGAIN) {   /* a non-blocking output, full */
			struct pollfd pfd = { .fd = out_fd, .events = POLLOUT };
			poll(&pfd, 1, 100);
		} else if (m < 0 && errno == EPIPE) {
			*broken = true;   /* drained below, so the job never blocks */
		} else {
			sv->tee_state[k] = -1;   /* copied from now on */
			break;
		}
	}
	while (left) {   /* what was not moved: taken out of the pipe, and copied */
		ssize_t n = read(in, buf, left < bufsz ? left : bufsz);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		sv_pass_output(sv, out_fd, buf, (size_t)n, broken);
		left -= (size_t)n;
	}
	for (size_t got = 0; got < (size_t)t;) {   /* the duplicate, scanned */
		ssize_t n = read(dup[0], buf, (size_t)t - got < bufsz ? (size_t)t - got : bufsz);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		scan_output(sv, lb, buf, (size_t)n);
		got += (size_t)n;
	}
	return t;
}

/* Read what is there on fd (at most a few blocks, so sampling is not
 * starved by a flood). Returns false at end of file. */
bool sv_pump(struct sv *sv, int *fdp, int out_fd, bool *broken, struct linebuf *lb, line_fn fn)
{
	static char buf[READ_CHUNK];
	int k = out_fd == STDOUT_FILENO ? 0 : out_fd == STDERR_FILENO ? 1 : -1;
	for (int rounds = 0; rounds < 4; rounds++) {
		ssize_t n = -2;
		if (k >= 0 && fn == sv_on_output_line && !*broken && tee_ready(sv, k, *fdp, out_fd)) {
			n = tee_pass(sv, k, *fdp, out_fd, broken, lb, buf, sizeof(buf));
			if (n > 0) {
				if (n < TEE_MAX)
					return true;
				continue;
			}
			if (n == -1)
				return true;
		}
		if (n == -2)
			n = read(*fdp, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return true;
			n = 0;
		}
		if (n == 0) {
			linebuf_finish(lb, fn, sv);
			close(*fdp);
			*fdp = -1;
			return false;
		}
		if (out_fd >= 0)
			sv_pass_output(sv, out_fd, buf, (size_t)n, broken);   /* broken: keep draining */
		if (fn == sv_on_output_line)
			scan_output(sv, lb, buf, (size_t)n);
		else
			linebuf_feed(lb, buf, (size_t)n, fn, sv);
		if ((size_t)n < sizeof(buf))
			return true;
	}
	return true;
}

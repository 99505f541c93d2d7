/*
 * slurm.c — the SLURM side of `executor: slurm` (slurm.h): the batch
 * script and sbatch command line of a sweep's job array, squeue and
 * scontrol read for a job's state, srun as the prefix of each trial, and
 * slurmstepd's OOM line found in a trial's output.
 *
 * SLURM signals the batch process on scancel and at the time limit, then
 * SIGKILLs what is left after KillWait: so the batch script execs
 * leakproof (`exec leakproof sweep --worker ID`) and the worker itself is
 * the process that hears it. The store string reaches the workers in
 * their environment (LEAKPROOF_STORE, which sbatch passes on), never on a
 * command line that `ps` or `scontrol show job` would print.
 *
 * Every command runs through slurm_run() (platform/slurmjob.h): spawned
 * with a time bound and a cap on what it prints; none goes through a shell.
 */
#include "sweep/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "platform/slurmjob.h"
#include "platform/spawn.h"
#include "util/util.h"

#define CMD_TIMEOUT_MS 60000
#define STOP_QUERY_MS 3000       /* told to stop: SLURM SIGKILLs after KillWait */
#define LOG_TAIL_BYTES (64 * 1024)   /* slurmstepd writes its line at the end */

static int64_t env_int(const char *name, int64_t dflt)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return dflt;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	return *end || errno ? dflt : n;
}

void slurm_job_env_read(struct slurm_job_env *e)
{
	e->job_id = env_int("SLURM_JOB_ID", 0);
	e->in_job = e->job_id > 0;
	e->array_job = env_int("SLURM_ARRAY_JOB_ID", e->job_id);
	e->array_task = env_int("SLURM_ARRAY_TASK_ID", -1);
}

/* Run argv (looked up on PATH) to its end; its stdout into out. 0 when it
 * exited 0; else -1 with its stderr (or why it did not run) in why. */
static int run_cmd(const char *const *argv, const char *const *env, int timeout_ms, struct strbuf *out, char *why,
                   size_t whysz)
{
	struct spawn_capture cap = SPAWN_CAPTURE_INIT;
	int rc = slurm_run(argv, env, timeout_ms, &cap, why, whysz);
	if (rc > 0) {
		strbuf_trim_end(&cap.err, "\n ");
		snprintf(why, whysz, "%s failed%s%.400s", argv[0], cap.err.len ? ": " : "", strbuf_str(&cap.err));
	}
	if (out && rc == 0)
		strbuf_addstr(out, strbuf_str(&cap.out));
	strbuf_release(&cap.out);
	strbuf_release(&cap.err);
	return rc ? -1 : 0;
}

/* s between single quotes for sh: ' as '\'' */
static void add_sh_quoted(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			strbuf_addstr(sb, "'\\''");
		else
			strbuf_addch(sb, *s);
	}
	strbuf_addch(sb, '\'');
}

static int write_script(const struct slurm_submit *s, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "#!/bin/sh\n"
	                 "# leakproof sweep %lld: one worker per array task; each claims the sweep's\n"
	                 "# pending trials from the store (LEAKPROOF_STORE, from sbatch's environment)\n"
	                 "# and runs them one at a time. exec: SLURM signals this process.\n"
	                 "exec ", (long long)s->sweep_id);
	add_sh_quoted(&sb, s->exe);
	strbuf_addf(&sb, " sweep --worker %lld", (long long)s->sweep_id);
	if (s->mem_bytes)   /* its size class: it claims the trials that fit it */
		strbuf_addf(&sb, " --worker-mem %llu", (unsigned long long)s->mem_bytes);
	strbuf_addch(&sb, '\n');
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	int rc = 0;
	if (fd < 0 || write(fd, sb.buf, sb.len) != (ssize_t)sb.len)
		rc = error_errno("cannot write the batch script '%s'", path);
	if (fd >= 0 && close(fd) < 0 && rc == 0)
		rc = error_errno("cannot write the batch script '%s'", path);
	strbuf_release(&sb);
	return rc;
}

int slurm_submit_array(const struct slurm_submit *s, int64_t *job)
{
	char script[4200], out[4200], array[64], name[64], mem[64], part[300], tlim[128], gpus[64];
	uint64_t mem_bytes = s->mem_bytes ? s->mem_bytes : s->slurm->mem_bytes;
	if (s->mem_bytes)   /* one script per size class */
		snprintf(script, sizeof(script), "%.4000s/worker-%lluM.sh", s->dir,
		         (unsigned long long)((mem_bytes + (1u << 20) - 1) >> 20));
	else
		snprintf(script, sizeof(script), "%.4000s/worker.sh", s->dir);
	snprintf(out, sizeof(out), "--output=%.4000s/worker-%%A_%%a.out", s->dir);
	if (write_script(s, script) < 0)
		return -1;
	snprintf(array, sizeof(array), "--array=0-%d", s->workers - 1);
	snprintf(name, sizeof(name), "--job-name=leakproof-sweep-%lld", (long long)s->sweep_id);
	const struct sweep_slurm *sl = s->slurm;
	const char **argv = xcalloc(16 + sl->nsbatch_args, sizeof(char *));
	size_t n = 0;
	argv[n++] = "sbatch";
	argv[n++] = "--parsable";
	argv[n++] = array;
	argv[n++] = name;
	argv[n++] = out;
	argv[n++] = "--ntasks=1";
	if (sl->partition) {
		snprintf(part, sizeof(part), "--partition=%.280s", sl->partition);
		argv[n++] = part;
	}
	if (sl->time) {
		snprintf(tlim, sizeof(tlim), "--time=%.100s", sl->time);
		argv[n++] = tlim;
	}
	if (mem_bytes) {
		/* SLURM counts memory in MiB: round up, never below what was asked */
		snprintf(mem, sizeof(mem), "--mem=%lluM", (unsigned long long)((mem_bytes + (1u << 20) - 1) >> 20));
		argv[n++] = mem;
	}
	if (sl->gpus_per_task) {
		snprintf(gpus, sizeof(gpus), "--gpus-per-task=%d", sl->gpus_per_task);
		argv[n++] = gpus;
	}
	for (size_t i = 0; i < sl->nsbatch_args; i++)
		argv[n++] = sl->sbatch_args[i];
	argv[n++] = script;
	argv[n] = NULL;

	struct strbuf env_store = STRBUF_INIT;
	strbuf_addf(&env_store, "LEAKPROOF_STORE=%s", s->store);
	const char *env[] = { strbuf_str(&env_store), NULL };
	struct strbuf got = STRBUF_INIT;
	char why[600];
	int rc = run_cmd(argv, env, CMD_TIMEOUT_MS, &got, why, sizeof(why));
	free(argv);
	strbuf_release(&env_store);
	if (rc < 0) {
		strbuf_release(&got);
		return error("cannot submit the sweep's workers: %s", why);
	}
	/* --parsable: "JOBID" or "JOBID;CLUSTER" */
	char *end;
	long long id = strtoll(strbuf_str(&got), &end, 10);
	if (id <= 0 || (*end && *end != ';' && *end != '\n')) {
		error("sbatch said '%.200s', not a job id", strbuf_str(&got));
		strbuf_release(&got);
		return -1;
	}
	strbuf_release(&got);
	*job = id;
	return 0;
}

uint64_t slurm_size_class(uint64_t mem_bytes, uint64_t max_mem_bytes, uint64_t need_bytes)
{
	const uint64_t mib = 1u << 20;
	if (!mem_bytes || max_mem_bytes <= mem_bytes)
		return mem_bytes > max_mem_bytes ? mem_bytes : max_mem_bytes;
	uint64_t c = mem_bytes;
	while (c < need_bytes && c < max_mem_bytes) {
		c = (c / 2 * 3 + mib - 1) / mib * mib;   /* x 1.5, whole MiB up */
		if (c >= max_mem_bytes)
			c = max_mem_bytes;
	}
	return c < max_mem_bytes ? c : max_mem_bytes;
}

int slurm_job_alive(int64_t job)
{
	char id[32], why[600];
	snprintf(id, sizeof(id), "%lld", (long long)job);
	const char *argv[] = { "squeue", "-h", "-r", "-j", id, "-o", "%i %t", NULL };
	struct strbuf out = STRBUF_INIT;
	int rc = run_cmd(argv, NULL, CMD_TIMEOUT_MS, &out, why, sizeof(why));
	if (rc < 0) {
		strbuf_release(&out);
		/* squeue answers "Invalid job id specified" for a job it forgot */
		return strstr(why, "Invalid job id") ? 0 : -1;
	}
	/* a line per task still queued; a task completing (CG) counts as gone */
	int alive = 0;
	for (char *line = out.buf ? out.buf : ""; *line;) {
		char *nl = strchr(line, '\n');
		char *sp = strchr(line, ' ');
		if (sp && (!nl || sp < nl) && strncmp(sp + 1, "CG", 2))
			alive = 1;
		if (!nl)
			break;
		line = nl + 1;
	}
	strbuf_release(&out);
	return alive;
}

/* Seconds of a SLURM time limit ("UNLIMITED", "MM:SS", "HH:MM:SS",
 * "D-HH:MM:SS"), or -1. */
static double limit_seconds(const char *t)
{
	if (!strncmp(t, "UNLIMITED", 9) || !strncmp(t, "INFINITE", 8) || !strncmp(t, "Partition_Limit", 15))
		return -1;
	double days = 0, f[3] = { 0, 0, 0 };
	const char *dash = strchr(t, '-'), *sp = strchr(t, ' ');
	if (dash && (!sp || dash < sp)) {
		days = strtod(t, NULL);
		t = dash + 1;
	}
	int n = sscanf(t, "%lf:%lf:%lf", &f[0], &f[1], &f[2]);
	if (n == 3)
		return days * 86400 + f[0] * 3600 + f[1] * 60 + f[2];
	if (n == 2)
		return days * 86400 + f[0] * 60 + f[1];
	if (n == 1)
		return days * 86400 + f[0] * (dash ? 3600 : 60);
	return -1;
}

enum end_cause slurm_end_cause(int64_t job)
{
	char id[32], why[600];
	snprintf(id, sizeof(id), "%lld", (long long)job);
	const char *argv[] = { "scontrol", "-o", "show", "job", id, NULL };
	struct strbuf out = STRBUF_INIT;
	if (run_cmd(argv, NULL, STOP_QUERY_MS, &out, why, sizeof(why)) < 0) {
		strbuf_release(&out);
		return CAUSE_NONE;
	}
	const char *text = strbuf_str(&out);
	const char *st = strstr(text, "JobState="), *lim = strstr(text, "TimeLimit="), *start = strstr(text, "StartTime=");
	enum end_cause cause = CAUSE_NONE;
	if (st) {
		/* a job being ended shows COMPLETING while its processes are told:
		 * its time limit is then told by the clock */
		st += 9;
		if (!strncmp(st, "TIMEOUT", 7))
			cause = CAUSE_TIME_LIMIT;
		else if (!strncmp(st, "PREEMPTED", 9))
			cause = CAUSE_PREEMPTED;
		else if (!strncmp(st, "NODE_FAIL", 9))
			cause = CAUSE_NODE_FAIL;
		else if (!strncmp(st, "OUT_OF_MEMORY", 13))
			cause = CAUSE_OOM_KILL;
		else if (!strncmp(st, "CANCELLED", 9) || !strncmp(st, "COMPLETING", 10))
			cause = CAUSE_CANCELLED;
	}
	if (cause == CAUSE_CANCELLED && lim && start) {
		struct tm tm;
		memset(&tm, 0, sizeof(tm));
		double limit = limit_seconds(lim + 10);
		if (limit > 0 && strptime(start + 10, "%Y-%m-%dT%H:%M:%S", &tm)) {
			tm.tm_isdst = -1;
			time_t t0 = mktime(&tm);
			if (t0 > 0 && difftime(time(NULL), t0) >= limit - 5)
				cause = CAUSE_TIME_LIMIT;
		}
	}
	strbuf_release(&out);
	return cause;
}

const char *const *slurm_step_prefix(void)
{
	/* one task on one node, the job's memory, quiet but for errors (the
	 * OOM line is one); --kill-on-bad-exit: the step ends with its task */
	static const char *const prefix[] = { "srun", "--ntasks=1", "--nodes=1", "--quiet", "--kill-on-bad-exit=1",
	                                      "--job-name=leakproof-trial", NULL };
	if (!getenv("SLURM_JOB_ID") || getenv("LEAKPROOF_NO_SRUN"))
		return NULL;
	const char *path = getenv("PATH");
	if (!path)
		return NULL;
	char buf[4096];
	for (const char *p = path; *p;) {
		const char *e = strchr(p, ':');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len && len < sizeof(buf) - 8) {
			snprintf(buf, sizeof(buf), "%.*s/srun", (int)len, p);
			if (access(buf, X_OK) == 0)
				return prefix;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return NULL;
}

/* Our own memory cgroup (v1 "memory" controller, else v2's), into buf. */
static bool own_cgroup(char *buf, size_t bufsz)
{
	char text[4096];
	ssize_t n = read_file_buf("/proc/self/cgroup", text, sizeof(text));
	if (n <= 0)
		return false;
	char *v2 = NULL;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		if (strstr(c1 + 1, "memory")) {
			snprintf(buf, bufsz, "%s", c2 + 1);
			return true;
		}
		if (c1[1] == '\0')
			v2 = c2 + 1;
	}
	if (v2)
		snprintf(buf, bufsz, "%s", v2);
	return v2 != NULL;
}

bool slurm_oom_evidence(const char *log, char *buf, size_t bufsz)
{
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > LOG_TAIL_BYTES ? size - LOG_TAIL_BYTES : 0;
	char *text = xmalloc(LOG_TAIL_BYTES + 1);
	ssize_t n = pread(fd, text, LOG_TAIL_BYTES, from);
	close(fd);
	if (n <= 0) {
		free(text);
		return false;
	}
	text[n] = '\0';
	/* "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.0. ..."
	 * (22.05 names itself slurmstepd-NODE); the last such line counts */
	char *line = NULL;
	for (char *p = text; (p = strstr(p, "oom-kill event")); p++) {
		char *start = p;
		while (start > text && start[-1] != '\n')
			start--;
		if (!strncmp(start, "slurmstepd", 10) && strstr(start, "Detected "))
			line = start;
	}
	if (!line) {
		free(text);
		return false;
	}
	char *nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	/* the line names the step: its cgroup is our step's sibling */
	char cg[1024] = "", step[64] = "";
	const char *sid = strstr(line, "StepId=");
	if (sid) {
		const char *dot = strchr(sid, '.');
		size_t k = 0;
		for (const char *q = dot ? dot + 1 : ""; *q && *q != '.' && *q != ' ' && k + 1 < sizeof(step); q++)
			step[k++] = *q;
		step[k] = '\0';
	}
	if (step[0] && own_cgroup(cg, sizeof(cg))) {
		char *at = strstr(cg, "/step_");   /* .../job_J/step_batch[/task_0] */
		if (at)
			snprintf(at, sizeof(cg) - (size_t)(at - cg), "/step_%s", step);
		else
			cg[0] = '\0';
	}
	if (cg[0] && step[0])
		snprintf(buf, bufsz, "%.600s (memory cgroup %.300s)", line, cg);
	else
		snprintf(buf, bufsz, "%.900s", line);
	free(text);
	return true;
}

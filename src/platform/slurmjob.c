/*
 * slurmjob.c — a running SLURM job on this node and its cgroup, for
 * `leakproof attach --slurm-job` (slurmjob.h). SLURM is asked through its
 * own commands, run by slurm_run() (sweep/slurm.c's way too) through
 * platform/spawn.h with a time bound and a cap on what they print, never
 * through a shell:
 *
 *   scontrol -o show job SPEC   what the job is: its state, user, nodes;
 *   scontrol listpids JOBID     its processes on this node (this node's
 *                               slurmd answers), step by step;
 *
 * and the cgroup is cut from the path one of those processes is in
 * (platform/cgroup.c cgroup_of_process: the v1 memory controller's, else
 * v2's), at its `job_ID` component, or `job_ID/step_STEP` for a step.
 * Reading the layout from a process of the job, rather than guessing it,
 * finds it wherever the site's SLURM puts it: v1's
 * `<memory>/slurm[_NODE]/uid_U/job_J/step_S/task_T`, v2's
 * `.../system.slice/slurmstepd.scope/job_J/step_S/user/task_T`, a
 * CgroupMountpoint of its own.
 */
#include "platform/slurmjob.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/proc.h"
#include "platform/spawn.h"
#include "util/util.h"

#define CMD_TIMEOUT_MS 30000
#define CMD_OUT_CAP (1u << 20)

/* ---- parsers ------------------------------------------------------------- */

static bool all_digits(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

int slurm_parse_spec(const char *spec, char *job, size_t jobsz, char *step, size_t stepsz)
{
	const char *dot = strchr(spec, '.');
	size_t jlen = dot ? (size_t)(dot - spec) : strlen(spec);
	const char *us = memchr(spec, '_', jlen);
	if (!(us ? all_digits(spec, (size_t)(us - spec)) && all_digits(us + 1, jlen - (size_t)(us - spec) - 1)
	         : all_digits(spec, jlen)) || jlen >= jobsz || jlen > 24)
		return -1;
	const char *st = dot ? dot + 1 : "";
	if (dot && !all_digits(st, strlen(st)) && strcmp(st, "batch") && strcmp(st, "extern") &&
	    strcmp(st, "interactive"))
		return -1;
	if (strlen(st) >= stepsz || strlen(st) > 16)
		return -1;
	memcpy(job, spec, jlen);
	job[jlen] = '\0';
	strcpy(step, st);
	return 0;
}

/* The value of " KEY=" in the record rec (up to its end, end): up to the
 * next space, or for keys whose value may hold spaces (Command, WorkDir)
 * up to the next " Word=". */
static void field(const char *rec, const char *end, const char *key, bool spaces, char *out, size_t outsz)
{
	size_t klen = strlen(key);
	out[0] = '\0';
	for (const char *p = rec; p < end; p++) {
		if ((p != rec && p[-1] != ' ') || (size_t)(end - p) <= klen || strncmp(p, key, klen) || p[klen] != '=')
			continue;
		const char *v = p + klen + 1, *e = v;
		while (e < end && *e != ' ' && *e != '\n')
			e++;
		while (spaces && e < end && *e == ' ') {   /* does a "Word=" follow? */
			const char *w = e + 1;
			while (w < end && isalnum((unsigned char)*w))
				w++;
			if (w < end && *w == '=' && w > e + 1)
				break;
			for (e = w; e < end && *e != ' ' && *e != '\n';)
				e++;
		}
		size_t n = (size_t)(e - v) < outsz - 1 ? (size_t)(e - v) : outsz - 1;
		memcpy(out, v, n);
		out[n] = '\0';
		return;
	}
}

int slurm_parse_show_job(const char *text, struct slurm_job *out)
{
	const char *nl = strchr(text, '\n');
	const char *end = nl ? nl : text + strlen(text);
	char uid[64];
	out->records = 0;
	for (const char *p = text; *p;) {
		const char *e = strchr(p, '\n');
		if (!strncmp(p, "JobId=", 6))
			out->records++;
		if (!e)
			break;
		p = e + 1;
	}
	field(text, end, "JobId", false, out->job_id, sizeof(out->job_id));
	if (!out->job_id[0])
		return -1;
	field(text, end, "ArrayJobId", false, out->array_job_id, sizeof(out->array_job_id));
	field(text, end, "ArrayTaskId", false, out->array_task_id, sizeof(out->array_task_id));
	field(text, end, "JobState", false, out->state, sizeof(out->state));
	field(text, end, "JobName", false, out->name, sizeof(out->name));
	field(text, end, "NodeList", false, out->nodes, sizeof(out->nodes));
	field(text, end, "Command", true, out->command, sizeof(out->command));
	field(text, end, "WorkDir", true, out->workdir, sizeof(out->workdir));
	if (!strcmp(out->command, "(null)"))
		out->command[0] = '\0';
	if (!strcmp(out->nodes, "(null)"))
		out->nodes[0] = '\0';
	field(text, end, "UserId", false, uid, sizeof(uid));   /* "alice(1001)" */
	char *paren = strchr(uid, '(');
	out->uid = paren ? strtol(paren + 1, NULL, 10) : -1;
	if (paren)
		*paren = '\0';
	snprintf(out->user, sizeof(out->user), "%s", uid);
	return 0;
}

size_t slurm_parse_listpids(const char *text, const char *job_id, const char *step, pid_t *pids, size_t cap)
{
	size_t n = 0;
	for (const char *p = text; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char line[256], jid[64], sid[64];
		long pid;
		if (len < sizeof(line)) {
			memcpy(line, p, len);
			line[len] = '\0';
			if (sscanf(line, "%ld %63s %63s", &pid, jid, sid) == 3 && pid > 0 && pid <= 0x7fffffff &&
			    !strcmp(jid, job_id) && (!*step || !strcmp(sid, step)) && n < cap)
				pids[n++] = (pid_t)pid;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return n;
}

int slurm_cgroup_cut(const char *dir, const char *job_id, const char *step, char *out, size_t outsz)
{
	char want[80];
	snprintf(want, sizeof(want), "/job_%s", job_id);
	size_t wlen = strlen(want);
	for (const char *p = strstr(dir, want); p; p = strstr(p + 1, want)) {
		const char *after = p + wlen;
		if (*after != '/' && *after)
			continue;   /* job_12 is not job_123 */
		if (*step) {
			char s[80];
			snprintf(s, sizeof(s), "/step_%s", step);
			size_t slen = strlen(s);
			if (strncmp(after, s, slen) || (after[slen] != '/' && after[slen]))
				return -1;
			after += slen;
		}
		size_t n = (size_t)(after - dir);
		if (n >= outsz)
			return -1;
		memcpy(out, dir, n);
		out[n] = '\0';
		return 0;
	}
	return -1;
}

/* ---- asking SLURM ---------------------------------------------------------- */

int slurm_run(const char *const *argv, const char *const *env, int timeout_ms, struct spawn_capture *cap,
              char *why, size_t whysz)
{
	struct spawn sp = { .argv = argv, .path_lookup = true, .env = env, .in.how = SPAWN_NULL };
	cap->timeout_ms = timeout_ms;
	cap->out_cap_bytes = CMD_OUT_CAP;
	cap->err_tail_bytes = 2048;
	int rc = spawn_capture(&sp, cap);
	if (rc == SPAWN_NOT_FOUND)
		snprintf(why, whysz, "%s: command not found (is SLURM installed here?)", argv[0]);
	else if (rc != 0)
		snprintf(why, whysz, "cannot run %s: %s", argv[0], strerror(errno));
	else if (cap->timed_out || cap->too_big)
		snprintf(why, whysz, "%s %s", argv[0], cap->timed_out ? "did not answer in time" : "printed too much");
	else
		return WIFEXITED(cap->wait_status) && !WEXITSTATUS(cap->wait_status) ? 0 : 1;
	return -1;
}

/* Run argv; its stdout into out. 0; -1 with why when it failed (its
 * stderr's last line, else its stdout's); -2 with why when it could not be
 * run (not found, no answer in time). */
static int run_cmd(const char *const *argv, struct strbuf *out, char *why, size_t whysz)
{
	struct spawn_capture cap = SPAWN_CAPTURE_INIT;
	int rc = slurm_run(argv, NULL, CMD_TIMEOUT_MS, &cap, why, whysz);
	if (rc > 0) {
		struct strbuf *said = cap.err.len ? &cap.err : &cap.out;   /* "Job 3_7 not found": stdout */
		strbuf_trim_end(said, "\n ");
		const char *e = strbuf_str(said), *last = strrchr(e, '\n');
		snprintf(why, whysz, "%.300s", last ? last + 1 : *e ? e : "failed");
	}
	strbuf_addstr(out, strbuf_str(&cap.out));
	strbuf_release(&cap.out);
	strbuf_release(&cap.err);
	return rc > 0 ? -1 : rc < 0 ? -2 : 0;
}

/* Whether this host is one of nodes (scontrol show hostnames expands
 * "node[01-04]"); true when it cannot be told. */
static bool runs_here(const char *nodes, char *host, size_t hostsz)
{
	char why[400];
	struct strbuf out = STRBUF_INIT;
	const char *argv[] = { "scontrol", "show", "hostnames", nodes, NULL };
	host[0] = '\0';
	gethostname(host, hostsz - 1);
	host[hostsz - 1] = '\0';
	char *dot = strchr(host, '.');
	if (dot)
		*dot = '\0';
	bool here = true;
	if (run_cmd(argv, &out, why, sizeof(why)) == 0 && out.len) {
		here = false;
		for (char *line = out.buf; line && *line;) {
			char *nl = strchr(line, '\n');
			size_t len = nl ? (size_t)(nl - line) : strlen(line);
			if (len == strlen(host) && !strncmp(line, host, len))
				here = true;
			line = nl ? nl + 1 : NULL;
		}
	}
	strbuf_release(&out);
	return here;
}

enum slurm_find slurm_job_find(const char *spec, struct slurm_job *out, char *why, size_t whysz)
{
	char job[32], step[32], err[400];
	memset(out, 0, sizeof(*out));
	out->uid = -1;
	if (slurm_parse_spec(spec, job, sizeof(job), step, sizeof(step)) < 0) {
		snprintf(why, whysz, "'%s' is not a SLURM job id (JOBID, JOBID.STEP, ARRAYID_TASK; a step is a "
		         "number, batch or extern)", spec);
		return SLURM_FIND_REFUSED;
	}
	snprintf(out->step, sizeof(out->step), "%s", step);

	struct strbuf text = STRBUF_INIT;
	const char *show[] = { "scontrol", "-o", "show", "job", job, NULL };
	int rc = run_cmd(show, &text, err, sizeof(err));
	enum slurm_find ret = SLURM_FIND_REFUSED;
	if (rc == -1 && (strstr(err, "Invalid job id") || (!strncmp(err, "Job ", 4) && strstr(err, " not found")))) {
		snprintf(why, whysz, "no SLURM job '%s' (scontrol: %s)", job, err);
		goto out;
	}
	if (rc < 0 || slurm_parse_show_job(strbuf_str(&text), out) < 0) {
		snprintf(why, whysz, "cannot ask SLURM about job '%s': %s%s", job, rc == -1 ? "scontrol: " : "",
		         rc < 0 ? err : "scontrol said no JobId");
		ret = SLURM_FIND_FAILED;
		goto out;
	}
	if (out->records > 1) {
		snprintf(why, whysz, "SLURM job '%s' is a job array of %d tasks: name one, as %s_TASK", job,
		         out->records, job);
		goto out;
	}
	if (strcmp(out->state, "RUNNING")) {
		snprintf(why, whysz, "SLURM job %s is %s, not running: %s", job, out->state,
		         !strcmp(out->state, "PENDING") || !strcmp(out->state, "CONFIGURING")
		                 ? "nothing to watch yet"
		                 : !strcmp(out->state, "SUSPENDED") ? "attach once it runs again" : "it has ended");
		goto out;
	}

	strbuf_reset(&text);
	const char *listpids[] = { "scontrol", "listpids", out->job_id, NULL };
	rc = run_cmd(listpids, &text, err, sizeof(err));
	out->npids = rc < 0 ? 0 : slurm_parse_listpids(strbuf_str(&text), out->job_id, step, out->pids,
	                                              SLURM_JOB_PIDS_MAX);
	if (!out->npids) {
		char host[256];
		bool mine = out->uid < 0 || (uid_t)out->uid == geteuid() || geteuid() == 0;
		if (!runs_here(out->nodes, host, sizeof(host)))
			snprintf(why, whysz, "SLURM job %s runs on %s, not on this node (%s): attach there", job,
			         out->nodes[0] ? out->nodes : "another node", host);
		else if (*step)
			snprintf(why, whysz, "SLURM job %s has no step '%s' running on this node%s%s", out->job_id, step,
			         rc < 0 ? " (scontrol listpids: " : "", rc < 0 ? err : "");
		else if (!mine) {
			snprintf(why, whysz, "SLURM job %s is user %s's (uid %ld), whose processes SLURM does not list to "
			         "you%s%s%s: watching it needs their rights, or root", job, out->user, out->uid,
			         rc < 0 ? " (" : "", rc < 0 ? err : "", rc < 0 ? ")" : "");
			ret = SLURM_FIND_DENIED;
		} else
			snprintf(why, whysz, "SLURM lists no process of job %s on this node%s%s%s", job,
			         rc < 0 ? " (scontrol listpids: " : "", rc < 0 ? err : "", rc < 0 ? ")" : "");
		goto out;
	}

	/* the rights: the sampler reads its processes' memory maps */
	char path[64];
	int e = proc_maps_readable(NULL, out->pids[0], path, sizeof(path));
	if (e) {
		if (e == EACCES || e == EPERM) {
			snprintf(why, whysz, "SLURM job %s is user %s's (uid %ld): cannot read '%s' (%s): watching it needs "
			         "the rights to read its processes' memory maps (its user, or root)", job, out->user,
			         out->uid, path, strerror(e));
			ret = SLURM_FIND_DENIED;
		} else {
			snprintf(why, whysz, "SLURM job %s: its process %d is gone (%s): has the job just ended?", job,
			         (int)out->pids[0], strerror(e));
		}
		goto out;
	}

	struct job_cgroup where;
	char cgwhy[300];
	if (cgroup_of_process(out->pids[0], &where, cgwhy, sizeof(cgwhy)) < 0 ||
	    slurm_cgroup_cut(where.dir, out->job_id, step, out->cg.dir, sizeof(out->cg.dir)) < 0) {
		snprintf(why, whysz, "SLURM job %s%s%s has no cgroup of its own on this node (its process %d is in "
		         "'%.200s': SLURM's proctrack/cgroup and task/cgroup are not in use here?): watch its processes "
		         "by their tree instead, `leakproof attach %d` (the first of what `scontrol listpids %s` lists)",
		         out->job_id, *step ? "." : "", step, (int)out->pids[0], where.dir[0] ? where.dir : cgwhy,
		         (int)out->pids[0], out->job_id);
		goto out;
	}
	out->cg.version = where.version;
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/%s", out->cg.dir, where.version == 2 ? "memory.current" : "memory.usage_in_bytes");
	out->cg.has_memory = access(probe, R_OK) == 0;
	snprintf(probe, sizeof(probe), "%s/cgroup.procs", out->cg.dir);
	if (access(probe, R_OK) < 0) {
		snprintf(why, whysz, "SLURM job %s: cannot read '%.300s': %s", job, probe, strerror(errno));
		ret = errno == EACCES ? SLURM_FIND_DENIED : SLURM_FIND_REFUSED;
		goto out;
	}
	ret = SLURM_FIND_OK;
	why[0] = '\0';
out:
	strbuf_release(&text);
	return ret;
}

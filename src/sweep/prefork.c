/*
 * prefork.c — the template process of warm starts and the stub that asks
 * it to fork (prefork.h). Both are Python, in the client's directory:
 * leakproof/_prefork.py (the template, run as a script with the modules as
 * arguments) and leakproof/_prefork_stub.py (which the template copies
 * beside its socket as stub.py). This file starts the template through
 * platform/spawn.h, reads its "ready SOCKET" line, and writes each trial's
 * job command line.
 */
#include "sweep/prefork.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/spawn.h"
#include "util/util.h"

struct prefork {
	pid_t pid;             /* the template; 0 once gone */
	char *python;
	char *socket;          /* its unix socket, DIR/sock */
	char *stub;            /* DIR/stub.py */
};

/* Whether the basename of prog names a Python interpreter. */
static bool is_python(const char *prog)
{
	const char *base = strrchr(prog, '/');
	base = base ? base + 1 : prog;
	return !strncmp(base, "python", 6);
}

struct prefork *prefork_start(const char *python, const char *client_dir, char *const *modules, int timeout_ms,
                              char *why, size_t whysz)
{
	why[0] = '\0';
	if (!is_python(python)) {
		snprintf(why, whysz, "the command does not start Python ('%s')", python);
		return NULL;
	}
	if (!client_dir) {
		snprintf(why, whysz, "leakproof's Python client (its leakproof/_prefork.py) is not beside the "
		         "binary nor where it was installed");
		return NULL;
	}
	struct strbuf script = STRBUF_INIT;
	strbuf_addf(&script, "%s/leakproof/_prefork.py", client_dir);
	if (access(strbuf_str(&script), R_OK) != 0) {
		snprintf(why, whysz, "cannot read '%s': %s", strbuf_str(&script), strerror(errno));
		strbuf_release(&script);
		return NULL;
	}
	size_t n = 0;
	while (modules[n])
		n++;
	const char **argv = xcalloc(n + 5, sizeof(*argv));
	size_t k = 0;
	argv[k++] = python;
	argv[k++] = strbuf_str(&script);
	for (size_t i = 0; i < n; i++)
		argv[k++] = modules[i];
	argv[k] = NULL;
	struct spawn sp = {
		.argv = argv, .path_lookup = true, .in.how = SPAWN_NULL, .out.how = SPAWN_PIPE,
		.reset_signals = true, .new_group = true, .death_signal = SIGTERM,
	};
	int rc = spawn_start(&sp);
	free(argv);
	strbuf_release(&script);
	if (rc) {
		snprintf(why, whysz, "cannot run '%s': %s", python, strerror(errno));
		return NULL;
	}
	/* its first line: "ready SOCKET" or "refuse: WHY" */
	char line[4096];
	size_t len = 0;
	int64_t end = mono_ns() + (int64_t)timeout_ms * 1000000;
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
		int64_t left = (end - mono_ns()) / 1000000;
		struct pollfd pfd = { .fd = sp.out.fd, .events = POLLIN };
		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			snprintf(why, whysz, "the template did not import %s within %d s", modules[0],
			         timeout_ms / 1000);
			break;
		}
		ssize_t r = read(sp.out.fd, line + len, sizeof(line) - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(sp.out.fd);
	line[len] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (!strncmp(line, "ready /", 7)) {
		struct prefork *p = xcalloc(1, sizeof(*p));
		p->pid = sp.pid;
		p->python = xstrdup(python);
		p->socket = xstrdup(line + 6);
		struct strbuf sb = STRBUF_INIT;
		strbuf_add(&sb, p->socket, (size_t)(strrchr(p->socket, '/') - p->socket));
		strbuf_addstr(&sb, "/stub.py");
		p->stub = strbuf_detach(&sb, NULL);    /* the template wrote it */
		return p;
	}
	if (!strncmp(line, "refuse: ", 8))
		snprintf(why, whysz, "%s", line + 8);
	else if (!len && !why[0])
		snprintf(why, whysz, "the template ended before it was ready (its message is above)");
	kill(sp.pid, SIGKILL);
	waitpid(sp.pid, NULL, 0);
	return NULL;
}

char **prefork_argv(const struct prefork *p, char *const *argv)
{
	size_t n = 0;
	while (argv[n])
		n++;
	char **out = xcalloc(n + 7, sizeof(*out));
	size_t k = 0;
	out[k++] = p->python;
	out[k++] = "-E";       /* the stub: no PYTHON* variables, no site: fast */
	out[k++] = "-S";
	out[k++] = p->stub;
	for (size_t i = 0; i < n; i++)
		out[k++] = argv[i];
	out[k] = NULL;
	return out;
}

bool prefork_reaped(struct prefork *p, pid_t pid, int wait_status)
{
	(void)wait_status;
	if (!p || pid <= 0 || pid != p->pid)
		return false;
	p->pid = 0;
	return true;
}

bool prefork_gone(const struct prefork *p)
{
	siginfo_t si = { 0 };
	if (!p || p->pid <= 0)
		return true;
	return waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == p->pid;
}

void prefork_stop(struct prefork *p)
{
	if (!p)
		return;
	if (p->pid > 0) {
		kill(p->pid, SIGTERM);
		int64_t end = mono_ns() + 5000000000LL;
		while (waitpid(p->pid, NULL, WNOHANG) == 0) {
			if (mono_ns() > end) {
				kill(p->pid, SIGKILL);
				waitpid(p->pid, NULL, 0);
				break;
			}
			usleep(10000);
		}
	}
	/* the template removes them as it ends; one killed (SIGKILL, the OOM
	 * killer) left them in $TMPDIR */
	unlink(p->socket);
	unlink(p->stub);
	*strrchr(p->stub, '/') = '\0';
	rmdir(p->stub);
	free(p->python);
	free(p->socket);
	free(p->stub);
	free(p);
}

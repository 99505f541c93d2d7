/*
 * spawn.h — the one way leakproof starts a child process, in the manner of
 * git's run-command.h: the supervisor's job, the sweep runner's trials and
 * the `optuna` commands all start through here.
 *
 * A struct spawn describes the child (argv, an environment overlay on the
 * inherited environment, working directory, what its stdin/stdout/stderr
 * are, descriptors it keeps, its own process group, a signal for when we
 * die, a small hook run in the child before exec); spawn_start() forks and
 * execs it and tells the caller, through a close-on-exec pipe, whether the
 * exec happened — "not found" (127) and "cannot execute" (126) are told
 * apart in the parent, and the child never prints. spawn_capture() runs a
 * child to its end with stdout and stderr captured, under a byte cap and a
 * time limit. spawn_signalfd() turns a set of signals into a descriptor
 * for a poll loop. See docs/internals/spawn.md.
 *
 * Times are milliseconds, sizes bytes. Nothing here prints.
 */
#ifndef LP_PLATFORM_SPAWN_H
#define LP_PLATFORM_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/util.h"

/* What spawn_start() returns besides 0 (started) and -1 (see sp->why). */
#define SPAWN_CANNOT_EXEC 126   /* the program exists but exec failed */
#define SPAWN_NOT_FOUND 127     /* exec failed with ENOENT */

/* One of the child's standard descriptors. */
enum spawn_stdio {
	SPAWN_INHERIT = 0,   /* ours */
	SPAWN_NULL,          /* /dev/null */
	SPAWN_PIPE,          /* a new pipe; its parent end comes back in fd */
	SPAWN_FD,            /* fd, given by the caller (who keeps owning it) */
};

struct spawn_fd {
	enum spawn_stdio how;
	int fd;              /* SPAWN_FD: in; SPAWN_PIPE: out, the parent's end
	                        (close-on-exec, owned by the caller after start) */
};

/*
 * A child to start. Zero-initialised is a valid description apart from
 * argv: everything inherited, no new group, no death signal, the empty
 * signal mask. Only the fields marked "out" are written by spawn_*().
 */
struct spawn {
	const char *const *argv;   /* NULL-terminated; argv[0] is the program */
	bool path_lookup;          /* search $PATH for argv[0] (execvpe), else execve */
	/* The environment: ours, overlaid with these (NULL-terminated, may be
	 * NULL): "NAME=VALUE" sets NAME, "NAME" unsets it, "PREFIX*" unsets
	 * every name that starts with PREFIX. Set names are appended in this
	 * order after the inherited ones that stay. */
	const char *const *env;
	const char *dir;           /* working directory; NULL: ours */
	struct spawn_fd in, out, err;
	const int *keep_fds;       /* descriptors the child keeps open (their */
	size_t nkeep;              /* close-on-exec flag is cleared in the child) */
	bool new_group;            /* its own process group (setpgid on both sides) */
	/* Its own session (setsid(), so also its own process group; new_group
	 * is then not needed) with ctty, a pseudo-terminal's slave end (see
	 * spawn_openpty()), as its controlling terminal; -1 or 0: none */
	bool new_session;
	int ctty;
	int death_signal;          /* sent to it when we die (PR_SET_PDEATHSIG); 0: none */
	const sigset_t *sigmask;   /* its signal mask; NULL: the empty set */
	/* SIGINT, SIGTERM, SIGQUIT, SIGHUP and SIGCHLD back to their default
	 * actions (SIGPIPE always is): for a child that must start with the
	 * defaults whatever we ignore */
	bool reset_signals;
	/* Run in the child after setpgid, before anything else: only
	 * async-signal-safe calls (joining a cgroup, setrlimit). */
	void (*child_hook)(void *data);
	void *hook_data;
	/* Instead of exec: the child runs this (after the hook, with its
	 * descriptors set up, argv unused) and _exits 0 when it returns; the
	 * parent sees it started. Whatever it calls is the caller's concern
	 * (after fork: async-signal-safe calls only). */
	void (*child_main)(void *data);

	pid_t pid;                 /* out: the child, once started */
	const char *why;           /* out: after -1, the call that failed ("fork",
	                              "pipe", "chdir", ...; a static string) */
};

/*
 * Start the child. Returns 0 with sp->pid set (the caller reaps it);
 * SPAWN_NOT_FOUND or SPAWN_CANNOT_EXEC when its exec failed (errno is the
 * exec's, the child is reaped, no pipe is left open); or -1 when it could
 * not be started at all (errno set, sp->why names the call).
 */
int spawn_start(struct spawn *sp);

/* The exit status a command line tool gives for a child that did not
 * start: SPAWN_NOT_FOUND for ENOENT, else SPAWN_CANNOT_EXEC. */
int spawn_exec_status(int err);

/* The terminal on our stdin to process group pgrp (tcsetpgrp), from its
 * foreground or its background (SIGTTOU blocked meanwhile); whether it
 * took is not told. Async-signal-safe. */
void spawn_give_terminal(pid_t pgrp);

/* What spawn_capture() is asked for and what it saw. */
struct spawn_capture {
	int timeout_ms;            /* in: > 0; after it the child is killed */
	size_t out_cap_bytes;      /* in: more stdout than this: the child is killed */
	size_t err_tail_bytes;     /* in: of stderr the last this many bytes are
	                              kept (up to twice as many at times) */
	struct strbuf out, err;    /* out: what it printed; the caller releases them */
	int wait_status;           /* out: from waitpid(), when it ended by itself */
	bool timed_out, too_big;   /* out: killed (SIGKILL, to its group if it has one) */
};
#define SPAWN_CAPTURE_INIT { 0, 0, 0, STRBUF_INIT, STRBUF_INIT, 0, false, false }

/*
 * Run sp to its end with stdout and stderr captured into cap (sp->out and
 * sp->err are made pipes; sp->in should not be one, nothing would write it). Returns what spawn_start() returns when it does
 * not start; 0 when it ran and was reaped: ended by itself (wait_status)
 * or killed (timed_out, too_big); -1 when waiting failed (errno set,
 * sp->why "poll" or "waitpid"; the child is killed and reaped).
 */
int spawn_capture(struct spawn *sp, struct spawn_capture *cap);

/*
 * A new pseudo-terminal: *master (non-blocking) and *slave, both
 * close-on-exec and above descriptor 2, the caller's to close. The slave
 * starts with the modes of term and the size of win where they are not
 * NULL. 0, or -1 with errno (nothing left open).
 */
struct termios;
struct winsize;
int spawn_openpty(int *master /* out */, int *slave /* out */, const struct termios *term,
                  const struct winsize *win);

/*
 * Block the signals in sigs (a list ended by 0) and return a signalfd that
 * reads them (non-blocking, close-on-exec; the caller closes it). The mask
 * before goes to *old unless old is NULL. -1 with errno on failure.
 */
int spawn_signalfd(const int *sigs, sigset_t *old);

#endif

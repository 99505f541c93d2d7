/*
 * cause.h — why a job's process ended, named from a fixed vocabulary, with
 * a one-line piece of evidence for the report.
 *
 * Two parts, both pure (no I/O, no globals, no heap):
 *   - cause_scan: fed every line of the job's stdout and stderr, it keeps
 *     the last line that looked like a GPU out-of-memory error and the last
 *     that looked like a host allocation failure (plain substring search
 *     behind a cheap prefilter; docs/internals/causes.md lists the messages);
 *   - cause_classify: from how the process ended (wait status), what
 *     leakproof itself did to it, the cgroup's OOM-kill counter and the
 *     scan, the one cause that best explains the end.
 *
 * Precedence in cause_classify, first rule that applies wins ("non-zero
 * end" = any end but exit status 0; a signal is a non-zero end):
 *   1. budget-kill      budget_killed and a non-zero end. Leakproof knows
 *                       for certain it sent the SIGKILL, and that kill
 *                       explains whatever the job printed after. SIGKILL
 *                       cannot be caught, so a process that still exited 0
 *                       was gone before the kill landed: rule 4 names it.
 *   2. oom-kill         oom_kills > 0 and a non-zero end. The kernel's own
 *                       counter is hard evidence and the OOM killer's
 *                       SIGKILL prints nothing; it also covers a worker or
 *                       shell child killed under the main process (which
 *                       then exits 1, or 137). With exit 0 the job survived
 *                       the kill (a worker was restarted): rule 4.
 *   3. stop-requested   stop_requested, whatever the status: leakproof
 *                       asked it to end (soft limit, schedule), so ending
 *                       is the expected outcome, clean (exit 0) or not; the
 *                       status is kept in the evidence.
 *   4. exit             exit status 0, even after an out-of-memory line:
 *                       the job caught it and went on (batch-size search).
 *   5. cuda-oom or      the later (by line order) of the last GPU OOM line
 *      host-alloc-fail  and the last host allocation failure line. These
 *                       come before crash and signal because a framework
 *                       often dies of them by abort() (an uncaught
 *                       std::bad_alloc ends in SIGABRT) or its launcher
 *                       kills the other ranks with SIGTERM.
 *   6. crash            SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE, or a core
 *                       was dumped.
 *   7. signal           any other terminating signal.
 *   8. error            a non-zero exit status and nothing above.
 */
#ifndef LP_CAUSE_H
#define LP_CAUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/end_cause.h"

/* Lines kept as evidence: at most this many bytes plus the NUL. */
#define CAUSE_LINE_MAX 300
/* Bytes of one line that are scanned; the rest of a longer line is not. */
#define CAUSE_SCAN_MAX 4096

enum cause_class { CAUSE_CLASS_CUDA_OOM, CAUSE_CLASS_HOST_ALLOC, CAUSE_CLASS_COUNT };

struct cause_seen {
	uint64_t line_no;              /* 1-based number of the line; 0 = none seen */
	char text[CAUSE_LINE_MAX + 1]; /* the line, printable ASCII, NUL-terminated */
};

/* Fixed size, no heap: embed it, copy it, or let it go out of scope. */
struct cause_scan {
	uint64_t lines;                         /* lines fed so far */
	struct cause_seen seen[CAUSE_CLASS_COUNT];
};

void cause_scan_init(struct cause_scan *cs);
/*
 * One line of output, without its end of line; any bytes (NULs, invalid
 * UTF-8, ANSI colour codes, which are skipped before matching). At most
 * CAUSE_SCAN_MAX bytes of it are looked at. A matching line replaces the
 * one kept for its class: it is stored with escape sequences removed,
 * leading and trailing blanks trimmed, other bytes outside printable ASCII
 * as '?', and cut to CAUSE_LINE_MAX around the match with "..." marking
 * each cut.
 */
void cause_scan_line(struct cause_scan *cs, const char *line, size_t len);
/*
 * Where in s[0..n) a message may begin to show: the offset of the first
 * place where the end of a key ("ory", "loc", "aus" in any case) is, or n
 * when there is none. A line without such a place holds no message, so a
 * caller scanning a block of many lines passes cause_scan_line() only the
 * lines that hold one. Several bytes at a time; any bytes.
 */
size_t cause_scan_skip(const char *s, size_t n);

struct cause_input {
	bool exited;            /* exited normally (then exit_code is valid) */
	int exit_code;
	int signal;             /* the terminating signal when !exited */
	bool core_dumped;
	uint64_t oom_kills;     /* OOM kills the kernel counted in the job's cgroup during this process's life (delta) */
	bool budget_killed;     /* leakproof SIGKILLed it for exceeding a polled budget */
	bool stop_requested;    /* leakproof had sent it the stop signal before it ended */
	const struct cause_scan *scan;  /* may be NULL */
};

/*
 * The cause, by the precedence at the top of this file. When evidence is
 * not NULL and evidence_len > 0 it receives a NUL-terminated printable
 * one-liner (cut to fit), e.g. "killed by SIGSEGV (core dumped)",
 * "oom_kill count rose by 1; killed by SIGKILL", "exited 1", or the
 * matching output line for cuda-oom and host-alloc-fail.
 */
enum end_cause cause_classify(const struct cause_input *in, char *evidence /* out */, size_t evidence_len);

#endif

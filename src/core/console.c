/*
 * console.c — what the supervisor writes on the terminal: the job's own
 * output passed through (write_all), the live status line on stderr (step,
 * steps per second, memory under the measure, its growth per step over the
 * last LIVE_RING steps, processes), and leakproof's own lines, drawn clear
 * of the status line. Part of the supervisor (supervise-int.h).
 *
 * Memory is bytes; times are CLOCK_MONOTONIC nanoseconds.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/analyze.h"
#include "core/supervise-int.h"

/* All of p to fd, waiting out a full pipe; -1 when fd is gone. */
int sv_write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pfd = { .fd = fd, .events = POLLOUT };
				poll(&pfd, 1, 100);
				continue;
			}
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Erase the status line, before anything else is written. */
void sv_status_clear(struct sv *sv)
{
	if (sv->status_drawn) {
		sv_write_all(STDERR_FILENO, "\r\033[K", 4);
		sv->status_drawn = false;
	}
}

/* Redraw the status line, at most every STATUS_EVERY_NS, on a terminal. */
void sv_status_draw(struct sv *sv, int64_t now_ns)
{
	char line[256], mem[32], growth[32];
	int n;

	if (!sv->tty || !sv->have_last || now_ns - sv->last_status_ns < STATUS_EVERY_NS)
		return;
	sv->last_status_ns = now_ns;
	double v = mem_sample_value(&sv->last, sv->o->measure);
	fmt_bytes(mem, sizeof(mem), v < 0 ? 0 : v);
	if (sv->steps > 0) {
		double rate = 0;
		double el = sv_now_t(sv, now_ns) - sv->first_step_t;
		if (sv->steps > 1 && el > 0)
			rate = (double)(sv->steps - 1) / el;
		strcpy(growth, "?");
		if (sv->ring_n >= 8) {
			double lo, hi, slope = theil_sen(sv->ring_x, sv->ring_y, sv->ring_n, &lo, &hi);
			fmt_bytes(growth, sizeof(growth), slope);
		}
		n = snprintf(line, sizeof(line), "[leakproof] step %lld | %.2f steps/s | %s %s | %s%s/step | %d procs",
		             (long long)sv->last_step, rate, measure_name(sv->o->measure), mem,
		             growth[0] == '-' || growth[0] == '?' ? "" : "+", growth, sv->last.nprocs);
	} else {
		n = snprintf(line, sizeof(line), "[leakproof] %.0f s | %s %s | %d procs | no steps yet",
		             sv_now_t(sv, now_ns), measure_name(sv->o->measure), mem, sv->last.nprocs);
	}
	struct winsize ws;
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10 && n >= ws.ws_col)
		n = ws.ws_col - 1;
	if (n < 0)
		return;
	sv_write_all(STDERR_FILENO, "\r\033[K", 4);
	sv_write_all(STDERR_FILENO, line, (size_t)n);
	sv->status_drawn = true;
}

/* A line from leakproof on stderr, clear of the status line. --quiet
 * silences the summary, not these: they say what leakproof did to the job. */
void sv_say(struct sv *sv, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	sv_status_clear(sv);
	fprintf(stderr, "leakproof: %s\n", line);
}

/*
 * prefork.h — warm starts for a sweep's Python trials (`prefork: [torch,
 * numpy]` in the sweep file, or --prefork MODULES): a template process
 * imports those modules once; each trial's job is a small stub that asks
 * the template, over a unix socket, to fork; the fork runs the trial's
 * script as __main__ with the stub's argv, environment, working directory
 * and descriptors (passed with SCM_RIGHTS: stdin, stdout, stderr and the
 * supervisor's channel), in the stub's process group and cgroups, and the
 * stub ends as the fork ended (the same exit status or signal). The
 * supervisor (`leakproof run`) supervises the stub as the job; the fork is
 * in the job's cgroup, so the sampler, the budget, OOM kills and the
 * signals to the job's group reach it; SIGINT, SIGTERM, SIGHUP, SIGUSR1
 * and SIGUSR2 sent to the stub's pid alone are forwarded to it.
 * docs/internals/prefork.md has the protocol, the signals and the safety
 * rules.
 *
 * Safety: the template refuses to serve (every trial then starts cold) when
 * an import failed, when it runs more than one thread after the imports,
 * when CUDA is initialised or an accelerator device is open. A trial starts
 * cold, with the reason on its stderr ("leakproof: prefork: cold start:
 * ..."), when its Python is not the template's, its command is not PYTHON
 * SCRIPT or PYTHON -m MODULE, an environment variable read at import time
 * (OMP_*, MKL_*, OPENBLAS_*, TF_*, TORCH_*, PYTHON*, LD_*, MALLOC_*, ...)
 * differs from the template's, it has no cgroup of its own, or the
 * template is gone.
 *
 * Errors: prefork_start() returns NULL with the reason in why (nothing
 * printed); the caller says it and runs the trials cold.
 */
#ifndef LP_SWEEP_PREFORK_H
#define LP_SWEEP_PREFORK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct prefork;

/*
 * Start the template: python (the trials' interpreter, found on PATH when
 * it has no '/') running client_dir/leakproof/_prefork.py (client_dir: the
 * Python client's directory, python_client_dir() of core/locate.h; NULL
 * when there is none) importing modules (NULL-terminated), and wait (up to
 * timeout_ms) until it says it is ready. NULL with why filled when the
 * command is not Python, the template is not there, refused or failed.
 */
struct prefork *prefork_start(const char *python, const char *client_dir, char *const *modules, int timeout_ms,
                              char *why, size_t whysz);

/* The job's argv for a trial whose command is argv: the stub's command
 * line, then argv. A new NULL-terminated array whose strings are borrowed
 * from p and argv; the caller frees only the array. */
char **prefork_argv(const struct prefork *p, char *const *argv);

/* Whether pid, reaped by the caller, was the template's (then it is not
 * waited for again; trials start cold from then on). */
bool prefork_reaped(struct prefork *p, pid_t pid, int wait_status);

/* Whether the template has ended (reaped or not; NULL: there is none).
 * A warm trial that ends while it is gone may have been ended with it. */
bool prefork_gone(const struct prefork *p);

/* Stop the template (SIGTERM, 5 s, SIGKILL), remove its private directory
 * (the socket and the stub: a template that was killed could not) and
 * free p. NULL is fine. */
void prefork_stop(struct prefork *p);

#endif

/*
 * fault_preload.c — an LD_PRELOAD library for t/e2e/test_store_faults.py:
 * fails the Nth write of the files whose path begins with a prefix (the
 * store, its write-ahead log and index), as a full disk or a failing disk
 * would, in whatever process loads it (leakproof; its job writes no such
 * file).
 *
 *   LP_FAULT_PREFIX   the path prefix whose files count (absolute)
 *   LP_FAULT_AT       the write that fails, from 1; 0 or unset: none
 *   LP_FAULT_STICKY   1: every write after it fails too; with ENOSPC, a
 *                     full disk: only writes that need more space (past
 *                     a file's end) fail, and syncs work
 *   LP_FAULT_ERRNO    the errno of a failure (default ENOSPC)
 *   LP_FAULT_COUNT    a file that gets, at exit, the number of writes seen
 *                     (written only by a process that saw one)
 *
 * A write is write(), pwrite(), pwrite64(), fsync(), fdatasync(),
 * ftruncate() or ftruncate64() on such a file. Built by the test with the
 * system's C compiler; not part of leakproof.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static long seen;

/* Whether fd is a file of the prefix. */
static int counted(int fd)
{
	const char *prefix = getenv("LP_FAULT_PREFIX");
	char link[64], path[4096];
	if (!prefix || !*prefix || fd <= 2)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = '\0';
	return strncmp(path, prefix, strlen(prefix)) == 0;
}

/* 1 (errno set) when this write of fd, which ends at byte end of the file
 * (-1: a sync), must fail. */
static int fail_now(int fd, off_t end)
{
	if (!counted(fd))
		return 0;
	seen++;
	const char *at = getenv("LP_FAULT_AT"), *sticky = getenv("LP_FAULT_STICKY");
	const char *err = getenv("LP_FAULT_ERRNO");
	long n = at ? atol(at) : 0;
	int e = err ? atoi(err) : ENOSPC, always = sticky && *sticky == '1';
	if (n <= 0 || !(seen == n || (always && seen > n)))
		return 0;
	if (always && e == ENOSPC) {   /* a full disk */
		struct stat sb;
		if (end < 0 || (fstat(fd, &sb) == 0 && end <= sb.st_size))
			return 0;
	}
	errno = e;
	return 1;
}

__attribute__((destructor)) static void write_count(void)
{
	const char *file = getenv("LP_FAULT_COUNT");
	if (!file || !seen)
		return;
	FILE *f = fopen(file, "w");
	if (f) {
		fprintf(f, "%ld\n", seen);
		fclose(f);
	}
}

#define REAL(name) static __typeof__(name) *real_##name; \
	if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(write);
	off_t at = lseek(fd, 0, SEEK_CUR);
	return fail_now(fd, at < 0 ? 0 : at + (off_t)n) ? -1 : real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	REAL(pwrite);
	return fail_now(fd, off + (off_t)n) ? -1 : real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
	REAL(pwrite64);
	return fail_now(fd, off + (off64_t)n) ? -1 : real_pwrite64(fd, buf, n, off);
}

int fsync(int fd)
{
	REAL(fsync);
	return fail_now(fd, -1) ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(fdatasync);
	return fail_now(fd, -1) ? -1 : real_fdatasync(fd);
}

int ftruncate(int fd, off_t len)
{
	REAL(ftruncate);
	return fail_now(fd, len) ? -1 : real_ftruncate(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
	REAL(ftruncate64);
	return fail_now(fd, len) ? -1 : real_ftruncate64(fd, len);
}

/*
 * forker.c — a fork-per-batch job: the parent keeps PARENT_MIB MiB, then
 * forks BATCHES children one after the other; child i keeps (i + 1) * 12 MiB
 * among short-lived churn and exits (the last one with _exit, as Python's
 * workers do). Prints "PARENT <pid> <kept bytes>" and, from each child,
 * "CHILD <pid> <kept bytes>".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BATCHES 4
#define PARENT_MIB 20

/* Keeps mib MiB in blocks of 1-8 KiB, with ten times as many freed; returns
 * the bytes kept. */
static size_t keep_mib(size_t mib, uint64_t seed)
{
	void *head = NULL;
	size_t kept = 0;
	uint64_t x = seed;
	while (kept < mib << 20) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t n = 1024 + x % 7168;
		for (int i = 0; i < 10; i++)
			free(malloc(n));
		void **p = malloc(n);
		if (!p)
			break;
		*p = head;
		head = p;
		kept += n;
	}
	return kept;
}

static void say(const char *who, size_t kept)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "%s %ld %zu\n", who, (long)getpid(), kept);
	if (write(1, line, (size_t)n) != n)
		exit(1);
}

int main(void)
{
	size_t kept = keep_mib(PARENT_MIB, 1);
	for (int i = 0; i < BATCHES; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			say("CHILD", keep_mib((size_t)(i + 1) * 12, (uint64_t)i + 7));
			if (i == BATCHES - 1)
				_exit(0);
			exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
	}
	say("PARENT", kept);
	return 0;
}

/*
 * locate.c — the files that ship with leakproof (the Python client, the
 * tracer library), found beside the binary (a build tree, or an installed
 * tree moved as a whole) or where they were installed. Part of the
 * supervisor (supervise-int.h); python_client_dir() also serves the
 * sweep's Python programs (locate.h).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/locate.h"
#include "core/supervise-int.h"

/*
 * A file that ships with leakproof: leaf in one of the directories rel[],
 * relative to the binary's own (a build tree, or an installed tree moved
 * as a whole), else in the directory it was installed to. out gets the
 * real path of the file, or with want_dir of the directory it was found
 * in. False when none has it.
 */
bool find_beside_binary(const char *const *rel, size_t nrel, const char *leaf, const char *installed,
                               bool want_dir, char *out, size_t outsz)
{
	char exe[PATH_MAX], probe[2 * PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash = NULL;
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
	}
	for (size_t i = 0; i <= nrel; i++) {
		if (i == nrel)
			snprintf(probe, sizeof(probe), "%s", installed);
		else if (slash)
			snprintf(probe, sizeof(probe), "%.*s%s", (int)(slash - exe), exe, rel[i]);
		else
			continue;
		size_t dirlen = strlen(probe);
		snprintf(probe + dirlen, sizeof(probe) - dirlen, "/%s", leaf);
		if (access(probe, R_OK) != 0)
			continue;
		if (want_dir)
			probe[dirlen] = '\0';
		char *real = realpath(probe, NULL);
		bool fits = real && strlen(real) < outsz;
		if (fits)
			memcpy(out, real, strlen(real) + 1);
		free(real);
		if (fits)
			return true;
	}
	return false;
}

const char *python_client_dir(void)
{
	static char dir[PATH_MAX];
	static const char *const rel[] = { "/../python", "/../lib/leakproof/python" };
	return find_beside_binary(rel, 2, "leakproof/__init__.py", LP_PYDIR, true, dir, sizeof(dir)) ? dir : NULL;
}

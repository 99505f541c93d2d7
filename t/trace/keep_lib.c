/*
 * keep_lib.c — libtracekeep.so, the helper library of the tracer's tests:
 * keep_some() allocates a block and keeps one in KEEP_EVERY of them (chained
 * through their first bytes), freeing the others at once. What it kept is
 * what the tracer must attribute to its call site.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define KEEP_EVERY 50

size_t keep_some(size_t size);
size_t keep_some_kept_bytes(void);

static void *kept_head;
static size_t kept_bytes, calls;

/* Returns the size when the block was kept, else 0. */
size_t keep_some(size_t size)
{
	if (size < sizeof(void *))
		size = sizeof(void *);
	void *p = malloc(size);
	if (!p)
		return 0;
	memset(p, 0x5a, 16 < size ? 16 : size);
	if (++calls % KEEP_EVERY) {
		free(p);
		return 0;
	}
	*(void **)p = kept_head;
	kept_head = p;
	kept_bytes += size;
	return size;
}

size_t keep_some_kept_bytes(void)
{
	return kept_bytes;
}

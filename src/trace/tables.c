/*
 * tables.c — the tracer's two tables (see trace.h): live sampled pointers
 * (pointer -> site, weight) with the lock-free filter free() reads first,
 * and the sites, found by the hash of their stacks.
 *
 * Memory grows with the live sampled pointers (24 bytes each, table at most
 * half full, plus the fixed 128 KiB filter) and with the distinct sites (a
 * record of 64 bytes + 24 per frame + the py text, and 12 bytes of index),
 * never with the number of allocations. All of it comes from mmap.
 * Nothing here locks: the caller holds its lock around every call but
 * trace_ptrs_maybe().
 */
#include "trace/trace.h"

#include <string.h>

#define FILTER_BYTES ((size_t)1 << TRACE_FILTER_BITS)
#define PTRS_MIN_CAP 1024
#define SITES_MIN_CAP 256
#define CHUNK_BYTES ((size_t)1 << 20)

/* ---- live sampled pointers --------------------------------------------- */

static inline size_t ptr_slot(uintptr_t p, size_t cap)
{
	uint64_t h = (uint64_t)p * 0xD6E8FEB86659FD93ull;
	return (size_t)(h ^ (h >> 32)) & (cap - 1);
}

int trace_ptrs_init(struct trace_ptrs *t)
{
	memset(t, 0, sizeof(*t));
	t->filter = trace_pages_alloc(FILTER_BYTES);
	return t->filter ? 0 : -1;
}

void trace_ptrs_release(struct trace_ptrs *t)
{
	trace_pages_free(t->slots, t->cap * sizeof(struct trace_ptr));
	trace_pages_free(t->filter, FILTER_BYTES);
	memset(t, 0, sizeof(*t));
}

static void put(struct trace_ptr *slots, size_t cap, const struct trace_ptr *e)
{
	size_t i = ptr_slot(e->ptr, cap);
	while (slots[i].ptr)
		i = (i + 1) & (cap - 1);
	slots[i] = *e;
}

static int ptrs_grow(struct trace_ptrs *t)
{
	size_t cap = t->cap ? t->cap * 2 : PTRS_MIN_CAP;
	struct trace_ptr *slots = trace_pages_alloc(cap * sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].ptr)
			put(slots, cap, &t->slots[i]);
	trace_pages_free(t->slots, t->cap * sizeof(struct trace_ptr));
	t->slots = slots;
	t->cap = cap;
	return 0;
}

static struct trace_ptr *ptrs_find(const struct trace_ptrs *t, uintptr_t p)
{
	if (!t->cap)
		return NULL;
	for (size_t i = ptr_slot(p, t->cap);; i = (i + 1) & (t->cap - 1)) {
		if (t->slots[i].ptr == p)
			return &t->slots[i];
		if (!t->slots[i].ptr)
			return NULL;
	}
}

int trace_ptrs_insert(struct trace_ptrs *t, uintptr_t p, uint32_t site, uint64_t weight_bytes,
		      struct trace_ptr *old)
{
	struct trace_ptr e = { .ptr = p, .site = site, .weight_bytes = weight_bytes };
	struct trace_ptr *cur = ptrs_find(t, p);

	memset(old, 0, sizeof(*old));
	if (cur) {
		*old = *cur;
		*cur = e;
		return 0;
	}
	if ((t->count + 1) * 2 > t->cap && ptrs_grow(t))
		return -1;
	put(t->slots, t->cap, &e);
	t->count++;
	uint8_t *f = &t->filter[trace_filter_slot(p)];
	uint8_t v = __atomic_load_n(f, __ATOMIC_RELAXED);
	if (v != 255)
		__atomic_store_n(f, (uint8_t)(v + 1), __ATOMIC_RELAXED);
	return 0;
}

int trace_ptrs_remove(struct trace_ptrs *t, uintptr_t p, struct trace_ptr *out)
{
	struct trace_ptr *cur = ptrs_find(t, p);
	if (!cur)
		return 0;
	*out = *cur;
	/* backward-shift deletion: pull later entries of the run into the hole */
	size_t mask = t->cap - 1, hole = (size_t)(cur - t->slots);
	for (size_t j = (hole + 1) & mask; t->slots[j].ptr; j = (j + 1) & mask) {
		size_t home = ptr_slot(t->slots[j].ptr, t->cap);
		/* j's entry may move to the hole when home is not in (hole, j] */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			t->slots[hole] = t->slots[j];
			hole = j;
		}
	}
	memset(&t->slots[hole], 0, sizeof(t->slots[hole]));
	t->count--;
	uint8_t *f = &t->filter[trace_filter_slot(p)];
	uint8_t v = __atomic_load_n(f, __ATOMIC_RELAXED);
	if (v != 255 && v != 0)
		__atomic_store_n(f, (uint8_t)(v - 1), __ATOMIC_RELAXED);
	return 1;
}

/* ---- sites ------------------------------------------------------------- */

void trace_sites_init(struct trace_sites *s)
{
	memset(s, 0, sizeof(*s));
}

void trace_sites_release(struct trace_sites *s)
{
	for (size_t i = 0; i < s->nchunks; i++)
		trace_pages_free(s->chunks[i], CHUNK_BYTES);
	trace_pages_free(s->chunks, s->chunks_cap * sizeof(void *));
	trace_pages_free(s->by_index, s->by_index_cap * sizeof(struct tracer_site *));
	trace_pages_free(s->slots, s->slot_cap * sizeof(uint32_t));
	memset(s, 0, sizeof(*s));
}

/* Pages for an array of n elements of size each, copying the first used. */
static void *grow_array(void *old, size_t used, size_t old_cap, size_t new_cap, size_t size)
{
	void *p = trace_pages_alloc(new_cap * size);
	if (!p)
		return NULL;
	if (old) {
		memcpy(p, old, used * size);
		trace_pages_free(old, old_cap * size);
	}
	return p;
}

static void *arena_alloc(struct trace_sites *s, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n > CHUNK_BYTES)
		return NULL;
	if (!s->chunk || s->chunk_used + n > s->chunk_cap) {
		if (s->nchunks == s->chunks_cap) {
			size_t cap = s->chunks_cap ? s->chunks_cap * 2 : 64;
			void **c = grow_array(s->chunks, s->nchunks, s->chunks_cap, cap, sizeof(void *));
			if (!c)
				return NULL;
			s->chunks = c;
			s->chunks_cap = cap;
		}
		char *chunk = trace_pages_alloc(CHUNK_BYTES);
		if (!chunk)
			return NULL;
		s->chunks[s->nchunks++] = chunk;
		s->chunk = chunk;
		s->chunk_used = 0;
		s->chunk_cap = CHUNK_BYTES;
		s->bytes += CHUNK_BYTES;
	}
	void *p = s->chunk + s->chunk_used;
	s->chunk_used += n;
	return p;
}

static void slots_put(uint32_t *slots, size_t cap, uint64_t hash, uint32_t v)
{
	size_t i = (size_t)hash & (cap - 1);
	while (slots[i])
		i = (i + 1) & (cap - 1);
	slots[i] = v;
}

struct tracer_site *trace_sites_find(struct trace_sites *s, uint64_t hash)
{
	if (!s->slot_cap)
		return NULL;
	for (size_t i = (size_t)hash & (s->slot_cap - 1);; i = (i + 1) & (s->slot_cap - 1)) {
		uint32_t v = s->slots[i];
		if (!v)
			return NULL;
		if (s->by_index[v - 1]->hash == hash)
			return s->by_index[v - 1];
	}
}

struct tracer_site *trace_sites_add(struct trace_sites *s, uint64_t hash, char kind,
				   const struct trace_frame *frames, int nframes,
				   const char *py, size_t py_len)
{
	if (nframes < 0)
		nframes = 0;
	if (nframes > TRACE_FRAMES_MAX)
		nframes = TRACE_FRAMES_MAX;
	if (py_len > TRACE_PY_TEXT_MAX)
		py_len = TRACE_PY_TEXT_MAX;
	if (s->count >= UINT32_MAX - 1)
		return NULL;
	if ((s->count + 1) * 2 > s->slot_cap) {
		size_t cap = s->slot_cap ? s->slot_cap * 2 : SITES_MIN_CAP;
		uint32_t *slots = trace_pages_alloc(cap * sizeof(uint32_t));
		if (!slots)
			return NULL;
		for (size_t i = 0; i < s->count; i++)
			slots_put(slots, cap, s->by_index[i]->hash, (uint32_t)i + 1);
		trace_pages_free(s->slots, s->slot_cap * sizeof(uint32_t));
		s->slots = slots;
		s->slot_cap = cap;
	}
	if (s->count == s->by_index_cap) {
		size_t cap = s->by_index_cap ? s->by_index_cap * 2 : SITES_MIN_CAP;
		struct tracer_site **b = grow_array(s->by_index, s->count, s->by_index_cap, cap,
						   sizeof(*b));
		if (!b)
			return NULL;
		s->by_index = b;
		s->by_index_cap = cap;
	}
	struct tracer_site *site = arena_alloc(s, sizeof(*site) + (size_t)nframes * sizeof(struct trace_frame)
					      + py_len);
	if (!site)
		return NULL;
	memset(site, 0, sizeof(*site));
	site->hash = hash;
	site->id = (uint32_t)s->count + 1;
	site->kind = kind;
	site->nframes = (uint16_t)nframes;
	if (nframes)
		memcpy(site->frames, frames, (size_t)nframes * sizeof(struct trace_frame));
	if (py && py_len) {
		site->py = (char *)&site->frames[nframes];
		memcpy(site->py, py, py_len);
		site->py_len = (uint16_t)py_len;
	}
	s->by_index[s->count] = site;
	slots_put(s->slots, s->slot_cap, hash, (uint32_t)s->count + 1);
	s->count++;
	return site;
}

void trace_sites_mark(struct trace_sites *s, struct tracer_site *site)
{
	if (site->dirty)
		return;
	site->dirty = true;
	site->next_dirty = s->dirty_head;
	s->dirty_head = site->id;       /* id = index + 1 */
}

uint32_t trace_sites_take_dirty(struct trace_sites *s)
{
	uint32_t head = s->dirty_head;
	s->dirty_head = 0;
	return head;
}

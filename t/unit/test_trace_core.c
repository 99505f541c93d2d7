/*
 * test_trace_core.c — the tracer's core (src/trace/{sample,tables,encode}.c):
 * the byte sampler and its estimator on known streams, the pointer and site
 * tables against a reference, and the wire lines, their 4096-byte cap
 * included.
 */
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>

#include "trace/trace.h"

/* ---- sampling ---------------------------------------------------------- */

static void test_countdown_mean(void)
{
	struct trace_rng r;
	double sum = 0;
	int n = 200000;
	trace_rng_seed(&r, 42);
	for (int i = 0; i < n; i++) {
		int64_t c = trace_next_countdown(&r, 524288);
		CHECK(c >= 1);
		sum += (double)c;
	}
	CHECK_NEAR(sum / n, 524288.0, 524288.0 * 0.01);
	trace_rng_seed(&r, 0);      /* a zero seed still gives a stream */
	CHECK(trace_rng_next(&r) != trace_rng_next(&r));
}

static void test_weight(void)
{
	CHECK_EQ_INT(trace_weight(0, 524288), 0);
	/* small: about mean + size/2 */
	CHECK_NEAR((double)trace_weight(16, 524288), 524288.0 + 8, 1.0);
	/* large: about size */
	CHECK_NEAR((double)trace_weight(100u << 20, 524288), (double)(100u << 20), 1.0);
	/* equal: mean / (1 - 1/e) */
	CHECK_NEAR((double)trace_weight(524288, 524288), 524288.0 / (1 - exp(-1.0)), 1.0);
}

/* The estimator is unbiased: a mixed stream's sampled total is near its truth. */
static void test_estimate_unbiased(void)
{
	struct trace_rng r, sizes;
	uint64_t mean = 65536;
	double truth = 0, est = 0;
	int64_t left;
	trace_rng_seed(&r, 7);
	trace_rng_seed(&sizes, 9);
	left = trace_next_countdown(&r, mean);
	for (int i = 0; i < 2000000; i++) {
		uint64_t x = trace_rng_next(&sizes);
		uint64_t size = (x & 7) == 0 ? 200000 + x % 100000 : 8 + (x >> 8) % 512;
		truth += (double)size;
		left -= (int64_t)size;
		if (left < 0) {
			est += (double)trace_weight(size, mean);
			left = trace_next_countdown(&r, mean);
		}
	}
	CHECK_NEAR(est / truth, 1.0, 0.02);
}

static void test_site_hash(void)
{
	uintptr_t a[3] = { 1, 2, 3 }, b[3] = { 1, 2, 4 };
	uint64_t h = trace_site_hash('m', a, 3, NULL, 0);
	CHECK(h == trace_site_hash('m', a, 3, NULL, 0));
	CHECK(h != trace_site_hash('m', b, 3, NULL, 0));
	CHECK(h != trace_site_hash('a', a, 3, NULL, 0));
	CHECK(h != trace_site_hash('m', a, 2, NULL, 0));
	CHECK(h != trace_site_hash('m', a, 3, "1:f:x.py", 8));
	CHECK(trace_site_hash('m', a, 3, "1:f:x.py", 8) != trace_site_hash('m', a, 3, "2:f:x.py", 8));
}

/* ---- pointer table ----------------------------------------------------- */

static void test_ptrs_reference(void)
{
	struct trace_ptrs t;
	enum { N = 20000 };
	static uintptr_t keys[N];
	static uint64_t weights[N];
	static char live[N];
	struct trace_rng r;
	struct trace_ptr e, old;
	size_t nlive = 0;

	CHECK_EQ_INT(trace_ptrs_init(&t), 0);
	trace_rng_seed(&r, 3);
	/* sampled blocks: 16-byte aligned, scattered over a 4 GiB heap */
	for (int i = 0; i < N; i++)
		keys[i] = (uintptr_t)0x7f0000000000ull + ((((uintptr_t)i * 0x9E3779B1u) & 0xFFFFFFF) << 4);
	/* random inserts and removes, checked against the reference */
	for (int step = 0; step < 200000; step++) {
		int i = (int)(trace_rng_next(&r) % N);
		if (!live[i]) {
			weights[i] = trace_rng_next(&r) % 1000000;
			CHECK_EQ_INT(trace_ptrs_insert(&t, keys[i], (uint32_t)i, weights[i], &old), 0);
			CHECK(old.ptr == 0);
			live[i] = 1;
			nlive++;
		} else {
			CHECK_EQ_INT(trace_ptrs_remove(&t, keys[i], &e), 1);
			CHECK(e.ptr == keys[i] && e.site == (uint32_t)i && e.weight_bytes == weights[i]);
			live[i] = 0;
			nlive--;
		}
	}
	CHECK_EQ_INT(t.count, nlive);
	size_t false_maybe = 0, dead = 0;
	for (int i = 0; i < N; i++) {
		if (live[i]) {
			CHECK(trace_ptrs_maybe(&t, keys[i]));       /* never a false "no" */
		} else {
			dead++;
			false_maybe += trace_ptrs_maybe(&t, keys[i]);
			CHECK_EQ_INT(trace_ptrs_remove(&t, keys[i], &e), 0);
		}
	}
	/* ~10,000 live in 2^20 counters: few false "maybe"s */
	CHECK((double)false_maybe / (double)dead < 0.03);
	/* drain: every entry found once, the filter back to all zero */
	for (int i = 0; i < N; i++)
		if (live[i])
			CHECK_EQ_INT(trace_ptrs_remove(&t, keys[i], &e), 1);
	CHECK_EQ_INT(t.count, 0);
	size_t nonzero = 0;
	for (size_t i = 0; i < ((size_t)1 << TRACE_FILTER_BITS); i++)
		nonzero += t.filter[i] != 0;
	CHECK_EQ_INT(nonzero, 0);
	CHECK(!trace_ptrs_maybe(&t, keys[5]));
	trace_ptrs_release(&t);
	CHECK(t.slots == NULL && t.filter == NULL);
}

static void test_ptrs_replace(void)
{
	struct trace_ptrs t;
	struct trace_ptr old, e;
	CHECK_EQ_INT(trace_ptrs_init(&t), 0);
	CHECK_EQ_INT(trace_ptrs_insert(&t, 0x1000, 1, 100, &old), 0);
	/* the same address again: its free went unseen; the old entry comes back */
	CHECK_EQ_INT(trace_ptrs_insert(&t, 0x1000, 2, 200, &old), 0);
	CHECK(old.ptr == 0x1000 && old.site == 1 && old.weight_bytes == 100);
	CHECK_EQ_INT(t.count, 1);
	CHECK_EQ_INT(trace_ptrs_remove(&t, 0x1000, &e), 1);
	CHECK(e.site == 2 && e.weight_bytes == 200);
	CHECK(!trace_ptrs_maybe(&t, 0x1000));
	trace_ptrs_release(&t);
}

/* ---- site table -------------------------------------------------------- */

static void test_sites(void)
{
	struct trace_sites s;
	struct trace_frame f[3] = { { 0x10, "a", 1 }, { 0x20, NULL, 1 }, { 0x30, "c", 2 } };
	trace_sites_init(&s);
	CHECK(trace_sites_find(&s, 99) == NULL);
	for (uint64_t h = 1; h <= 5000; h++) {
		struct tracer_site *site = trace_sites_add(&s, h * 0x9E3779B97F4A7C15ull, 'm', f, (int)(h % 4),
							  h % 2 ? "3:f:x.py" : NULL, h % 2 ? 8 : 0);
		CHECK(site != NULL);
		if (!site)
			return;
		CHECK_EQ_INT(site->id, h);
	}
	CHECK_EQ_INT(s.count, 5000);
	struct tracer_site *site = trace_sites_find(&s, 77 * 0x9E3779B97F4A7C15ull);
	CHECK(site && site->id == 77 && site->nframes == 1 && site->frames[0].vaddr == 0x10);
	CHECK(site && site->py_len == 8 && !memcmp(site->py, "3:f:x.py", 8));
	site = trace_sites_find(&s, 78 * 0x9E3779B97F4A7C15ull);
	CHECK(site && site->py == NULL && site->nframes == 2);
	CHECK(trace_sites_get(&s, 4999) && trace_sites_get(&s, 4999)->id == 5000);
	CHECK(trace_sites_get(&s, 5000) == NULL);

	/* dirty list: each site once, however often marked */
	trace_sites_mark(&s, trace_sites_get(&s, 2));
	trace_sites_mark(&s, trace_sites_get(&s, 9));
	trace_sites_mark(&s, trace_sites_get(&s, 2));
	int seen = 0, sum = 0;
	for (uint32_t n = trace_sites_take_dirty(&s); n; ) {
		struct tracer_site *d = trace_sites_get(&s, n - 1);
		n = d->next_dirty;
		d->dirty = false;
		seen++;
		sum += (int)d->id;
	}
	CHECK_EQ_INT(seen, 2);
	CHECK_EQ_INT(sum, 3 + 10);
	CHECK_EQ_INT(trace_sites_take_dirty(&s), 0);
	trace_sites_release(&s);
	CHECK(s.count == 0 && s.chunks == NULL);
}

/* ---- lines ------------------------------------------------------------- */

static char buf[TRACE_LINE_MAX];

static const char *line(size_t n)
{
	static char copy[TRACE_LINE_MAX + 1];
	memcpy(copy, buf, n);
	copy[n] = '\0';
	return copy;
}

static void test_enc_simple(void)
{
	size_t n = trace_enc_hello(buf, 123, 1, 524288, "/usr/bin/python3.11");
	CHECK_STR(line(n), "hello 123 1 524288 /usr/bin/python3.11\n");
	n = trace_enc_map(buf, 123, 4, "/opt/my lib/libx.so\nevil");
	CHECK_STR(line(n), "map 123 4 /opt/my lib/libx.so?evil\n");
	n = trace_enc_end(buf, 123, 7, -5, 2);
	CHECK_STR(line(n), "end 123 7 -5 2\n");
}

static struct tracer_site *make_site(struct trace_sites *s, uint64_t hash, int nframes, const char *sym)
{
	struct trace_frame f[TRACE_FRAMES_MAX];
	for (int i = 0; i < nframes; i++) {
		f[i].vaddr = 0x1000 + (uint64_t)i;
		f[i].sym = sym;
		f[i].map = (uint32_t)i % 3;
	}
	return trace_sites_add(s, hash, 'm', f, nframes, NULL, 0);
}

static void test_enc_site(void)
{
	struct trace_sites s;
	struct trace_frame f[4] = { { 0x4f2a, "keep_some", 2 }, { 0x11, NULL, 1 },
				    { 0x12, "has space", 1 }, { 0xdead, "main", 0 } };
	int nf;
	trace_sites_init(&s);
	struct tracer_site *site = trace_sites_add(&s, 1, 'a', f, 4, NULL, 0);
	size_t n = trace_enc_site(buf, 9, site, &nf);
	CHECK_STR(line(n), "site 9 1 a 2:4f2a:keep_some 1:11 1:12 0:dead:main\n");
	CHECK_EQ_INT(nf, 4);

	/* 64 frames with 200-byte symbols: cut at 4096 bytes, outermost dropped */
	char sym[201];
	memset(sym, 'S', 200);
	sym[200] = '\0';
	site = make_site(&s, 2, TRACE_FRAMES_MAX, sym);
	n = trace_enc_site(buf, 2147483647, site, &nf);
	CHECK(n <= TRACE_LINE_MAX);
	CHECK(n > TRACE_LINE_MAX - 220);
	CHECK(buf[n - 1] == '\n' && memchr(buf, '\n', n - 1) == NULL);
	CHECK(nf > 10 && nf < TRACE_FRAMES_MAX);
	/* the line ends with a whole frame */
	CHECK(n > 201 && !memcmp(buf + n - 201, sym, 200));

	/* a symbol too long is left out, the frame kept */
	char longsym[TRACE_SYM_MAX + 2];
	memset(longsym, 'L', sizeof(longsym) - 1);
	longsym[sizeof(longsym) - 1] = '\0';
	site = make_site(&s, 3, 1, longsym);
	n = trace_enc_site(buf, 1, site, &nf);
	CHECK_STR(line(n), "site 1 3 m 0:1000\n");
	trace_sites_release(&s);
}

static void test_enc_py(void)
{
	struct trace_py_text t;
	struct trace_sites s;
	trace_py_text_init(&t);
	CHECK(trace_py_text_add(&t, 14, "train_step", "/home/u/train.py"));
	CHECK(trace_py_text_add(&t, 30, "<mod\tule>", "a\nb.py"));
	trace_sites_init(&s);
	struct tracer_site *site = trace_sites_add(&s, 1, 'm', NULL, 0, t.buf, t.len);
	size_t n = trace_enc_py(buf, 5, site);
	CHECK_STR(line(n), "py 5 1 14:train_step:/home/u/train.py\t30:<mod?ule>:a?b.py\n");

	/* many long frames: whole frames only, within the cap */
	char file[301];
	memset(file, 'f', 300);
	file[300] = '\0';
	trace_py_text_init(&t);
	int added = 0;
	while (trace_py_text_add(&t, 123456, "fn", file))
		added++;
	CHECK(t.full && added == t.nframes && added < TRACE_PY_FRAMES_MAX);
	CHECK(t.len <= TRACE_PY_TEXT_MAX);
	site = trace_sites_add(&s, 2, 'm', NULL, 0, t.buf, t.len);
	n = trace_enc_py(buf, 2147483647, site);
	CHECK(n <= TRACE_LINE_MAX && buf[n - 1] == '\n');
	CHECK(n > 300 && !memcmp(buf + n - 301, file, 300));

	/* at most 32 frames */
	trace_py_text_init(&t);
	added = 0;
	while (trace_py_text_add(&t, 1, "f", "x.py"))
		added++;
	CHECK_EQ_INT(added, TRACE_PY_FRAMES_MAX);

	/* one frame longer than the whole text: kept, its file name cut */
	static char huge[5000];
	memset(huge, 'h', sizeof(huge) - 1);
	trace_py_text_init(&t);
	CHECK(!trace_py_text_add(&t, 1, "f", huge));
	CHECK_EQ_INT(t.nframes, 1);
	CHECK_EQ_INT(t.len, TRACE_PY_TEXT_MAX);
	CHECK(!memcmp(t.buf, "1:f:hhh", 7));
	trace_sites_release(&s);
}

static void test_enc_live_split(void)
{
	struct trace_sites s;
	struct trace_line l;
	trace_sites_init(&s);
	for (uint64_t h = 1; h <= 1000; h++) {
		struct tracer_site *site = make_site(&s, h, 0, NULL);
		site->live_bytes = (int64_t)h * 1000003;
		site->allocs = h;
		site->frees = h / 2;
	}
	trace_line_init(&l, buf, TRACE_LINE_MAX);
	trace_enc_live_begin(&l, 42, 3, 123456789);
	CHECK(trace_enc_live_add(&l, trace_sites_get(&s, 0)));
	size_t n = trace_line_end(&l);
	CHECK_STR(line(n), "live 42 3 123456789 1:1000003:1:0\n");

	/* many sites: several lines, each within the cap, every site once */
	int lines = 0, entries = 0;
	uint32_t i = 0;
	while (i < 1000) {
		trace_line_init(&l, buf, TRACE_LINE_MAX);
		trace_enc_live_begin(&l, 42, 4, 1);
		int here = 0;
		while (i < 1000 && trace_enc_live_add(&l, trace_sites_get(&s, i))) {
			i++;
			here++;
		}
		CHECK(here > 0);
		n = trace_line_end(&l);
		CHECK(n <= TRACE_LINE_MAX);
		lines++;
		entries += here;
	}
	CHECK(lines > 1);
	CHECK_EQ_INT(entries, 1000);
	trace_sites_release(&s);
}

static void test_line_numbers(void)
{
	struct trace_line l;
	trace_line_init(&l, buf, TRACE_LINE_MAX);
	trace_line_u64(&l, UINT64_MAX);
	trace_line_ch(&l, ' ');
	trace_line_i64(&l, INT64_MIN);
	trace_line_ch(&l, ' ');
	trace_line_hex(&l, 0);
	trace_line_ch(&l, ' ');
	trace_line_hex(&l, UINT64_MAX);
	size_t n = trace_line_end(&l);
	CHECK_STR(line(n), "18446744073709551615 -9223372036854775808 0 ffffffffffffffff\n");
	/* an append that does not fit leaves the line as it was */
	char small[8];
	trace_line_init(&l, small, sizeof(small));
	trace_line_str(&l, "abc");
	trace_line_str(&l, "defgh");
	CHECK(l.overflow && l.len == 3);
}

TEST_MAIN("trace_core",
	  TEST(test_countdown_mean), TEST(test_weight), TEST(test_estimate_unbiased),
	  TEST(test_site_hash), TEST(test_ptrs_reference), TEST(test_ptrs_replace),
	  TEST(test_sites), TEST(test_enc_simple), TEST(test_enc_site), TEST(test_enc_py),
	  TEST(test_enc_live_split), TEST(test_line_numbers))

/*
 * test_nvml.c — src/platform/nvml.c against the fake NVML of t/fake-nvml:
 * processes and device memory round-trip through the real entry points and
 * record layouts, the numbers follow the fake's file from one call to the
 * next, the process buffer grows past 256, and a missing library, a missing
 * symbol or a failing nvmlInit_v2 give NULL with a reason.
 *
 * The fake is $LEAKPROOF_NVML_LIB, else libnvidia-ml.so.1 beside this test
 * binary (the Makefile builds both into $(B)/t/), else
 * build/t/libnvidia-ml.so.1 from the current directory.
 */
#include "platform/nvml.h"
#include "util/util.h"
#include "tap.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fake_lib[PATH_MAX];
static char data_path[PATH_MAX];

static const char *fake_path(void)
{
	const char *env = getenv("LEAKPROOF_NVML_LIB");
	char exe[PATH_MAX];
	ssize_t len;

	if (fake_lib[0])
		return fake_lib;
	if (env && *env) {
		snprintf(fake_lib, sizeof(fake_lib), "%s", env);
		return fake_lib;
	}
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len > 0) {
		exe[len] = '\0';
		snprintf(fake_lib, sizeof(fake_lib), "%s/libnvidia-ml.so.1", dirname(exe));
		if (access(fake_lib, R_OK) == 0)
			return fake_lib;
	}
	snprintf(fake_lib, sizeof(fake_lib), "build/t/libnvidia-ml.so.1");
	return fake_lib;
}

/* Replace the fake's data file in one rename(), as a test would mid-job. */
static void write_data(const char *text)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

	if (!data_path[0]) {
		const char *dir = getenv("TMPDIR");
		snprintf(data_path, sizeof(data_path), "%s/lp-fake-nvml-%d.txt",
			 dir && *dir ? dir : "/tmp", (int)getpid());
		setenv("FAKE_NVML_FILE", data_path, 1);
	}
	snprintf(tmp, sizeof(tmp), "%s.new", data_path);
	f = fopen(tmp, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
	CHECK(rename(tmp, data_path) == 0);
}

static struct nvml *open_fake(enum nvml_proc_api api)
{
	const char *why = "unset";
	struct nvml *n = nvml_open_lib(fake_path(), api, &why);

	if (!n)
		fprintf(stderr, "  cannot open the fake NVML '%s': %s\n", fake_path(), why);
	CHECK(n != NULL);
	return n;
}

static const struct nvml_proc *find(const struct nvml_proc *p, size_t n, unsigned pid, int device)
{
	for (size_t i = 0; i < n; i++)
		if (p[i].pid == pid && p[i].device == device)
			return &p[i];
	return NULL;
}

static void test_missing_library(void)
{
	const char *why = NULL;
	struct nvml *n = nvml_open_lib("/nonexistent/libnvidia-ml.so.1", NVML_PROC_API_DETECT, &why);

	CHECK(n == NULL);
	CHECK(why != NULL);
	CHECK(why && strstr(why, "cannot load '/nonexistent/libnvidia-ml.so.1'"));

	/* nvml_open() honours $LEAKPROOF_NVML_LIB. */
	char *saved = getenv("LEAKPROOF_NVML_LIB") ? strdup(getenv("LEAKPROOF_NVML_LIB")) : NULL;
	setenv("LEAKPROOF_NVML_LIB", "/nonexistent/libfoo.so", 1);
	why = NULL;
	CHECK(nvml_open(&why) == NULL);
	CHECK(why && strstr(why, "/nonexistent/libfoo.so"));
	if (saved) {
		setenv("LEAKPROOF_NVML_LIB", saved, 1);
		free(saved);
	} else {
		unsetenv("LEAKPROOF_NVML_LIB");
	}
}

static void test_missing_symbol(void)
{
	const char *why = NULL;
	/* A real library that is not NVML. */
	struct nvml *n = nvml_open_lib("libm.so.6", NVML_PROC_API_DETECT, &why);

	CHECK(n == NULL);
	CHECK(why && strstr(why, "lacks an NVML function"));
}

static void test_init_failure(void)
{
	const char *why = NULL;
	struct nvml *n;

	write_data("device 0 total 1000\nfail init\n");
	n = nvml_open_lib(fake_path(), NVML_PROC_API_DETECT, &why);
	CHECK(n == NULL);
	CHECK_STR(why, "cannot initialise NVML: driver not loaded");

	write_data("fail count\n");
	why = NULL;
	n = nvml_open_lib(fake_path(), NVML_PROC_API_DETECT, &why);
	CHECK(n == NULL);
	CHECK_STR(why, "cannot count GPUs: unknown error");
}

static void test_no_file(void)
{
	struct nvml_proc procs[8];
	size_t count = 99;
	uint64_t used = 1, total = 0;
	struct nvml *n;

	unlink(data_path);
	n = open_fake(NVML_PROC_API_DETECT);
	if (!n)
		return;
	CHECK_EQ_INT(nvml_device_count(n), 1);
	CHECK_EQ_INT(nvml_processes(n, procs, 8, &count), 0);
	CHECK_EQ_INT(count, 0);
	CHECK_EQ_INT(nvml_device_memory(n, 0, &used, &total), 0);
	CHECK_EQ_INT(used, 0);
	CHECK_EQ_INT(total, 80ULL << 30);
	nvml_close(n);
}

static void test_round_trip(void)
{
	struct nvml_proc procs[16];
	const struct nvml_proc *p;
	size_t count = 0;
	uint64_t used = 0, total = 0;
	struct nvml *n;

	write_data("# two GPUs\n"
		   "device 0 total 85899345920 used 1073741824\n"
		   "device 1 total 42949672960\n"
		   "process 0 12345 536870912     # device pid bytes\n"
		   "process 0 777 unknown\n"
		   "process 1 12345 1000\n"
		   "process 1 4242 5000000000\n"
		   "graphics 1 4242 5000000000    # C+G: the same memory twice\n"
		   "graphics 0 31 2048\n");
	n = open_fake(NVML_PROC_API_DETECT);
	if (!n)
		return;
	CHECK_EQ_INT(nvml_proc_api_in_use(n), NVML_PROC_API_V3);
	CHECK_EQ_INT(nvml_device_count(n), 2);
	CHECK_EQ_INT(nvml_processes(n, procs, 16, &count), 0);
	CHECK_EQ_INT(count, 5);

	p = find(procs, count, 12345, 0);
	CHECK(p && p->used_bytes == 536870912ULL && !p->used_unknown);
	p = find(procs, count, 777, 0);
	CHECK(p && p->used_bytes == 0 && p->used_unknown);
	p = find(procs, count, 31, 0);
	CHECK(p && p->used_bytes == 2048);
	p = find(procs, count, 12345, 1);
	CHECK(p && p->used_bytes == 1000);
	p = find(procs, count, 4242, 1);
	CHECK(p && p->used_bytes == 5000000000ULL);

	CHECK_EQ_INT(nvml_device_memory(n, 0, &used, &total), 0);
	CHECK_EQ_INT(used, 1073741824ULL);
	CHECK_EQ_INT(total, 85899345920ULL);
	/* "used" defaults to the sum of the device's processes. */
	CHECK_EQ_INT(nvml_device_memory(n, 1, &used, &total), 0);
	CHECK_EQ_INT(used, 1000ULL + 5000000000ULL + 5000000000ULL);
	CHECK_EQ_INT(total, 42949672960ULL);

	CHECK_EQ_INT(nvml_device_memory(n, 2, &used, &total), -1);
	CHECK_STR(nvml_error(n), "no such GPU");
	CHECK_EQ_INT(nvml_device_memory(n, -1, &used, &total), -1);

	/* Fewer slots than processes: filled up to max, no overrun. */
	procs[2].pid = 0xdead;
	CHECK_EQ_INT(nvml_processes(n, procs, 2, &count), 0);
	CHECK_EQ_INT(count, 2);
	CHECK_EQ_INT(procs[2].pid, 0xdead);
	nvml_close(n);
}

static void test_mig_duplicates_add(void)
{
	struct nvml_proc procs[4];
	size_t count = 0;
	struct nvml *n;

	/* One process with contexts in two MIG instances of device 0. */
	write_data("process 0 50 100\nprocess 0 50 200\nprocess 0 51 unknown\nprocess 0 51 7\n");
	n = open_fake(NVML_PROC_API_DETECT);
	if (!n)
		return;
	CHECK_EQ_INT(nvml_processes(n, procs, 4, &count), 0);
	CHECK_EQ_INT(count, 2);
	CHECK(count >= 1 && procs[0].pid == 50 && procs[0].used_bytes == 300);
	/* Partly known is known. */
	CHECK(count >= 2 && procs[1].pid == 51 && procs[1].used_bytes == 7 && !procs[1].used_unknown);
	nvml_close(n);
}

static void test_file_changes_between_calls(void)
{
	struct nvml_proc procs[8];
	size_t count = 0;
	uint64_t used = 0, total = 0;
	struct nvml *n;

	write_data("device 0 total 1000000 used 1000\nprocess 0 100 1000\n");
	n = open_fake(NVML_PROC_API_DETECT);
	if (!n)
		return;
	CHECK_EQ_INT(nvml_processes(n, procs, 8, &count), 0);
	CHECK_EQ_INT(count, 1);
	CHECK_EQ_INT(procs[0].used_bytes, 1000);
	CHECK_EQ_INT(nvml_device_memory(n, 0, &used, &total), 0);
	CHECK_EQ_INT(used, 1000);

	write_data("device 0 total 1000000 used 5000\nprocess 0 100 3000\nprocess 0 101 2000\n");
	CHECK_EQ_INT(nvml_processes(n, procs, 8, &count), 0);
	CHECK_EQ_INT(count, 2);
	CHECK(find(procs, count, 100, 0) && find(procs, count, 100, 0)->used_bytes == 3000);
	CHECK(find(procs, count, 101, 0) && find(procs, count, 101, 0)->used_bytes == 2000);
	CHECK_EQ_INT(nvml_device_memory(n, 0, &used, &total), 0);
	CHECK_EQ_INT(used, 5000);

	/* Queries that start failing, then recover. */
	write_data("device 0 total 1000000\nfail processes\nfail memory\n");
	CHECK_EQ_INT(nvml_processes(n, procs, 8, &count), -1);
	CHECK_STR(nvml_error(n), "unknown error");
	CHECK_EQ_INT(nvml_device_memory(n, 0, &used, &total), -1);

	unlink(data_path);
	CHECK_EQ_INT(nvml_processes(n, procs, 8, &count), 0);
	CHECK_EQ_INT(count, 0);
	CHECK_STR(nvml_error(n), "");
	nvml_close(n);
}

/* One device that cannot list its processes does not hide the others. */
static void test_one_device_failing(void)
{
	struct nvml_proc procs[8];
	size_t count = 0;
	struct nvml *n;

	write_data("process 0 10 100\nprocess 1 11 200\nprocess 2 12 300\nfail processes 1\n");
	n = open_fake(NVML_PROC_API_DETECT);
	if (!n)
		return;
	CHECK_EQ_INT(nvml_device_count(n), 3);
	CHECK_EQ_INT(nvml_processes(n, procs, 8, &count), -1);
	CHECK_STR(nvml_error(n), "unknown error");
	CHECK_EQ_INT(count, 2);
	CHECK(find(procs, count, 10, 0) && find(procs, count, 12, 2));
	CHECK(!find(procs, count, 11, 1));
	nvml_close(n);
}

/* More processes than the initial 256-record buffer holds. */
static void test_grows_on_insufficient_size(void)
{
	static struct nvml_proc procs[1200];
	struct strbuf sb = STRBUF_INIT;
	size_t count = 0;
	struct nvml *n;
	int ok = 1;

	for (int i = 0; i < 1100; i++)
		strbuf_addf(&sb, "process 0 %d %d\n", 1000 + i, 4096 * (i + 1));
	write_data(strbuf_str(&sb));
	n = open_fake(NVML_PROC_API_DETECT);
	if (n) {
		CHECK_EQ_INT(nvml_processes(n, procs, 1200, &count), 0);
		CHECK_EQ_INT(count, 1100);
		for (size_t i = 0; i < count; i++)
			if (procs[i].pid != 1000 + i || procs[i].used_bytes != 4096 * (i + 1))
				ok = 0;
		CHECK(ok);
		/* Steady state: a second call needs no growth and agrees. */
		CHECK_EQ_INT(nvml_processes(n, procs, 1200, &count), 0);
		CHECK_EQ_INT(count, 1100);
		nvml_close(n);
	}
	strbuf_release(&sb);
}

static void check_api(enum nvml_proc_api api, const char *extra)
{
	struct nvml_proc procs[4];
	char text[256];
	size_t count = 0;
	struct nvml *n;

	snprintf(text, sizeof(text), "%sprocess 0 11 111\nprocess 0 22 222\nprocess 0 33 unknown\n", extra);
	write_data(text);
	n = open_fake(api);
	if (!n)
		return;
	CHECK_EQ_INT(nvml_proc_api_in_use(n), api);
	CHECK_EQ_INT(nvml_processes(n, procs, 4, &count), 0);
	CHECK_EQ_INT(count, 3);
	if (count == 3) {
		CHECK(procs[0].pid == 11 && procs[0].used_bytes == 111);
		CHECK(procs[1].pid == 22 && procs[1].used_bytes == 222);
		CHECK(procs[2].pid == 33 && procs[2].used_unknown);
	}
	nvml_close(n);
}

/* Every record layout decodes: unversioned (16 bytes), _v2 and _v3 (24),
 * R535's _v3 (32). */
static void test_record_layouts(void)
{
	check_api(NVML_PROC_API_V1, "");
	check_api(NVML_PROC_API_V2, "");
	check_api(NVML_PROC_API_V3, "");
	check_api(NVML_PROC_API_V3_CC, "v3-record 32\n");
}

/* Two handles at once: NVML's init nests, closing one leaves the other. */
static void test_two_handles(void)
{
	struct nvml_proc procs[2];
	size_t count = 0;
	struct nvml *a, *b;

	write_data("process 0 9 99\n");
	a = open_fake(NVML_PROC_API_DETECT);
	b = open_fake(NVML_PROC_API_DETECT);
	nvml_close(a);
	if (b) {
		CHECK_EQ_INT(nvml_processes(b, procs, 2, &count), 0);
		CHECK_EQ_INT(count, 1);
	}
	nvml_close(b);
	nvml_close(NULL);
}

static void cleanup(void)
{
	if (data_path[0])
		unlink(data_path);
}

static void test_cleanup(void)
{
	cleanup();
	CHECK(access(data_path, F_OK) != 0);
}

TEST_MAIN("nvml",
	TEST(test_missing_library),
	TEST(test_missing_symbol),
	TEST(test_init_failure),
	TEST(test_no_file),
	TEST(test_round_trip),
	TEST(test_mig_duplicates_add),
	TEST(test_file_changes_between_calls),
	TEST(test_one_device_failing),
	TEST(test_grows_on_insufficient_size),
	TEST(test_record_layouts),
	TEST(test_two_handles),
	TEST(test_cleanup))

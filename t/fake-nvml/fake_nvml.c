/*
 * fake_nvml.c — a stand-in for NVIDIA's libnvidia-ml.so.1, for tests on
 * machines without a GPU. The Makefile builds it as build/t/libnvidia-ml.so.1;
 * point leakproof at it with LEAKPROOF_NVML_LIB=build/t/libnvidia-ml.so.1.
 *
 * It exports the NVML functions leakproof uses, with NVML's signatures and
 * record layouts. The numbers come from the text file named by
 * $FAKE_NVML_FILE, re-read on every call, so a test can change them while
 * a job runs (write a new file and rename() it over the old one). Format,
 * one item a line, '#' starts a comment, sizes in bytes:
 *
 *   device 0 total 85899345920 used 1073741824
 *   process 0 12345 536870912      # device pid bytes: a compute process
 *   process 0 12346 unknown        # usedGpuMemory = NVML_VALUE_NOT_AVAILABLE
 *   graphics 0 12345 536870912     # device pid bytes: a graphics process
 *   fail init                      # nvmlInit_v2 fails: driver not loaded
 *   fail count|memory|processes    # that query fails: unknown error
 *   fail processes 1               # only on device 1
 *   v3-record 32                   # the _v3 functions write R535's
 *                                  # 32-byte records (default 24)
 *
 * Devices: as many as the highest index named on a device, process or
 * graphics line, plus one; at least one. A device without a "device" line
 * has 80 GiB in total; "used" defaults to the sum of its processes' bytes.
 * No file (or FAKE_NVML_FILE unset): one device, no processes.
 *
 * Like NVIDIA's library (seen with driver 580 on an H200), the first
 * nvmlInit_v2 starts a thread of its own in the caller. It keeps the signal
 * mask it was born with, so a caller that loads NVML before blocking the
 * signals it reads from a signalfd loses them to that thread.
 *
 * Like NVML, every function but nvmlInit_v2 answers NVML_ERROR_UNINITIALIZED
 * before nvmlInit_v2 or after the matching nvmlShutdown (calls nest), and
 * the process lists answer NVML_ERROR_INSUFFICIENT_SIZE, with the count
 * needed, when the caller's array is too small.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_UNKNOWN = 999,
};
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
	unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessInfo_v3_cc_t;

/* The exported API (prototypes, for -Wmissing-prototypes). */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
						  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
						     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
						     void *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *count,
						   nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
						      nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
						      void *infos);

#define MAX_DEVICES 16
#define MAX_PROCS 4096
#define DEFAULT_TOTAL (80ULL << 30)

struct nvmlDevice_st {
	unsigned index;
};
static struct nvmlDevice_st devices[MAX_DEVICES];

struct fake_proc {
	unsigned device, pid;
	unsigned long long bytes;
	int graphics;
};

struct fake_state {
	unsigned ndevices;
	unsigned long long total[MAX_DEVICES], used[MAX_DEVICES];
	int has_used[MAX_DEVICES];
	struct fake_proc procs[MAX_PROCS];
	unsigned nprocs;
	int fail_init, fail_count, fail_memory;
	int fail_processes;             /* 0, 1 on every device, 2 + device on one */
	int v3_record_bytes;
};

static struct fake_state st;  /* re-read by every call */
static int init_depth;

static int parse_u64(const char *s, unsigned long long *out)
{
	char *end;

	if (!s)
		return -1;
	if (!strcmp(s, "unknown")) {
		*out = NVML_VALUE_NOT_AVAILABLE;
		return 0;
	}
	*out = strtoull(s, &end, 10);
	return end == s || *end ? -1 : 0;
}

static void see_device(unsigned long long d)
{
	if (d + 1 > st.ndevices)
		st.ndevices = (unsigned)d + 1;
}

static void parse_line(char *line)
{
	char *hash = strchr(line, '#');
	char *save = NULL, *w[8];
	int nw = 0;
	unsigned long long a, b, c;

	if (hash)
		*hash = '\0';
	for (char *tok = strtok_r(line, " \t\r\n", &save); tok && nw < 8;
	     tok = strtok_r(NULL, " \t\r\n", &save))
		w[nw++] = tok;
	if (nw == 0)
		return;
	if (!strcmp(w[0], "device") && nw >= 2 && !parse_u64(w[1], &a) && a < MAX_DEVICES) {
		see_device(a);
		for (int i = 2; i + 1 < nw; i += 2) {
			if (parse_u64(w[i + 1], &b))
				continue;
			if (!strcmp(w[i], "total")) {
				st.total[a] = b;
			} else if (!strcmp(w[i], "used")) {
				st.used[a] = b;
				st.has_used[a] = 1;
			}
		}
	} else if ((!strcmp(w[0], "process") || !strcmp(w[0], "graphics")) && nw >= 4 &&
		   !parse_u64(w[1], &a) && a < MAX_DEVICES && !parse_u64(w[2], &b) &&
		   !parse_u64(w[3], &c) && st.nprocs < MAX_PROCS) {
		see_device(a);
		st.procs[st.nprocs].device = (unsigned)a;
		st.procs[st.nprocs].pid = (unsigned)b;
		st.procs[st.nprocs].bytes = c;
		st.procs[st.nprocs].graphics = w[0][0] == 'g';
		st.nprocs++;
	} else if (!strcmp(w[0], "fail") && nw >= 2) {
		if (!strcmp(w[1], "init"))
			st.fail_init = 1;
		else if (!strcmp(w[1], "count"))
			st.fail_count = 1;
		else if (!strcmp(w[1], "memory"))
			st.fail_memory = 1;
		else if (!strcmp(w[1], "processes"))
			st.fail_processes = nw >= 3 && !parse_u64(w[2], &a) && a < MAX_DEVICES ?
					    2 + (int)a : 1;
	} else if (!strcmp(w[0], "v3-record") && nw >= 2 && !parse_u64(w[1], &a)) {
		st.v3_record_bytes = a == 32 ? 32 : 24;
	}
}

static void load(void)
{
	const char *path = getenv("FAKE_NVML_FILE");
	char line[512];
	FILE *f;

	memset(&st, 0, sizeof(st));
	st.v3_record_bytes = 24;
	if (path && (f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f))
			parse_line(line);
		fclose(f);
	}
	if (st.ndevices == 0)
		st.ndevices = 1;
	for (unsigned d = 0; d < st.ndevices; d++) {
		if (!st.total[d])
			st.total[d] = DEFAULT_TOTAL;
		if (!st.has_used[d])
			for (unsigned i = 0; i < st.nprocs; i++)
				if (st.procs[i].device == d && st.procs[i].bytes != NVML_VALUE_NOT_AVAILABLE)
					st.used[d] += st.procs[i].bytes;
	}
}

static void *driver_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* The thread lives from the first nvmlInit_v2 to the last nvmlShutdown,
 * so that dlclose() never unmaps code it runs. */
static pthread_t driver;
static int driver_started;

nvmlReturn_t nvmlInit_v2(void)
{
	load();
	if (st.fail_init)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	if (!driver_started && pthread_create(&driver, NULL, driver_thread, NULL) == 0)
		driver_started = 1;
	init_depth++;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void)
{
	return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
	if (init_depth == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (--init_depth == 0 && driver_started) {
		pthread_cancel(driver);   /* pause() is a cancellation point */
		pthread_join(driver, NULL);
		driver_started = 0;
	}
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
	switch (result) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!init_depth)
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	load();
	if (st.fail_count)
		return NVML_ERROR_UNKNOWN;
	*count = st.ndevices;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!init_depth)
		return NVML_ERROR_UNINITIALIZED;
	load();
	if (!device || index >= st.ndevices)
		return NVML_ERROR_INVALID_ARGUMENT;
	devices[index].index = index;
	*device = &devices[index];
	return NVML_SUCCESS;
}

/* The device's index, or -1 for a handle we did not hand out. */
static int device_index(nvmlDevice_t device)
{
	if (device < devices || device >= devices + MAX_DEVICES)
		return -1;
	return (int)(device - devices);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	int d = device_index(device);

	if (!init_depth)
		return NVML_ERROR_UNINITIALIZED;
	load();
	if (d < 0 || (unsigned)d >= st.ndevices || !memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (st.fail_memory)
		return NVML_ERROR_UNKNOWN;
	memory->total = st.total[d];
	memory->used = st.used[d] < st.total[d] ? st.used[d] : st.total[d];
	memory->free = memory->total - memory->used;
	return NVML_SUCCESS;
}

/* Fill infos with records of record_bytes bytes (16, 24 or 32). */
static nvmlReturn_t list_procs(nvmlDevice_t device, unsigned int *count, void *infos,
			       int graphics, int record_bytes)
{
	int d = device_index(device);
	unsigned n = 0, k = 0;

	if (!init_depth)
		return NVML_ERROR_UNINITIALIZED;
	load();
	if (d < 0 || (unsigned)d >= st.ndevices || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (st.fail_processes == 1 || st.fail_processes == 2 + d)
		return NVML_ERROR_UNKNOWN;
	for (unsigned i = 0; i < st.nprocs; i++)
		if (st.procs[i].device == (unsigned)d && st.procs[i].graphics == graphics)
			n++;
	if (n > *count || (n > 0 && !infos)) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < st.nprocs; i++) {
		const struct fake_proc *p = &st.procs[i];
		char *rec = (char *)infos + (size_t)k * (size_t)record_bytes;

		if (p->device != (unsigned)d || p->graphics != graphics)
			continue;
		if (record_bytes == 16) {
			nvmlProcessInfo_v1_t v = { p->pid, p->bytes };
			memcpy(rec, &v, sizeof(v));
		} else if (record_bytes == 24) {
			nvmlProcessInfo_v2_t v = { p->pid, p->bytes, 0xFFFFFFFFu, 0xFFFFFFFFu };
			memcpy(rec, &v, sizeof(v));
		} else {
			nvmlProcessInfo_v3_cc_t v = { p->pid, p->bytes, 0xFFFFFFFFu, 0xFFFFFFFFu, 0 };
			memcpy(rec, &v, sizeof(v));
		}
		k++;
	}
	*count = n;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
						  nvmlProcessInfo_v1_t *infos)
{
	return list_procs(device, count, infos, 0, (int)sizeof(nvmlProcessInfo_v1_t));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
						     nvmlProcessInfo_v2_t *infos)
{
	return list_procs(device, count, infos, 0, (int)sizeof(nvmlProcessInfo_v2_t));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
						     void *infos)
{
	load();
	return list_procs(device, count, infos, 0, st.v3_record_bytes);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *count,
						   nvmlProcessInfo_v1_t *infos)
{
	return list_procs(device, count, infos, 1, (int)sizeof(nvmlProcessInfo_v1_t));
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
						      nvmlProcessInfo_v2_t *infos)
{
	return list_procs(device, count, infos, 1, (int)sizeof(nvmlProcessInfo_v2_t));
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
						      void *infos)
{
	load();
	return list_procs(device, count, infos, 1, st.v3_record_bytes);
}

/*
 * nvml.c — GPU memory per process and per device through NVML, which is
 * loaded with dlopen() at run time: leakproof never links against, nor
 * includes a header of, CUDA. The few NVML types used are declared below
 * with the layout of NVIDIA's nvml.h (ABI: x86_64 and aarch64 Linux).
 *
 * Role: the sampler's GPU source (src/core/sampler.c calls
 * nvml_processes() and nvml_device_memory() every gpu_interval_ns).
 * Units: bytes.
 *
 * Cost: one NVML call per device for compute processes, one for graphics
 * processes, one for device memory. The process records land in one buffer
 * that lives as long as the struct nvml (256 records to start with); it
 * grows only when NVML answers NVML_ERROR_INSUFFICIENT_SIZE, so the steady
 * state allocates nothing.
 */
#include "platform/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- NVML's own types (nvml.h), declared here ---- */

typedef int nvmlReturn_t;                   /* enum nvmlReturn_enum */
typedef struct nvmlDevice_st *nvmlDevice_t; /* opaque handle */

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
};
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)    /* usedGpuMemory unknown */

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {                            /* nvmlProcessInfo_v1_t */
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvml_proc_info_v1;

typedef struct {                            /* nvmlProcessInfo_v2_t */
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvml_proc_info_v2;

typedef struct {                            /* R535's nvmlProcessInfo_t */
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
	unsigned long long usedGpuCcProtectedMemory;
} nvml_proc_info_v3_cc;

_Static_assert(sizeof(nvml_proc_info_v1) == 16, "NVML v1 process record is 16 bytes");
_Static_assert(sizeof(nvml_proc_info_v2) == 24, "NVML v2 process record is 24 bytes");
_Static_assert(sizeof(nvml_proc_info_v3_cc) == 32, "NVML R535 v3 process record is 32 bytes");

/* The largest record any layout uses: the buffer is sized in these, so a
 * library that writes bigger records than we expect still stays inside it. */
#define MAX_RECORD_BYTES sizeof(nvml_proc_info_v3_cc)

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*shutdown_fn)(void);
typedef nvmlReturn_t (*count_fn)(unsigned int *count);
typedef nvmlReturn_t (*handle_fn)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*memory_fn)(nvmlDevice_t device, nvmlMemory_t *memory);
/* All three process entry points share this shape; only the record differs. */
typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t device, unsigned int *count, void *infos);

/* ---- our side ---- */

#define MAX_DEVICES 64
#define INITIAL_RECORDS 256
#define MAX_RECORDS 65536        /* per call; a cap on growth driven by NVML */

enum { KIND_COMPUTE, KIND_GRAPHICS, KIND_COUNT };

struct nvml {
	void *dl;
	shutdown_fn shutdown;
	memory_fn get_memory;
	procs_fn get_procs[KIND_COUNT];  /* graphics may be NULL */
	enum nvml_proc_api api;

	unsigned device_count;
	nvmlDevice_t devices[MAX_DEVICES];

	void *records;                   /* records_cap * MAX_RECORDS_BYTES */
	unsigned records_cap;
	const char *error;
};

static const char *nvml_strerror(nvmlReturn_t r)
{
	switch (r) {
	case 0: return "success";
	case 1: return "NVML not initialised";
	case 2: return "invalid argument";
	case 3: return "not supported";
	case 4: return "no permission";
	case 5: return "already initialised";
	case 6: return "not found";
	case 7: return "insufficient size";
	case 8: return "insufficient power";
	case 9: return "driver not loaded";
	case 10: return "timeout";
	case 11: return "interrupt request issue";
	case 12: return "NVML shared library not found";
	case 13: return "function not found";
	case 14: return "corrupted infoROM";
	case 15: return "GPU is lost";
	case 16: return "GPU reset required";
	case 17: return "operating system call failed";
	case 18: return "driver/library version mismatch";
	case 19: return "in use";
	case 20: return "insufficient memory";
	case 21: return "no data";
	default: return "unknown error";
	}
}

/* Reasons that carry a detail live here (static, not thread-safe: opening
 * happens once, on the main thread). */
static char why_buf[512];

static void *sym(void *dl, const char *name)
{
	return dl ? dlsym(dl, name) : NULL;
}

static const char *proc_fn_name(int kind, enum nvml_proc_api api)
{
	static const char *const names[KIND_COUNT][4] = {
		{ "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2",
		  "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v3" },
		{ "nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses_v2",
		  "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3" },
	};
	return names[kind][api - NVML_PROC_API_V1];
}

static size_t record_bytes(enum nvml_proc_api api)
{
	switch (api) {
	case NVML_PROC_API_V1: return sizeof(nvml_proc_info_v1);
	case NVML_PROC_API_V3_CC: return sizeof(nvml_proc_info_v3_cc);
	default: return sizeof(nvml_proc_info_v2);
	}
}

/* The newest process API the library exports (compute decides; graphics
 * follows with whatever it has at the same version). */
static enum nvml_proc_api detect_api(void *dl)
{
	if (sym(dl, "nvmlDeviceGetComputeRunningProcesses_v3")) {
		/* R535 changed the _v3 record to 32 bytes without a new
		 * symbol version; later drivers moved that layout to
		 * nvmlDeviceGetRunningProcessDetailList and went back. */
		if (sym(dl, "nvmlDeviceGetConfComputeMemSizeInfo") &&
		    !sym(dl, "nvmlDeviceGetRunningProcessDetailList"))
			return NVML_PROC_API_V3_CC;
		return NVML_PROC_API_V3;
	}
	if (sym(dl, "nvmlDeviceGetComputeRunningProcesses_v2"))
		return NVML_PROC_API_V2;
	return NVML_PROC_API_V1;
}

static struct nvml *open_fail(struct nvml *n, const char **why, const char *reason)
{
	if (why)
		*why = reason;
	if (n) {
		if (n->dl)
			dlclose(n->dl);
		free(n->records);
		free(n);
	}
	return NULL;
}

struct nvml *nvml_open(const char **why)
{
	const char *path = getenv("LEAKPROOF_NVML_LIB");
	return nvml_open_lib(path && *path ? path : NULL, NVML_PROC_API_DETECT, why);
}

struct nvml *nvml_open_lib(const char *path, enum nvml_proc_api api, const char **why)
{
	struct nvml *n;
	init_fn init;
	count_fn get_count;
	handle_fn get_handle;
	unsigned count = 0;
	nvmlReturn_t r;

	if (!path)
		path = "libnvidia-ml.so.1";
	if ((unsigned)api > NVML_PROC_API_V3_CC)
		return open_fail(NULL, why, "invalid NVML process API");
	n = calloc(1, sizeof(*n));
	if (!n)
		return open_fail(NULL, why, "out of memory");
	n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!n->dl) {
		const char *e = dlerror();
		snprintf(why_buf, sizeof(why_buf), "cannot load '%s': %s", path, e ? e : "unknown error");
		return open_fail(n, why, why_buf);
	}

	init = (init_fn)sym(n->dl, "nvmlInit_v2");
	n->shutdown = (shutdown_fn)sym(n->dl, "nvmlShutdown");
	get_count = (count_fn)sym(n->dl, "nvmlDeviceGetCount_v2");
	get_handle = (handle_fn)sym(n->dl, "nvmlDeviceGetHandleByIndex_v2");
	n->get_memory = (memory_fn)sym(n->dl, "nvmlDeviceGetMemoryInfo");
	if (!init || !n->shutdown || !get_count || !get_handle || !n->get_memory) {
		snprintf(why_buf, sizeof(why_buf), "'%s' lacks an NVML function (driver too old?)", path);
		return open_fail(n, why, why_buf);
	}

	n->api = api == NVML_PROC_API_DETECT ? detect_api(n->dl) : api;
	for (int kind = 0; kind < KIND_COUNT; kind++)
		for (int a = n->api; a >= NVML_PROC_API_V1 && !n->get_procs[kind]; a--) {
			/* Keep the record layout: a fallback only to the
			 * same record size (v3 <-> v2), never to v1. */
			if (record_bytes((enum nvml_proc_api)a) != record_bytes(n->api))
				break;
			n->get_procs[kind] = (procs_fn)sym(n->dl, proc_fn_name(kind, (enum nvml_proc_api)a));
		}
	if (!n->get_procs[KIND_COMPUTE]) {
		snprintf(why_buf, sizeof(why_buf), "'%s' has no %s", path,
			 proc_fn_name(KIND_COMPUTE, n->api));
		return open_fail(n, why, why_buf);
	}

	r = init();
	if (r != NVML_SUCCESS) {
		snprintf(why_buf, sizeof(why_buf), "cannot initialise NVML: %s", nvml_strerror(r));
		return open_fail(n, why, why_buf);
	}
	r = get_count(&count);
	if (r != NVML_SUCCESS) {
		n->shutdown();
		snprintf(why_buf, sizeof(why_buf), "cannot count GPUs: %s", nvml_strerror(r));
		return open_fail(n, why, why_buf);
	}
	if (count > MAX_DEVICES)
		count = MAX_DEVICES;
	for (unsigned i = 0; i < count; i++) {
		r = get_handle(i, &n->devices[i]);
		if (r != NVML_SUCCESS) {
			n->shutdown();
			snprintf(why_buf, sizeof(why_buf), "cannot open GPU %u: %s", i, nvml_strerror(r));
			return open_fail(n, why, why_buf);
		}
	}
	n->device_count = count;

	n->records_cap = INITIAL_RECORDS;
	n->records = calloc(n->records_cap, MAX_RECORD_BYTES);
	if (!n->records) {
		n->shutdown();
		return open_fail(n, why, "out of memory");
	}
	n->error = "";
	if (why)
		*why = NULL;
	return n;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	n->shutdown();
	dlclose(n->dl);
	free(n->records);
	free(n);
}

int nvml_device_count(struct nvml *n)
{
	return n ? (int)n->device_count : 0;
}

enum nvml_proc_api nvml_proc_api_in_use(const struct nvml *n)
{
	return n->api;
}

const char *nvml_error(const struct nvml *n)
{
	return n && n->error ? n->error : "";
}

static int fail(struct nvml *n, nvmlReturn_t r)
{
	n->error = nvml_strerror(r);
	return -1;
}

/*
 * One list (compute or graphics) of device d into n->records. Returns the
 * number of records, or -1. Grows the buffer on INSUFFICIENT_SIZE (NVML then
 * sets *count to what it needs), a few times since processes may start
 * between two calls.
 */
static int query_records(struct nvml *n, procs_fn fn, nvmlDevice_t dev)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		unsigned count = n->records_cap;
		nvmlReturn_t r = fn(dev, &count, n->records);
		size_t want;
		void *p;

		if (r == NVML_SUCCESS)
			return count <= n->records_cap ? (int)count : (int)n->records_cap;
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			return fail(n, r);
		if (n->records_cap >= MAX_RECORDS) {
			n->error = "more GPU processes than leakproof reads";
			return -1;
		}
		want = (size_t)count + count / 2 + 16;
		if (want <= n->records_cap)
			want = (size_t)n->records_cap * 2;
		if (want > MAX_RECORDS)
			want = MAX_RECORDS;
		p = realloc(n->records, want * MAX_RECORD_BYTES);
		if (!p) {
			n->error = "out of memory";
			return -1;
		}
		n->records = p;
		n->records_cap = (unsigned)want;
	}
	n->error = "GPU process list kept growing";
	return -1;
}

static void record_at(const struct nvml *n, int i, unsigned *pid, unsigned long long *used)
{
	switch (n->api) {
	case NVML_PROC_API_V1: {
		const nvml_proc_info_v1 *v = (const nvml_proc_info_v1 *)n->records + i;
		*pid = v->pid;
		*used = v->usedGpuMemory;
		break;
	}
	case NVML_PROC_API_V3_CC: {
		const nvml_proc_info_v3_cc *v = (const nvml_proc_info_v3_cc *)n->records + i;
		*pid = v->pid;
		*used = v->usedGpuMemory;
		break;
	}
	default: {
		const nvml_proc_info_v2 *v = (const nvml_proc_info_v2 *)n->records + i;
		*pid = v->pid;
		*used = v->usedGpuMemory;
		break;
	}
	}
}

int nvml_processes(struct nvml *n, struct nvml_proc *out, size_t max, size_t *count)
{
	size_t filled = 0;
	int ret = 0;

	*count = 0;
	n->error = "";
	for (unsigned d = 0; d < n->device_count; d++) {
		size_t first = filled;  /* this device's entries start here */

		for (int kind = 0; kind < KIND_COUNT; kind++) {
			int nrec;

			if (!n->get_procs[kind])
				continue;
			nrec = query_records(n, n->get_procs[kind], n->devices[d]);
			if (nrec < 0) {
				/* Keep what this device listed so far and go
				 * on: the job may be on another device. */
				ret = -1;
				break;
			}
			for (int i = 0; i < nrec; i++) {
				unsigned pid;
				unsigned long long used;
				bool unknown;
				size_t j;

				record_at(n, i, &pid, &used);
				unknown = used == NVML_VALUE_NOT_AVAILABLE;
				if (unknown)
					used = 0;
				for (j = first; j < filled && out[j].pid != pid; j++)
					;
				if (j < filled) {
					/*
					 * Twice in the compute list: contexts in
					 * two MIG instances, which add up. In
					 * both lists (nvidia-smi's "C+G"): the
					 * same memory reported twice.
					 */
					if (kind == KIND_COMPUTE)
						out[j].used_bytes += used;
					else if (used > out[j].used_bytes)
						out[j].used_bytes = used;
					out[j].used_unknown = out[j].used_unknown && unknown;
					continue;
				}
				if (filled == max)
					continue;
				out[filled].pid = pid;
				out[filled].device = (int)d;
				out[filled].used_bytes = used;
				out[filled].used_unknown = unknown;
				filled++;
			}
		}
		*count = filled;
	}
	return ret;
}

int nvml_device_memory(struct nvml *n, int device, uint64_t *used, uint64_t *total)
{
	nvmlMemory_t mem;
	nvmlReturn_t r;

	if (device < 0 || (unsigned)device >= n->device_count) {
		n->error = "no such GPU";
		return -1;
	}
	r = n->get_memory(n->devices[device], &mem);
	if (r != NVML_SUCCESS)
		return fail(n, r);
	*used = mem.used;
	*total = mem.total;
	n->error = "";
	return 0;
}

/*
 * nvml.h — GPU memory through NVIDIA's NVML, loaded at run time with dlopen
 * so leakproof builds and runs on machines without CUDA.
 *
 * The library is $LEAKPROOF_NVML_LIB when set (tests point it at the fake in
 * t/fake-nvml), else "libnvidia-ml.so.1". Units: bytes.
 *
 * None of these functions prints: the sampler calls them at every GPU tick
 * and decides itself whether (and how often) to warn; nvml_error() says why
 * the last call failed. Not thread-safe: one struct nvml per thread.
 * See docs/internals/clients.md for NVML version handling.
 */
#ifndef LP_NVML_H
#define LP_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nvml;

/*
 * Which running-process entry points, and which record layout, to use.
 * DETECT picks the newest the library exports (_v3, then _v2, then the
 * unversioned one), and for _v3 the 32-byte records of the R535 drivers
 * when the library has nvmlDeviceGetConfComputeMemSizeInfo but not
 * nvmlDeviceGetRunningProcessDetailList, as those do. The others force a
 * choice (tests, and a way out if detection ever guesses wrong).
 */
enum nvml_proc_api {
	NVML_PROC_API_DETECT = 0,
	NVML_PROC_API_V1,      /* nvmlDeviceGet*RunningProcesses, 16-byte records */
	NVML_PROC_API_V2,      /* ..._v2, 24-byte records */
	NVML_PROC_API_V3,      /* ..._v3, 24-byte records */
	NVML_PROC_API_V3_CC,   /* ..._v3, 32-byte records (R535 drivers) */
};

/* Load and initialise NVML. NULL when it is not available; *why (static
 * storage, valid until the next nvml_open) says why, for a message such as
 * "GPU sampling off: ...". */
struct nvml *nvml_open(const char **why);
/* The same with an explicit library path (NULL: "libnvidia-ml.so.1") and
 * process API. */
struct nvml *nvml_open_lib(const char *path, enum nvml_proc_api api, const char **why);
/* Shut NVML down and unload it; NULL is fine. */
void nvml_close(struct nvml *n);

/* Devices found when opening (at most 64). */
int nvml_device_count(struct nvml *n);
/* The process API in use (never DETECT). */
enum nvml_proc_api nvml_proc_api_in_use(const struct nvml *n);

struct nvml_proc {
	unsigned pid;        /* as NVML sees it (may be another PID namespace) */
	int device;
	uint64_t used_bytes; /* 0 when used_unknown */
	bool used_unknown;   /* NVML_VALUE_NOT_AVAILABLE: NVML could not say
	                      * (no permission, MIG without privileges, WDDM) */
};
/* Compute (and graphics) processes on every device, one entry per process
 * and device (a process listed as compute and graphics counts once). Fills
 * up to max entries (the rest are dropped), sets *count to the number
 * filled. Returns 0, or -1 when a device's list could not be read; the
 * *count entries from the devices that answered are valid either way. No
 * allocation once the internal buffer (256 records per call to start with)
 * has grown to the largest list seen. */
int nvml_processes(struct nvml *n, struct nvml_proc *out, size_t max, size_t *count);
/* Device totals. Returns 0 or -1. */
int nvml_device_memory(struct nvml *n, int device, uint64_t *used, uint64_t *total);

/* Why the last failing call on n failed (static string), "" if none did. */
const char *nvml_error(const struct nvml *n);

#endif

/*
 * test_cause.c — naming why a job ended: the out-of-memory messages as the
 * frameworks print them, lines that must not match (hostile bytes, prose,
 * ANSI colour), last-wins ordering, every precedence rule of
 * cause_classify, and the evidence's cuts and printability.
 */
#include "tap.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cause.h"

/* The class a single line lands in: CAUSE_CLASS_* or -1. */
static int class_of(const char *line, size_t len, struct cause_scan *cs)
{
	cause_scan_init(cs);
	cause_scan_line(cs, line, len);
	int cls = -1;
	for (int i = 0; i < CAUSE_CLASS_COUNT; i++)
		if (cs->seen[i].line_no) {
			if (cls >= 0)
				return -2;  /* both: never expected */
			cls = i;
		}
	return cls;
}

static int class_str(const char *line, struct cause_scan *cs)
{
	return class_of(line, strlen(line), cs);
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

static void test_names(void)
{
	for (int i = CAUSE_EXIT; i < CAUSE_UNKNOWN; i++) {
		enum end_cause c = (enum end_cause)-1;
		CHECK_EQ_INT(cause_parse(cause_name((enum end_cause)i), &c), 0);
		CHECK_EQ_INT(c, i);
	}
	CHECK_STR(cause_name(CAUSE_EXIT), "exit");
	CHECK_STR(cause_name(CAUSE_ERROR), "error");
	CHECK_STR(cause_name(CAUSE_OOM_KILL), "oom-kill");
	CHECK_STR(cause_name(CAUSE_BUDGET_KILL), "budget-kill");
	CHECK_STR(cause_name(CAUSE_STOP_REQUESTED), "stop-requested");
	CHECK_STR(cause_name(CAUSE_CUDA_OOM), "cuda-oom");
	CHECK_STR(cause_name(CAUSE_HOST_ALLOC_FAIL), "host-alloc-fail");
	CHECK_STR(cause_name(CAUSE_CRASH), "crash");
	CHECK_STR(cause_name(CAUSE_SIGNAL), "signal");
	CHECK_STR(cause_name((enum end_cause)CAUSE_COUNT), "?");
	CHECK_STR(cause_name((enum end_cause)-1), "?");

	enum end_cause c = CAUSE_CRASH;
	CHECK_EQ_INT(cause_parse("", &c), -1);
	CHECK_EQ_INT(cause_parse("EXIT", &c), -1);
	CHECK_EQ_INT(cause_parse("exit ", &c), -1);
	CHECK_EQ_INT(cause_parse("oom", &c), -1);
	CHECK_EQ_INT(cause_parse(NULL, &c), -1);
	CHECK_EQ_INT(c, CAUSE_CRASH);

	/* names read back from a store */
	CHECK_EQ_INT(cause_read(NULL), CAUSE_NONE);
	CHECK_EQ_INT(cause_read(""), CAUSE_NONE);
	CHECK_EQ_INT(cause_read("time-limit"), CAUSE_TIME_LIMIT);
	CHECK_EQ_INT(cause_read("a-newer-cause"), CAUSE_UNKNOWN);
	CHECK_STR(cause_name(CAUSE_NONE), "");
	CHECK(cause_is_oom(CAUSE_CUDA_OOM) && cause_is_oom(CAUSE_BUDGET_KILL) && !cause_is_oom(CAUSE_CRASH));
}

static const char *const cuda_lines[] = {
	"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.11 GiB "
	"of which 3.12 MiB is free. Including non-PyTorch memory, this process has 79.10 GiB memory in use.",
	"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; "
	"13.50 GiB already allocated; 1.02 GiB free; 13.60 GiB reserved in total by PyTorch)",
	"RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 10.76 GiB total capacity; 9.12 GiB already "
	"allocated; 318.56 MiB free; 9.34 GiB reserved in total by PyTorch)",
	"torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 63.98 GiB",
	"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB.",
	"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
	"shape[1024,1024,256] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
	"tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:",
	"  (0) RESOURCE_EXHAUSTED:  OOM when allocating tensor with shape[64,3,224,224] and type float",
	"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
	"jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 1.00GiB (1073741824B) on device "
	"ordinal 0",
	"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Attempting to reserve 10.50G at the bottom of memory. "
	"That was not possible. There are 9.40G free, 0B reserved, and 9.40G reservable.",
	"Error allocating 4294967296 bytes of device memory (out of memory). Driver report 123 bytes free and 456 bytes total",
	"RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
	"cupy.cuda.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory",
	"cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes (allocated so far: 0 bytes).",
	"RuntimeError: CUDA error: out of memory",
	"2024-05-01 10:00:00.000000: I tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:753] failed to allocate "
	"3.77G (4046333952 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
};

static const char *const host_lines[] = {
	"MemoryError",
	"MemoryError: Unable to allocate 1.00 GiB",
	"MemoryError   ",
	"[rank0]: MemoryError",
	"E       MemoryError: Unable to allocate 8.00 GiB for an array with shape (1073741824,) and data type float64",
	"builtins.MemoryError",
	"numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB for an array with shape (1000000000,) and "
	"data type float64",
	"numpy._core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB for an array with shape (1000000000,) and "
	"data type float64",
	"OSError: [Errno 12] Cannot allocate memory",
	"bash: fork: Cannot allocate memory",
	"terminate called after throwing an instance of 'std::bad_alloc'",
	"  what():  std::bad_alloc",
	"RuntimeError: [enforce fail at alloc_cpu.cpp:83] data. DefaultCPUAllocator: not enough memory: you tried to "
	"allocate 1073741824 bytes.",
	"RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: can't allocate memory: you tried to "
	"allocate 8589934592 bytes. Error code 12 (Cannot allocate memory)",
	/* TensorFlow's OOM on the CPU is a host allocation failure. */
	"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
	"shape[100000,100000] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
};

static void test_cuda_messages(void)
{
	struct cause_scan cs;
	for (size_t i = 0; i < sizeof(cuda_lines) / sizeof(cuda_lines[0]); i++) {
		int cls = class_str(cuda_lines[i], &cs);
		if (cls != CAUSE_CLASS_CUDA_OOM)
			fprintf(stderr, "  not cuda-oom: %s\n", cuda_lines[i]);
		CHECK_EQ_INT(cls, CAUSE_CLASS_CUDA_OOM);
		/* Short lines are kept whole, less leading blanks. */
		const char *want = cuda_lines[i] + strspn(cuda_lines[i], " ");
		if (strlen(want) <= CAUSE_LINE_MAX)
			CHECK_STR(cs.seen[CAUSE_CLASS_CUDA_OOM].text, want);
		CHECK_EQ_INT(cs.seen[CAUSE_CLASS_CUDA_OOM].line_no, 1);
	}
}

static void test_host_messages(void)
{
	struct cause_scan cs;
	for (size_t i = 0; i < sizeof(host_lines) / sizeof(host_lines[0]); i++) {
		int cls = class_str(host_lines[i], &cs);
		if (cls != CAUSE_CLASS_HOST_ALLOC)
			fprintf(stderr, "  not host-alloc-fail: %s\n", host_lines[i]);
		CHECK_EQ_INT(cls, CAUSE_CLASS_HOST_ALLOC);
	}
	/* Kept trimmed. */
	class_str("  what():  std::bad_alloc", &cs);
	CHECK_STR(cs.seen[CAUSE_CLASS_HOST_ALLOC].text, "what():  std::bad_alloc");
	class_str("MemoryError   ", &cs);
	CHECK_STR(cs.seen[CAUSE_CLASS_HOST_ALLOC].text, "MemoryError");
}

/* Each message on its own, so that each is found by itself (not only
 * beside another in a longer line). */
static void test_bare_messages(void)
{
	static const char *const cuda[] = {
		"CUDA out of memory", "torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError",
		"cupy.cuda.memory.OutOfMemoryError", "of device memory (out of memory)", "CUBLAS_STATUS_ALLOC_FAILED",
		"cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", "CUDA error: out of memory",
		"OOM when allocating tensor", "ResourceExhaustedError", "RESOURCE_EXHAUSTED: memory",
	};
	static const char *const host[] = {
		"MemoryError", "_ArrayMemoryError:", "Cannot allocate memory", "std::bad_alloc",
		"DefaultCPUAllocator: memory",
	};
	struct cause_scan cs;
	for (size_t i = 0; i < sizeof(cuda) / sizeof(cuda[0]); i++) {
		CHECK_EQ_INT(class_str(cuda[i], &cs), CAUSE_CLASS_CUDA_OOM);
		CHECK_STR(cs.seen[CAUSE_CLASS_CUDA_OOM].text, cuda[i]);
		/* and one byte short of it is nothing */
		CHECK_EQ_INT(class_of(cuda[i] + 1, strlen(cuda[i]) - 1, &cs), -1);
		CHECK_EQ_INT(class_of(cuda[i], strlen(cuda[i]) - 1, &cs), -1);
	}
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
		CHECK_EQ_INT(class_str(host[i], &cs), CAUSE_CLASS_HOST_ALLOC);
		CHECK_STR(cs.seen[CAUSE_CLASS_HOST_ALLOC].text, host[i]);
		CHECK_EQ_INT(class_of(host[i] + 1, strlen(host[i]) - 1, &cs), -1);
	}
	/* Keys in other cases are not messages. */
	CHECK_EQ_INT(class_str("cuda OUT OF MEMORY, MemOrY, Alloc, EXHAUSTed", &cs), -1);
}

static void test_non_matches(void)
{
	static const char *const plain[] = {
		"",
		"x",
		"Epoch 1/10 loss=0.2531 acc=0.91",
		"OOM",
		"OOM!",
		"WARNING: possible OOM ahead, reducing batch size",
		"oom-killer is enabled",
		"malloc: out of memory",
		"Out of memory: Killed process 1234 (python) total-vm:123kB",
		"cuda out of memory",
		"CUDA memory allocated: 1.2 GiB, reserved 2.0 GiB",
		"torch.cuda.memory_allocated() = 1073741824",
		"no MemoryErrors so far",
		"no MemoryError so far",
		"MemoryErrors: 0",
		"    raise MemoryError()",
		"caught MemoryError() in worker 3, retrying",
		"java.lang.OutOfMemoryError: Java heap space",
		"OutOfMemoryError: Java heap space",
		"ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
		("grpc._channel._InactiveRpcError: StatusCode.RESOURCE_EXHAUSTED: Received message larger than max "
		 "(5000000 vs. 4194304)"),
		"RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Requests'",
		"Resource exhausted, backing off",
		"CUDA error: device-side assert triggered",
		"CUDA error: an illegal memory access was encountered",
		"DefaultCPUAllocator is in use",
		"the allocator allocated all memory it could",
	};
	struct cause_scan cs;
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		int cls = class_str(plain[i], &cs);
		if (cls != -1)
			fprintf(stderr, "  matched: %s\n", plain[i]);
		CHECK_EQ_INT(cls, -1);
	}

	/* 4096 bytes of junk, every byte value, NULs included. */
	char *junk = malloc(CAUSE_SCAN_MAX);
	uint32_t x = 12345;
	for (size_t i = 0; i < CAUSE_SCAN_MAX; i++) {
		x = x * 1103515245u + 12345u;
		junk[i] = (char)(x >> 16);
	}
	CHECK_EQ_INT(class_of(junk, CAUSE_SCAN_MAX, &cs), -1);
	memset(junk, 'x', CAUSE_SCAN_MAX);
	CHECK_EQ_INT(class_of(junk, CAUSE_SCAN_MAX, &cs), -1);
	/* Words of the prefilter everywhere, and still nothing. */
	for (size_t i = 0; i + 12 <= CAUSE_SCAN_MAX; i += 12)
		memcpy(junk + i, "memoryALLOC ", 12);
	CHECK_EQ_INT(class_of(junk, CAUSE_SCAN_MAX, &cs), -1);
	/* Binary with a NUL in the middle of a message. */
	static const char nul[] = "\x00\xff\xfe CUDA out of\0memory \x80\x81";
	CHECK_EQ_INT(class_of(nul, sizeof(nul) - 1, &cs), -1);
	/* A line that is only an escape sequence, or one cut inside one. */
	CHECK_EQ_INT(class_str("\x1b[0m", &cs), -1);
	CHECK_EQ_INT(class_str("memory \x1b[", &cs), -1);
	CHECK_EQ_INT(class_str("memory \x1b]8;;http://x", &cs), -1);
	CHECK_EQ_INT(class_str("memory \x1b", &cs), -1);
	/* A message beyond the scanned bytes is not seen. */
	char *big = malloc(CAUSE_SCAN_MAX + 64);
	memset(big, 'x', CAUSE_SCAN_MAX + 64);
	memcpy(big + CAUSE_SCAN_MAX + 10, "MemoryError", 11);
	CHECK_EQ_INT(class_of(big, CAUSE_SCAN_MAX + 21, &cs), -1);
	/* A NULL line counts and matches nothing. */
	cause_scan_init(&cs);
	cause_scan_line(&cs, NULL, 0);
	CHECK_EQ_INT(cs.lines, 1);
	free(big);
	free(junk);
}

static void test_ansi(void)
{
	struct cause_scan cs;
	/* Python 3.13's coloured traceback. */
	CHECK_EQ_INT(class_str("\x1b[1;35mMemoryError\x1b[0m: \x1b[35mUnable to allocate 1.00 GiB\x1b[0m", &cs),
	             CAUSE_CLASS_HOST_ALLOC);
	CHECK_STR(cs.seen[CAUSE_CLASS_HOST_ALLOC].text, "MemoryError: Unable to allocate 1.00 GiB");
	CHECK_EQ_INT(class_str("\x1b[31m\x1b[1mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory.\x1b[0m", &cs),
	             CAUSE_CLASS_CUDA_OOM);
	CHECK_STR(cs.seen[CAUSE_CLASS_CUDA_OOM].text, "torch.OutOfMemoryError: CUDA out of memory.");
	/* rich's file hyperlinks (OSC 8), ended by ST and by BEL. */
	CHECK_EQ_INT(class_str("\x1b]8;;file:///train.py\x1b\\train.py\x1b]8;;\x1b\\: \x1b[31mCUDA out of memory\x1b[m", &cs),
	             CAUSE_CLASS_CUDA_OOM);
	CHECK_STR(cs.seen[CAUSE_CLASS_CUDA_OOM].text, "train.py: CUDA out of memory");
	CHECK_EQ_INT(class_str("\x1b]8;;file:///a\abad_alloc: std::bad_alloc\x1b(B", &cs), CAUSE_CLASS_HOST_ALLOC);
	CHECK_STR(cs.seen[CAUSE_CLASS_HOST_ALLOC].text, "bad_alloc: std::bad_alloc");
	/* Colour between words of a MemoryError line: the word rule holds. */
	CHECK_EQ_INT(class_str("no \x1b[1mMemoryError\x1b[0m so far", &cs), -1);
}

static void test_last_wins(void)
{
	struct cause_scan cs;
	struct cause_input in = { .exited = true, .exit_code = 1, .scan = &cs };
	char ev[512];

	cause_scan_init(&cs);
	CHECK_EQ_INT(cause_classify(&in, ev, sizeof(ev)), CAUSE_ERROR);
	cause_scan_line(&cs, "step 1", 6);
	cause_scan_line(&cs, "RuntimeError: CUDA error: out of memory", 39);
	CHECK_EQ_INT(cause_classify(&in, ev, sizeof(ev)), CAUSE_CUDA_OOM);
	CHECK_STR(ev, "RuntimeError: CUDA error: out of memory");
	cause_scan_line(&cs, "OSError: [Errno 12] Cannot allocate memory", 42);
	CHECK_EQ_INT(cause_classify(&in, ev, sizeof(ev)), CAUSE_HOST_ALLOC_FAIL);
	CHECK_STR(ev, "OSError: [Errno 12] Cannot allocate memory");
	cause_scan_line(&cs, "step 2", 6);
	CHECK_EQ_INT(cause_classify(&in, ev, sizeof(ev)), CAUSE_HOST_ALLOC_FAIL);
	cause_scan_line(&cs, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", 71);
	CHECK_EQ_INT(cause_classify(&in, ev, sizeof(ev)), CAUSE_CUDA_OOM);
	CHECK_STR(ev, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.");
	CHECK_EQ_INT(cs.seen[CAUSE_CLASS_CUDA_OOM].line_no, 5);
	CHECK_EQ_INT(cs.seen[CAUSE_CLASS_HOST_ALLOC].line_no, 3);
	/* The same class again replaces the kept line. */
	cause_scan_line(&cs, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED", 52);
	CHECK_STR(cs.seen[CAUSE_CLASS_CUDA_OOM].text, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED");
	CHECK_EQ_INT(cs.seen[CAUSE_CLASS_CUDA_OOM].line_no, 6);
	CHECK_EQ_INT(cs.lines, 6);
	/* An uncaught std::bad_alloc ends in SIGABRT: the message names it. */
	cause_scan_line(&cs, "terminate called after throwing an instance of 'std::bad_alloc'", 63);
	in = (struct cause_input){ .signal = SIGABRT, .core_dumped = true, .scan = &cs };
	CHECK_EQ_INT(cause_classify(&in, ev, sizeof(ev)), CAUSE_HOST_ALLOC_FAIL);
	CHECK_STR(ev, "terminate called after throwing an instance of 'std::bad_alloc'");
}

static enum end_cause classify(struct cause_input in, char *ev)
{
	return cause_classify(&in, ev, 256);
}

static void test_precedence(void)
{
	char ev[256];
	struct cause_scan cuda, host;
	cause_scan_init(&cuda);
	cause_scan_line(&cuda, "RuntimeError: CUDA out of memory.", 33);
	cause_scan_init(&host);
	cause_scan_line(&host, "MemoryError", 11);

	/* 1. budget-kill: before everything, unless it exited 0. */
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGKILL, .budget_killed = true, .oom_kills = 2,
	                                            .stop_requested = true, .scan = &cuda }, ev), CAUSE_BUDGET_KILL);
	CHECK_STR(ev, "leakproof sent SIGKILL to enforce a budget; killed by SIGKILL; oom_kill count also rose by 2");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGKILL, .budget_killed = true }, ev), CAUSE_BUDGET_KILL);
	CHECK_STR(ev, "leakproof sent SIGKILL to enforce a budget; killed by SIGKILL");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 137, .budget_killed = true }, ev),
	             CAUSE_BUDGET_KILL);
	CHECK_STR(ev, "leakproof sent SIGKILL to enforce a budget; exited 137 (128+SIGKILL)");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .budget_killed = true }, ev), CAUSE_EXIT);

	/* 2. oom-kill: any non-zero end with the counter risen. */
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGKILL, .oom_kills = 1 }, ev), CAUSE_OOM_KILL);
	CHECK_STR(ev, "oom_kill count rose by 1; killed by SIGKILL");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 1, .oom_kills = 3, .scan = &cuda }, ev),
	             CAUSE_OOM_KILL);
	CHECK_STR(ev, "oom_kill count rose by 3; exited 1");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGKILL, .oom_kills = 1, .stop_requested = true }, ev),
	             CAUSE_OOM_KILL);
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .oom_kills = 1 }, ev), CAUSE_EXIT);

	/* 3. stop-requested: whatever the status. */
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .stop_requested = true }, ev), CAUSE_STOP_REQUESTED);
	CHECK_STR(ev, "stop requested by leakproof; exited 0");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGTERM, .stop_requested = true }, ev),
	             CAUSE_STOP_REQUESTED);
	CHECK_STR(ev, "stop requested by leakproof; killed by SIGTERM");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGSEGV, .core_dumped = true, .stop_requested = true }, ev),
	             CAUSE_STOP_REQUESTED);
	CHECK_STR(ev, "stop requested by leakproof; killed by SIGSEGV (core dumped)");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 1, .stop_requested = true,
	                                            .scan = &cuda }, ev), CAUSE_STOP_REQUESTED);

	/* 4. exit 0, even after an out-of-memory line. */
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true }, ev), CAUSE_EXIT);
	CHECK_STR(ev, "exited 0");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .scan = &cuda }, ev), CAUSE_EXIT);
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .scan = &host }, ev), CAUSE_EXIT);

	/* 5. the last out-of-memory line, before crash and signal. */
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 1, .scan = &cuda }, ev), CAUSE_CUDA_OOM);
	CHECK_STR(ev, "RuntimeError: CUDA out of memory.");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGABRT, .core_dumped = true, .scan = &cuda }, ev),
	             CAUSE_CUDA_OOM);
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGTERM, .scan = &cuda }, ev), CAUSE_CUDA_OOM);
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 1, .scan = &host }, ev),
	             CAUSE_HOST_ALLOC_FAIL);
	CHECK_STR(ev, "MemoryError");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGSEGV, .scan = &host }, ev), CAUSE_HOST_ALLOC_FAIL);

	/* 6. crash signals, or any core dump. */
	static const int crash[] = { SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE };
	for (size_t i = 0; i < 5; i++)
		CHECK_EQ_INT(classify((struct cause_input){ .signal = crash[i] }, ev), CAUSE_CRASH);
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGSEGV, .core_dumped = true }, ev), CAUSE_CRASH);
	CHECK_STR(ev, "killed by SIGSEGV (core dumped)");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGBUS }, ev), CAUSE_CRASH);
	CHECK_STR(ev, "killed by SIGBUS");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGQUIT, .core_dumped = true }, ev), CAUSE_CRASH);
	CHECK_STR(ev, "killed by SIGQUIT (core dumped)");

	/* 7. any other signal. */
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGTERM }, ev), CAUSE_SIGNAL);
	CHECK_STR(ev, "killed by SIGTERM");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGKILL }, ev), CAUSE_SIGNAL);
	CHECK_STR(ev, "killed by SIGKILL");
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGINT }, ev), CAUSE_SIGNAL);
	CHECK_EQ_INT(classify((struct cause_input){ .signal = SIGRTMIN + 2 }, ev), CAUSE_SIGNAL);
	CHECK(!strncmp(ev, "killed by signal ", 17));

	/* 8. error. */
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 1 }, ev), CAUSE_ERROR);
	CHECK_STR(ev, "exited 1");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 2, .scan = &(struct cause_scan){ 0 } },
	                      ev), CAUSE_ERROR);
	CHECK_STR(ev, "exited 2");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 137 }, ev), CAUSE_ERROR);
	CHECK_STR(ev, "exited 137 (128+SIGKILL)");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = true, .exit_code = 255 }, ev), CAUSE_ERROR);
	CHECK_STR(ev, "exited 255");
	CHECK_EQ_INT(classify((struct cause_input){ .exited = false, .signal = 0 }, ev), CAUSE_ERROR);
	CHECK_STR(ev, "ended with an unknown status");

	/* Evidence is optional, and cut to fit. */
	struct cause_input in = { .signal = SIGSEGV, .core_dumped = true };
	CHECK_EQ_INT(cause_classify(&in, NULL, 0), CAUSE_CRASH);
	char small[8] = "xxxxxxx";
	CHECK_EQ_INT(cause_classify(&in, small, 0), CAUSE_CRASH);
	CHECK_STR(small, "xxxxxxx");
	CHECK_EQ_INT(cause_classify(&in, small, sizeof(small)), CAUSE_CRASH);
	CHECK_STR(small, "killed ");
	in.scan = &cuda;
	in.exited = true, in.exit_code = 3;
	CHECK_EQ_INT(cause_classify(&in, small, sizeof(small)), CAUSE_CUDA_OOM);
	CHECK_STR(small, "Runtime");
}

static void test_truncation(void)
{
	struct cause_scan cs;
	char *line = malloc(CAUSE_SCAN_MAX + 1);
	const char *msg = "CUDA out of memory";
	size_t ml = strlen(msg);
	const char *kept = cs.seen[CAUSE_CLASS_CUDA_OOM].text;

	/* Message near the start: the head is kept, "..." marks the cut. */
	memset(line, 'a', CAUSE_SCAN_MAX);
	memcpy(line + 10, msg, ml);
	CHECK_EQ_INT(class_of(line, CAUSE_SCAN_MAX, &cs), CAUSE_CLASS_CUDA_OOM);
	CHECK_EQ_INT(strlen(kept), CAUSE_LINE_MAX);
	CHECK(!strncmp(kept + 10, msg, ml));
	CHECK(!strcmp(kept + CAUSE_LINE_MAX - 3, "..."));

	/* In the middle: cut at both ends, the message shown. */
	memset(line, 'b', CAUSE_SCAN_MAX);
	memcpy(line + 2000, msg, ml);
	CHECK_EQ_INT(class_of(line, CAUSE_SCAN_MAX, &cs), CAUSE_CLASS_CUDA_OOM);
	CHECK_EQ_INT(strlen(kept), CAUSE_LINE_MAX);
	CHECK(!strncmp(kept, "...b", 4));
	CHECK(strstr(kept, msg) != NULL);
	CHECK(!strcmp(kept + CAUSE_LINE_MAX - 4, "b..."));

	/* At the end: the tail is kept. */
	memset(line, 'c', CAUSE_SCAN_MAX);
	memcpy(line + CAUSE_SCAN_MAX - ml, msg, ml);
	CHECK_EQ_INT(class_of(line, CAUSE_SCAN_MAX, &cs), CAUSE_CLASS_CUDA_OOM);
	CHECK_EQ_INT(strlen(kept), CAUSE_LINE_MAX);
	CHECK(!strncmp(kept, "...c", 4));
	CHECK(!strcmp(kept + CAUSE_LINE_MAX - ml, msg));

	/* Exactly the cap is whole; one more byte is cut. */
	memset(line, 'd', CAUSE_LINE_MAX);
	memcpy(line, msg, ml);
	CHECK_EQ_INT(class_of(line, CAUSE_LINE_MAX, &cs), CAUSE_CLASS_CUDA_OOM);
	CHECK_EQ_INT(strlen(kept), CAUSE_LINE_MAX);
	CHECK(kept[CAUSE_LINE_MAX - 1] == 'd');
	memset(line, 'd', CAUSE_LINE_MAX + 1);
	memcpy(line, msg, ml);
	CHECK_EQ_INT(class_of(line, CAUSE_LINE_MAX + 1, &cs), CAUSE_CLASS_CUDA_OOM);
	CHECK_EQ_INT(strlen(kept), CAUSE_LINE_MAX);
	CHECK(!strcmp(kept + CAUSE_LINE_MAX - 3, "..."));

	/* Junk bytes around a message become '?', tabs spaces. */
	static const char dirty[] = "\t\x01\xff\tCUDA out of memory.\x7f\x80 tail\x00 end \t";
	CHECK_EQ_INT(class_of(dirty, sizeof(dirty) - 1, &cs), CAUSE_CLASS_CUDA_OOM);
	CHECK_STR(kept, "?? CUDA out of memory.?? tail? end");

	/* Junk everywhere, message in the middle: the evidence is printable. */
	uint32_t x = 99;
	for (size_t i = 0; i < CAUSE_SCAN_MAX; i++) {
		x = x * 1103515245u + 12345u;
		line[i] = (char)(x >> 16);
	}
	memcpy(line + 3000, "std::bad_alloc", 14);
	CHECK_EQ_INT(class_of(line, CAUSE_SCAN_MAX, &cs), CAUSE_CLASS_HOST_ALLOC);
	char ev[1024];
	struct cause_input in = { .exited = true, .exit_code = 134, .scan = &cs };
	CHECK_EQ_INT(cause_classify(&in, ev, sizeof(ev)), CAUSE_HOST_ALLOC_FAIL);
	CHECK(strlen(ev) <= CAUSE_LINE_MAX);
	CHECK(printable(ev));
	CHECK(strstr(ev, "std::bad_alloc") != NULL);
	free(line);
}

/* cause_scan_skip() of 300 bytes of bg with key written at offset at. */
static size_t skip_with_key(const char *bg, const char *key, size_t at)
{
	char line[300];
	memcpy(line, bg, sizeof(line));
	memcpy(line + at, key, strlen(key));
	return cause_scan_skip(line, sizeof(line));
}

/* cause_scan_skip: never past the first key, at any offset and alignment,
 * and n when there is none; every message of a line is found after it. */
static void test_skip(void)
{
	static const char *const keys[] = { "memory", "MEMORY", "alloc", "ALLOC", "exhausted", "EXHAUSTED" };
	char buf[300];
	uint32_t x = 7;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		char c = (char)('b' + (x >> 16) % 20);        /* b..u: no key can form */
		buf[i] = c == 'o' || c == 'l' || c == 'a' || c == 'r' ? '.' : c;
	}
	CHECK_EQ_INT(cause_scan_skip(buf, sizeof(buf)), sizeof(buf));
	CHECK_EQ_INT(cause_scan_skip(buf, 0), 0);
	CHECK_EQ_INT(cause_scan_skip("ory", 2), 2);
	bool all = true;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		for (size_t at = 0; at + 12 < sizeof(buf); at += 7) {
			all = all && skip_with_key(buf, keys[k], at) < at + strlen(keys[k]);
		}
	CHECK(all);
	/* letters that pass the first filter but make no key ("a.s", "o y",
	 * "l-c", "class") are crossed: the first key is found where it is */
	char near[300];
	for (size_t i = 0; i < sizeof(near); i++)
		near[i] = "a.so ylLc class"[i % 15];
	static const size_t triple_at[] = { 3, 3, 2, 2, 3, 3 };   /* "ory", "loc", "aus" in keys[k] */
	bool exact = true;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		for (size_t at = 0; at + 12 < sizeof(near); at += 5) {
			exact = exact && skip_with_key(near, keys[k], at) == at + triple_at[k];
		}
	CHECK(exact);
	CHECK_EQ_INT(cause_scan_skip(near, sizeof(near)), sizeof(near));
	/* a line found by the skip holds its message */
	struct cause_scan cs;
	static const char msg[] = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB";
	CHECK(cause_scan_skip(msg, sizeof(msg) - 1) < sizeof(msg) - 1);
	CHECK_EQ_INT(class_of(msg, sizeof(msg) - 1, &cs), CAUSE_CLASS_CUDA_OOM);
}

TEST_MAIN("cause", TEST(test_skip), TEST(test_names), TEST(test_cuda_messages), TEST(test_host_messages), TEST(test_bare_messages),
          TEST(test_non_matches),
          TEST(test_ansi), TEST(test_last_wins), TEST(test_precedence), TEST(test_truncation))

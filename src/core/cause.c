/*
 * cause.c — naming why a job's process ended (see cause.h for the
 * vocabulary and its precedence, docs/internals/causes.md for the messages).
 *
 * The scanner runs on every output line, so it crosses a line once: every
 * message it looks for contains a key, "mory", "MORY", "lloc", "LLOC",
 * "haus" or "HAUS" ("memory", "MEMORY", "alloc", "ALLOC", "Exhausted",
 * "EXHAUSTED"), at an offset known in advance. A Horspool skip over the six
 * keys at once finds them, stepping up to 4 bytes at a time; only where a
 * key is found are the messages that hold it compared, exactly
 * (case-sensitively). Most lines hold no key and cost less than a
 * nanosecond a byte (50 ns for a typical 80-byte log line). A line that holds a key and an escape byte is stripped
 * of ANSI sequences and looked at again. Nothing here allocates; the one
 * scratch buffer is on the stack.
 */
#include "core/cause.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- the scanner ------------------------------------------------------ */

/* Search for a string literal (only on lines that hold a message). */
#define FIND(s, n, lit) ((const char *)memmem((s), (n), (lit), sizeof(lit) - 1))

/*
 * The messages, each with the offset of its key: the first "mory", "MORY",
 * "lloc", "LLOC", "haus" or "HAUS" in it. Matching is exact (case-sensitive)
 * around a key found in the line.
 */
enum msg {
	/* the GPU ran out of memory */
	MSG_CUDA_OOM, MSG_TORCH_CUDA_OOM_ERROR, MSG_TORCH_OOM_ERROR, MSG_CUPY_OOM_ERROR, MSG_DEVICE_MEMORY,
	MSG_CUBLAS_ALLOC, MSG_CUDART_ALLOC, MSG_CU_OUT_OF_MEMORY,
	MSG_OUT_OF_MEMORY,        /* only after "CUDA error:" */
	/* TensorFlow and XLA: the GPU, or the host when the device is a CPU */
	MSG_TF_OOM, MSG_TF_EXHAUSTED, MSG_XLA_EXHAUSTED,
	/* the host */
	MSG_MEMORY_ERROR, MSG_ENOMEM, MSG_BAD_ALLOC, MSG_CPU_ALLOCATOR,
	MSG_COUNT
};

struct msg_def {
	const char *text;
	unsigned char len, key_at;
};

#define M(text, key_at) { text, sizeof(text) - 1, key_at }
static const struct msg_def msgs[MSG_COUNT] = {
	[MSG_CUDA_OOM] = M("CUDA out of memory", 14),                     /* PyTorch */
	[MSG_TORCH_CUDA_OOM_ERROR] = M("torch.cuda.OutOfMemoryError", 18), /* PyTorch 1.13 to 2.4 */
	[MSG_TORCH_OOM_ERROR] = M("torch.OutOfMemoryError", 13),          /* PyTorch 2.5 on, any device */
	[MSG_CUPY_OOM_ERROR] = M("cupy.cuda.memory.OutOfMemoryError", 12),
	[MSG_DEVICE_MEMORY] = M("of device memory (out of memory)", 12),  /* Theano, old CUDA wrappers */
	[MSG_CUBLAS_ALLOC] = M("CUBLAS_STATUS_ALLOC_FAILED", 15),
	[MSG_CUDART_ALLOC] = M("cudaErrorMemoryAllocation", 11),          /* CUDA runtime API */
	[MSG_CU_OUT_OF_MEMORY] = M("CUDA_ERROR_OUT_OF_MEMORY", 20),       /* driver API (TensorFlow, JAX logs) */
	[MSG_OUT_OF_MEMORY] = M("out of memory", 9),
	[MSG_TF_OOM] = M("OOM when allocating tensor", 10),
	[MSG_TF_EXHAUSTED] = M("ResourceExhaustedError", 10),
	[MSG_XLA_EXHAUSTED] = M("RESOURCE_EXHAUSTED", 11),
	[MSG_MEMORY_ERROR] = M("MemoryError", 2),                         /* Python, numpy's _ArrayMemoryError */
	[MSG_ENOMEM] = M("Cannot allocate memory", 8),                    /* strerror(ENOMEM) */
	[MSG_BAD_ALLOC] = M("std::bad_alloc", 10),
	[MSG_CPU_ALLOCATOR] = M("DefaultCPUAllocator:", 11),              /* PyTorch on the CPU */
};
#undef M

/*
 * Boyer–Moore–Horspool over the six four-byte keys at once. Indexed by the
 * byte that ends the current four-byte window: 4 minus how far the window
 * may move on. 4 marks a byte that ends a key (y, c, s in either case):
 * the window is compared, then moves 4, as these bytes occur nowhere else
 * in a key. A byte in no key (0) moves it 4. So a line without these
 * letters is crossed in n / 4 steps, ordinary text in well under n.
 */
static const unsigned char near_key[256] = {
	['m'] = 1, ['M'] = 1, ['h'] = 1, ['H'] = 1,                         /* move 3 */
	['l'] = 2, ['L'] = 2, ['a'] = 2, ['A'] = 2,                         /* move 2 */
	['o'] = 3, ['O'] = 3, ['r'] = 3, ['R'] = 3, ['u'] = 3, ['U'] = 3,   /* move 1 */
	['y'] = 4, ['Y'] = 4, ['c'] = 4, ['C'] = 4, ['s'] = 4, ['S'] = 4,
};

static uint32_t load4(const char *p)
{
	uint32_t w;
	memcpy(&w, p, 4);
	return w;
}

static bool is_ident(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || c == '\n';
}

/*
 * Python's MemoryError where Python prints it as the exception line: the
 * name (qualified, or numpy's _ArrayMemoryError) ending the line or followed
 * by ':'. So "MemoryError", "MemoryError: Unable to allocate ...",
 * "[rank0]: builtins.MemoryError" match; prose ("no MemoryError so far",
 * "MemoryErrors: 0"), source ("raise MemoryError()") and other classes
 * ("torch.OutOfMemoryError", "java.lang.OutOfMemoryError") do not.
 */
static bool memory_error_word(const char *s, size_t n, size_t at)
{
	const char *p = s + at, *after = p + msgs[MSG_MEMORY_ERROR].len, *end = s + n;
	if (at > 0 && is_ident(p[-1]) && !(at >= 6 && !memcmp(p - 6, "_Array", 6)))
		return false;
	if (after < end && *after == ':')
		return true;
	while (after < end && is_blank(*after))
		after++;
	return after == end;
}

/* Where each message was found in a line (its last place), by enum msg. */
struct hits {
	uint32_t found;            /* bit (1 << MSG_x) */
	size_t at[MSG_COUNT];
};

/* The messages around the key that ends at window w. */
static void check_window(const char *s, size_t n, size_t w, struct hits *h)
{
	uint32_t key = load4(s + w);
	for (int m = 0; m < MSG_COUNT; m++) {
		const struct msg_def *d = &msgs[m];
		if (load4(d->text + d->key_at) != key || w < d->key_at)
			continue;
		size_t at = w - d->key_at;
		if (at + d->len > n || s[at] != d->text[0] || memcmp(s + at, d->text, d->len))
			continue;
		if (m == MSG_MEMORY_ERROR && !memory_error_word(s, n, at))
			continue;
		h->found |= 1u << m;
		h->at[m] = at;
	}
}

/* Thirty-two bytes as one value: GCC's vector extension (two SSE2
 * registers on x86-64, or one AVX2 register in the clone made for CPUs
 * that have it; plain code elsewhere). */
typedef unsigned char bytes32 __attribute__((vector_size(32)));

static bool ends_key3(const char *p)
{
	char a = (char)(p[0] | 0x20), b = (char)(p[1] | 0x20), c = (char)(p[2] | 0x20);
	return (a == 'o' && b == 'r' && c == 'y') || (a == 'l' && b == 'o' && c == 'c') ||
	       (a == 'a' && b == 'u' && c == 's');
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
size_t cause_scan_skip(const char *s, size_t n)
{
	size_t i = 0;
	/* Every key of near_key ends with one of these three letter triples.
	 * A block of 32 is crossed on the first and last letters of each
	 * (folded with 0x20, which lets a few other bytes through: never
	 * loses one); only a block where they meet is looked at byte by byte,
	 * and crossed on when no triple is really there ("class", "a.s"). */
	for (; i + 34 <= n; i += 32) {
		bytes32 a, c;
		memcpy(&a, s + i, 32);
		memcpy(&c, s + i + 2, 32);
		a |= 0x20;
		c |= 0x20;
		bytes32 m = (bytes32)((a == 'o') & (c == 'y')) | (bytes32)((a == 'l') & (c == 'c')) |
		            (bytes32)((a == 'a') & (c == 's'));
		uint64_t w[4];
		memcpy(w, &m, 32);
		if (w[0] | w[1] | w[2] | w[3])
			for (size_t j = i; j < i + 32; j++)
				if (ends_key3(s + j))
					return j;
	}
	for (; i + 3 <= n; i++)
		if (ends_key3(s + i))
			return i;
	return n;
}

/* One pass over the line, the messages found into h; false when the line
 * holds no key at all (nearly every line). */
static bool find_messages(const char *s, size_t n, struct hits *h)
{
	bool any_key = false;
	h->found = 0;
	for (size_t i = 3; i < n;) {
		unsigned v = near_key[(unsigned char)s[i]];
		if (v < 4) {
			i += 4 - v;
			continue;
		}
		uint32_t w = load4(s + i - 3);
		if (w == load4("mory") || w == load4("MORY") || w == load4("lloc") || w == load4("LLOC") ||
		    w == load4("haus") || w == load4("HAUS")) {
			any_key = true;
			check_window(s, n, i - 3, h);
		}
		i += 4;
	}
	return any_key;
}

/*
 * Copy s into dst without ANSI escape sequences: CSI (ESC [ params final),
 * OSC (ESC ] ... BEL or ESC \, as in terminal hyperlinks), nF escapes
 * (ESC ( B, which tput sgr0 writes) and two-byte escapes. An unterminated
 * sequence runs to the end of the line. Returns the length written (at
 * most n).
 */
static size_t strip_escapes(const char *s, size_t n, char *dst)
{
	size_t i = 0, k = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c != 0x1b) {
			dst[k++] = (char)c;
			i++;
			continue;
		}
		if (i + 1 >= n)
			break;
		unsigned char t = (unsigned char)s[i + 1];
		i += 2;
		if (t == '[') {
			while (i < n && ((unsigned char)s[i] < 0x40 || (unsigned char)s[i] > 0x7e))
				i++;
			i++;    /* the final byte */
		} else if (t == ']') {
			while (i < n && s[i] != '\a' && !(s[i] == 0x1b && i + 1 < n && s[i + 1] == '\\'))
				i++;
			i += i < n && s[i] == 0x1b ? 2 : 1;
		} else if (t >= 0x20 && t <= 0x2f) {
			/* ESC ( B and the like: intermediates, then one final byte */
			while (i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x2f)
				i++;
			i++;
		}
		/* else: a two-byte escape, both bytes gone */
	}
	return k;
}

/* TensorFlow names the device of a failed allocation; on the CPU it is a
 * host allocation failure even though the message says OOM. */
static bool tf_on_cpu(const char *s, size_t n)
{
	return (FIND(s, n, "device:CPU:") || FIND(s, n, "allocator cpu")) && !FIND(s, n, "device:GPU:");
}

/*
 * The class of line s from the messages found in it, with *at and *len
 * set to the message that decided; -1 for none. GPU messages first, so
 * "torch.OutOfMemoryError: CUDA out of memory" is one.
 */
static int classify_line(const char *s, size_t n, const struct hits *h, size_t *at, size_t *len)
{
	static const enum msg gpu[] = {
		MSG_CUDA_OOM, MSG_TORCH_CUDA_OOM_ERROR, MSG_TORCH_OOM_ERROR, MSG_CUPY_OOM_ERROR, MSG_DEVICE_MEMORY,
		MSG_CUBLAS_ALLOC, MSG_CUDART_ALLOC, MSG_CU_OUT_OF_MEMORY,
	};
	static const enum msg host[] = { MSG_MEMORY_ERROR, MSG_ENOMEM, MSG_BAD_ALLOC };
#define HAS(m) (h->found & (1u << (m)))
#define FOUND(m, cls) do { *at = h->at[m]; *len = msgs[m].len; return (cls); } while (0)
	for (size_t i = 0; i < sizeof(gpu) / sizeof(gpu[0]); i++)
		if (HAS(gpu[i]))
			FOUND(gpu[i], CAUSE_CLASS_CUDA_OOM);
	if (HAS(MSG_OUT_OF_MEMORY)) {
		const char *q = FIND(s, h->at[MSG_OUT_OF_MEMORY], "CUDA error:");
		if (q) {
			*at = (size_t)(q - s);
			*len = h->at[MSG_OUT_OF_MEMORY] + msgs[MSG_OUT_OF_MEMORY].len - *at;
			return CAUSE_CLASS_CUDA_OOM;
		}
	}
	/* XLA's status code is gRPC's too (quotas, message sizes): only
	 * with a word about memory. */
	bool xla = HAS(MSG_XLA_EXHAUSTED) &&
	           (FIND(s, n, "memory") || FIND(s, n, "alloc") || FIND(s, n, "reserve"));
	if (HAS(MSG_TF_OOM) || HAS(MSG_TF_EXHAUSTED) || xla) {
		enum msg m = HAS(MSG_TF_OOM) ? MSG_TF_OOM : HAS(MSG_TF_EXHAUSTED) ? MSG_TF_EXHAUSTED : MSG_XLA_EXHAUSTED;
		FOUND(m, tf_on_cpu(s, n) ? CAUSE_CLASS_HOST_ALLOC : CAUSE_CLASS_CUDA_OOM);
	}
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		if (HAS(host[i]))
			FOUND(host[i], CAUSE_CLASS_HOST_ALLOC);
	if (HAS(MSG_CPU_ALLOCATOR)) {
		size_t a = h->at[MSG_CPU_ALLOCATOR];
		if (FIND(s + a, n - a, "memory"))
			FOUND(MSG_CPU_ALLOCATOR, CAUSE_CLASS_HOST_ALLOC);
	}
#undef HAS
#undef FOUND
	return -1;
}

static void put_printable(char *dst, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		dst[i] = c == '\t' ? ' ' : (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
}

/* Keep line s as evidence: trimmed, printable, and when longer than
 * CAUSE_LINE_MAX cut to a window that shows the match at `at`. */
static void keep(struct cause_seen *seen, uint64_t line_no, const char *s, size_t n, size_t at, size_t mlen)
{
	enum { MAX = CAUSE_LINE_MAX, ELL = 3, BEFORE = 60 };
	size_t a = 0, b = n;
	while (a < at && is_blank(s[a]))
		a++;
	while (b > at + mlen && is_blank(s[b - 1]))
		b--;
	s += a, n = b - a, at -= a;

	char *d = seen->text;
	if (n <= MAX) {
		put_printable(d, s, n);
		d += n;
	} else if (at + mlen <= MAX - ELL) {
		put_printable(d, s, MAX - ELL);
		memcpy(d + MAX - ELL, "...", ELL);
		d += MAX;
	} else {
		size_t from = at > BEFORE ? at - BEFORE : 0;
		memcpy(d, "...", ELL);
		d += ELL;
		if (from + (MAX - ELL) >= n) {
			from = n - (MAX - ELL);
			put_printable(d, s + from, MAX - ELL);
			d += MAX - ELL;
		} else {
			put_printable(d, s + from, MAX - 2 * ELL);
			memcpy(d + MAX - 2 * ELL, "...", ELL);
			d += MAX - ELL;
		}
	}
	*d = '\0';
	seen->line_no = line_no;
}

void cause_scan_init(struct cause_scan *cs)
{
	memset(cs, 0, sizeof(*cs));
}

void cause_scan_line(struct cause_scan *cs, const char *line, size_t len)
{
	cs->lines++;
	if (!line)
		return;
	if (len > CAUSE_SCAN_MAX)
		len = CAUSE_SCAN_MAX;
	struct hits h;
	if (!find_messages(line, len, &h))
		return;

	/* Colour codes can sit inside a message ("\e[1mMemoryError\e[0m:"):
	 * look again without them. */
	char clean[CAUSE_SCAN_MAX];
	const char *s = line;
	size_t n = len;
	if (memchr(line, 0x1b, len)) {
		n = strip_escapes(line, len, clean);
		s = clean;
		find_messages(s, n, &h);
	}
	size_t at, mlen;
	int cls = classify_line(s, n, &h, &at, &mlen);
	if (cls >= 0)
		keep(&cs->seen[cls], cs->lines, s, n, at, mlen);
}

/* ---- the classifier --------------------------------------------------- */

static void put(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *buf, size_t len, const char *fmt, ...)
{
	if (!buf || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* "SIGSEGV", or "signal 40" for one without a name. */
static void signal_name(int sig, char *buf, size_t len)
{
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		snprintf(buf, len, "SIG%s", abbrev);
	else
		snprintf(buf, len, "signal %d", sig);
}

/* How the process ended: "exited 1", "exited 137 (128+SIGKILL)",
 * "killed by SIGSEGV (core dumped)". */
static void describe_end(const struct cause_input *in, char *buf, size_t len)
{
	char sig[32];
	if (in->exited) {
		int s = in->exit_code - 128;
		if (s > 0 && s < 65 && sigabbrev_np(s)) {
			/* What a shell reports for a child killed by signal s. */
			signal_name(s, sig, sizeof(sig));
			snprintf(buf, len, "exited %d (128+%s)", in->exit_code, sig);
		} else {
			snprintf(buf, len, "exited %d", in->exit_code);
		}
	} else if (in->signal > 0) {
		signal_name(in->signal, sig, sizeof(sig));
		snprintf(buf, len, "killed by %s%s", sig, in->core_dumped ? " (core dumped)" : "");
	} else {
		snprintf(buf, len, "ended with an unknown status");
	}
}

static bool is_crash_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGABRT || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
}

enum end_cause cause_classify(const struct cause_input *in, char *evidence, size_t evidence_len)
{
	char how[64];
	bool clean = in->exited && in->exit_code == 0;
	describe_end(in, how, sizeof(how));

	if (in->budget_killed && !clean) {
		if (in->oom_kills)
			put(evidence, evidence_len, "leakproof sent SIGKILL to enforce a budget; %s; oom_kill count also rose by %llu",
			    how, (unsigned long long)in->oom_kills);
		else
			put(evidence, evidence_len, "leakproof sent SIGKILL to enforce a budget; %s", how);
		return CAUSE_BUDGET_KILL;
	}
	if (in->oom_kills > 0 && !clean) {
		put(evidence, evidence_len, "oom_kill count rose by %llu; %s", (unsigned long long)in->oom_kills, how);
		return CAUSE_OOM_KILL;
	}
	if (in->stop_requested) {
		put(evidence, evidence_len, "stop requested by leakproof; %s", how);
		return CAUSE_STOP_REQUESTED;
	}
	if (clean) {
		put(evidence, evidence_len, "%s", how);
		return CAUSE_EXIT;
	}
	if (in->scan) {
		const struct cause_seen *cuda = &in->scan->seen[CAUSE_CLASS_CUDA_OOM];
		const struct cause_seen *host = &in->scan->seen[CAUSE_CLASS_HOST_ALLOC];
		if (cuda->line_no || host->line_no) {
			bool is_cuda = cuda->line_no > host->line_no;
			put(evidence, evidence_len, "%s", is_cuda ? cuda->text : host->text);
			return is_cuda ? CAUSE_CUDA_OOM : CAUSE_HOST_ALLOC_FAIL;
		}
	}
	put(evidence, evidence_len, "%s", how);
	if (!in->exited && (in->core_dumped || is_crash_signal(in->signal)))
		return CAUSE_CRASH;
	if (!in->exited && in->signal > 0)
		return CAUSE_SIGNAL;
	return CAUSE_ERROR;
}

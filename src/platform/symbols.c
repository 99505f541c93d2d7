/*
 * symbols.c — addresses to names with elfutils' libdwfl (see symbols.h).
 *
 * Each object is opened on its own, at load bias 0, so an address is its
 * ELF virtual address: what the tracer computed in the job as the address
 * minus the object's load bias. dwfl_standard_find_debuginfo finds debug
 * information in the object or in /usr/lib/debug (build-id or debuglink),
 * as Debian's -dbgsym packages install it.
 *
 * Demangling uses the C++ runtime's __cxa_demangle, looked up at run time
 * so that leakproof itself does not link the C++ library.
 */
#include "platform/symbols.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

struct object {
	char *path;
	Dwfl *dwfl;            /* NULL: the object could not be read */
	Dwfl_Module *mod;
};

struct symbolizer {
	struct object *objs;
	size_t n, cap;
};

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

struct symbolizer *symbolizer_new(void)
{
	/* never ask a debuginfod server: naming must not wait on a network */
	unsetenv("DEBUGINFOD_URLS");
	return xcalloc(1, sizeof(struct symbolizer));
}

void symbolizer_free(struct symbolizer *sy)
{
	if (!sy)
		return;
	for (size_t i = 0; i < sy->n; i++) {
		if (sy->objs[i].dwfl)
			dwfl_end(sy->objs[i].dwfl);
		free(sy->objs[i].path);
	}
	free(sy->objs);
	free(sy);
}

static struct object *object_of(struct symbolizer *sy, const char *path)
{
	for (size_t i = 0; i < sy->n; i++)
		if (!strcmp(sy->objs[i].path, path))
			return &sy->objs[i];
	if (sy->n == sy->cap) {
		sy->cap = sy->cap ? 2 * sy->cap : 16;
		sy->objs = xrealloc(sy->objs, sy->cap * sizeof(*sy->objs));
	}
	struct object *o = &sy->objs[sy->n++];
	memset(o, 0, sizeof(*o));
	o->path = xstrdup(path);
	if (path[0] != '/')
		return o;
	/* Only a regular file: the path may come from a store (outside input),
	 * and opening a FIFO waits for a writer forever, a device reads on. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return o;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return o;
	}
	o->dwfl = dwfl_begin(&callbacks);
	if (o->dwfl) {
		o->mod = dwfl_report_elf(o->dwfl, path, path, fd, 0, false);   /* takes fd on success */
		dwfl_report_end(o->dwfl, NULL, NULL);
		if (!o->mod) {
			dwfl_end(o->dwfl);
			o->dwfl = NULL;
		}
	}
	if (!o->mod)
		close(fd);
	return o;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn demangler(void)
{
	static demangle_fn fn;
	static bool looked;
	if (!looked) {
		looked = true;
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			*(void **)&fn = dlsym(h, "__cxa_demangle");
		/* the handle stays open for the process's life, as the function does */
	}
	return fn;
}

/* Cut a demangled name's parameter list: "ns::f(int, char*) const" is
 * "ns::f". Parentheses are matched from the end. */
static void drop_params(char *s)
{
	size_t n = strlen(s);
	if (n > 6 && !strcmp(s + n - 6, " const"))
		n -= 6;
	if (!n || s[n - 1] != ')')
		return;
	int depth = 0;
	for (size_t i = n; i-- > 0;) {
		if (s[i] == ')')
			depth++;
		else if (s[i] == '(' && --depth == 0) {
			if (i > 0)
				s[i] = '\0';
			return;
		}
	}
}

void symbol_pretty(const char *sym, char *out, size_t outsz)
{
	demangle_fn dm = sym[0] == '_' && sym[1] == 'Z' ? demangler() : NULL;
	int status = -1;
	char *d = dm ? dm(sym, NULL, NULL, &status) : NULL;
	snprintf(out, outsz, "%s", d && status == 0 ? d : sym);
	free(d);
	drop_params(out);
}

bool symbolizer_lookup(struct symbolizer *sy, const char *path, uint64_t vaddr, const char *fallback,
                       char *fn, size_t fnsz, char *src, size_t srcsz)
{
	fn[0] = src[0] = '\0';
	struct object *o = object_of(sy, path);
	Dwarf_Addr a = (Dwarf_Addr)vaddr;
	const char *name = o->mod ? dwfl_module_addrname(o->mod, a) : NULL;
	if (!name || !*name)
		name = fallback;
	if (name && *name)
		symbol_pretty(name, fn, fnsz);
	Dwfl_Line *line = o->mod ? dwfl_module_getsrc(o->mod, a) : NULL;
	int lineno = 0;
	const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
	if (file && lineno > 0) {
		const char *base = strrchr(file, '/');
		snprintf(src, srcsz, "%s:%d", base ? base + 1 : file, lineno);
	}
	return fn[0] || src[0];
}

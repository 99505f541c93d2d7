/*
 * symbols.h — naming code addresses after the fact: an address inside an
 * ELF object (its virtual address in the file, as the tracer sends it)
 * becomes a function name and, where debug information exists (in the
 * object or in a separate debug file under /usr/lib/debug), a source file
 * and line. elfutils' libdw does the reading; C++ names are demangled.
 */
#ifndef LP_SYMBOLS_H
#define LP_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct symbolizer;

struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *sy);

/*
 * Name vaddr in the object at path (for a caller's frame, an address
 * inside the call instruction, not the return address). fn gets the
 * function (demangled, without its parameter list; the fallback symbol, or
 * "" when none), src "FILE:LINE" or "". Returns true when anything was found.
 */
bool symbolizer_lookup(struct symbolizer *sy, const char *path, uint64_t vaddr, const char *fallback,
                       char *fn, size_t fnsz, char *src, size_t srcsz);

/* Demangle a C++ symbol and drop its parameter list ("at::empty_cpu");
 * anything else is copied. */
void symbol_pretty(const char *sym, char *out, size_t outsz);

#endif

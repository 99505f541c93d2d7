# leakproof — build, test and install.
#
#   make                 build build/leakproof and the unit tests
#   make check           unit tests + the end-to-end tests but the slow ones, in
#                        parallel (needs the packages in scripts/install-deps);
#                        scripts/test runs everything, as CI does
#   make check-layers    no include or call runs up a floor of src/
#   make asan            the same binary with AddressSanitizer + UBSan, in build-asan/
#   make fuzz            the fuzz targets (fuzz/) with clang's libFuzzer +
#                        ASan + UBSan, in build-fuzz/; scripts/fuzz runs them
#   make install PREFIX=/usr/local
#   make wheel           a wheel in build-wheel/dist/ (binary, tracer, Python
#                        client; docs/install.md), built offline by pip
#
# Dependencies come from pkg-config: sqlite3 (the store), libpq (its
# PostgreSQL backend: its header at build time, the library loaded when a
# PostgreSQL store is opened), libpcre2-8 (--step-regex: Perl syntax such
# as \d, which POSIX regex lacks), ncursesw (`leakproof top`).

PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
LIBDIR   ?= $(PREFIX)/lib
DATADIR  ?= $(PREFIX)/share
MANDIR   ?= $(DATADIR)/man
INCDIR   ?= $(PREFIX)/include
PYDIR    ?= $(LIBDIR)/leakproof/python
PCDIR    ?= $(DATADIR)/pkgconfig
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions

B        ?= build
# two pytest workers a core: the end-to-end tests mostly wait on their jobs
# (a third of two cores busy at one a core)
CHECK_JOBS ?= $(shell n=$$(nproc); [ $$n -ge 2 ] && echo $$((2 * n)) || echo 4)
CC       ?= cc
PKGS      = sqlite3 libpcre2-8 yaml-0.1 libdw ncursesw
VERSION   = 0.1.0

WARN      = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
            -Wmissing-prototypes -Wformat=2 -Wvla
# CFLAGS is the user's (optimisation, sanitizers: `make CFLAGS=...` works);
# what the build needs is added to it, never replaced.
CFLAGS   ?= -O2 -g
LP_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -Isrc -Iinclude \
            $(shell pkg-config --cflags $(PKGS) libpq) \
            -DLP_VERSION='"$(VERSION)"' -DLP_PYDIR='"$(PYDIR)"' \
            -DLP_TRACEDIR='"$(LIBDIR)/leakproof"' $(CFLAGS)
LDLIBS   += $(shell pkg-config --libs $(PKGS)) -ldl -lm

# `make V=1` shows the commands.
ifeq ($(V),1)
Q =
say = @true
else
Q = @
say = @echo "  $(1)	$@"
endif

SRC = $(wildcard src/util/*.c src/base/*.c src/platform/*.c src/core/*.c src/store/*.c src/sweep/*.c \
                 src/judge/*.c src/report/*.c src/cmd/*.c)
OBJ = $(SRC:%.c=$(B)/%.o)
LIBOBJ = $(filter-out $(B)/src/main.o,$(OBJ))

UNIT_SRC = $(wildcard t/unit/test_*.c)
UNIT_BIN = $(UNIT_SRC:t/unit/%.c=$(B)/t/%)

all: $(B)/leakproof $(UNIT_BIN) $(B)/t/libnvidia-ml.so.1 $(B)/libleakproof-trace.so

$(B)/leakproof: $(B)/src/main.o $(LIBOBJ)
	$(call say,LINK)
	$(Q)$(CC) $(LP_CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC)
	$(Q)$(CC) $(LP_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/t/test_%: t/unit/test_%.c $(LIBOBJ) t/unit/tap.h
	@mkdir -p $(dir $@)
	$(call say,TEST)
	$(Q)$(CC) $(LP_CFLAGS) -It/unit $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

# bench/claim_cost's claimer: the store's claim loop alone (bench/claim_rate.c).
$(B)/bench/claim_rate: bench/claim_rate.c $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(call say,LINK)
	$(Q)$(CC) $(LP_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

# A stand-in for NVIDIA's library, for machines without a GPU (see t/fake-nvml).
$(B)/t/libnvidia-ml.so.1: t/fake-nvml/fake_nvml.c
	@mkdir -p $(dir $@)
	$(call say,LIB)
	$(Q)$(CC) $(LP_CFLAGS) -fPIC -shared -o $@ $<

# The allocation tracer that `run --trace` preloads into the job (src/trace,
# docs/internals/tracer.md). Built position-independent on its own, never
# linked into leakproof, and never with sanitizers (a preloaded library cannot
# bring ASan's runtime along); its unit tests build the core (all but
# preload.c and python.c) from source with the full CFLAGS, sanitizers included.
TRACE_SRC      = $(wildcard src/trace/*.c)
TRACE_OBJ      = $(TRACE_SRC:src/trace/%.c=$(B)/trace/%.o)
TRACE_CORE_SRC = $(filter-out src/trace/preload.c src/trace/python.c,$(TRACE_SRC))
TRACE_CFLAGS   = $(filter-out -fsanitize=% -fno-sanitize%,$(LP_CFLAGS)) -fPIC -fvisibility=hidden \
                 $(shell pkg-config --cflags libunwind)

$(B)/trace/%.o: src/trace/%.c
	@mkdir -p $(dir $@)
	$(call say,CC)
	$(Q)$(CC) $(TRACE_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/libleakproof-trace.so: $(TRACE_OBJ)
	$(call say,LIB)
	$(Q)$(CC) $(TRACE_CFLAGS) $(LDFLAGS) -shared -Wl,-z,defs -Wl,-soname,libleakproof-trace.so -o $@ $^ \
		$(shell pkg-config --libs libunwind) -ldl -lm -lpthread

$(B)/t/test_trace_%: t/unit/test_trace_%.c $(TRACE_CORE_SRC) src/trace/trace.h t/unit/tap.h
	@mkdir -p $(dir $@)
	$(call say,TEST)
	$(Q)$(CC) $(LP_CFLAGS) -It/unit $(LDFLAGS) -o $@ $< $(TRACE_CORE_SRC) -lm

unit: all
	@fail=0; for t in $(UNIT_BIN); do $$t || fail=1; done; exit $$fail

# Contributors' check, a few minutes on 2 cores: the unit binaries and the
# end-to-end tests but the slow ones, in parallel (pytest-xdist), then those
# marked serial alone. scripts/test is the whole suite as CI runs it.
check: all
	/usr/bin/python3 -m pytest -q -p no:cacheprovider -n $(CHECK_JOBS) --dist loadgroup -m "not slow and not serial" t
	/usr/bin/python3 -m pytest -q -p no:cacheprovider -m "serial and not slow" t || [ $$? -eq 5 ]

# The floors of src/ (docs/internals/design.md): no include or call up a
# floor, no loop between the files of a folder.
check-layers: all
	scripts/check-layers $(B)

asan:
	$(MAKE) B=build-asan CFLAGS='-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all'

# The fuzz targets (fuzz/fuzz_*.c, docs/internals/fuzzing.md): every parser
# of outside input under libFuzzer, AddressSanitizer and UBSan. clang builds
# them (and the objects they link) in build-fuzz/; the normal build stays
# with CC. -Wno-string-concatenation: clang's warning about SQL written as
# adjacent literals in an array (store/batch.c), which is intended.
FUZZ_CC     ?= clang
FUZZ_CFLAGS ?= -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=all -Wno-string-concatenation
FUZZ_SRC = $(wildcard fuzz/fuzz_*.c)
FUZZ_BIN = $(FUZZ_SRC:fuzz/%.c=$(B)/fuzz/%)

fuzz:
	$(MAKE) B=build-fuzz CC=$(FUZZ_CC) CFLAGS='$(FUZZ_CFLAGS)' fuzz-targets

fuzz-targets: $(FUZZ_BIN)

$(B)/fuzz/%: fuzz/%.c fuzz/fuzz.h $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(call say,FUZZ)
	$(Q)$(CC) $(LP_CFLAGS) -Ifuzz -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

# The pkg-config file names PREFIX, so it is made again at every install.
$(B)/leakproof.pc: leakproof.pc.in FORCE
	@mkdir -p $(dir $@)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@INCDIR@|$(INCDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
		leakproof.pc.in >$@

# Everything under PREFIX (DESTDIR for staged installs): the binary, the
# Python client and the tracer where the binary looks for them
# ($(LIBDIR)/leakproof/), the man page, the C header and its leakproof.pc,
# the bash completion.
install: $(B)/leakproof $(B)/leakproof.pc $(B)/libleakproof-trace.so
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PYDIR)/leakproof $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(INCDIR) $(DESTDIR)$(PCDIR) $(DESTDIR)$(BASHCOMPDIR)
	install -m 755 $(B)/leakproof $(DESTDIR)$(BINDIR)/leakproof
	for f in $$(cd python && find leakproof -name '*.py'); do \
		install -D -m 644 python/$$f $(DESTDIR)$(PYDIR)/$$f || exit 1; done
	install -m 644 man/leakproof.1 $(DESTDIR)$(MANDIR)/man1/leakproof.1
	install -m 644 include/leakproof.h $(DESTDIR)$(INCDIR)/leakproof.h
	install -D -m 755 $(B)/libleakproof-trace.so $(DESTDIR)$(LIBDIR)/leakproof/libleakproof-trace.so
	install -m 644 $(B)/leakproof.pc $(DESTDIR)$(PCDIR)/leakproof.pc
	install -m 644 completion/leakproof.bash $(DESTDIR)$(BASHCOMPDIR)/leakproof

# The pip wheel (pyproject.toml, setup.py): setup.py runs make itself into
# build-wheel/c; no network (the Debian setuptools and wheel serve).
PYTHON ?= /usr/bin/python3
wheel:
	$(PYTHON) -m pip wheel --no-build-isolation --no-deps --no-cache-dir -w build-wheel/dist .

clean:
	rm -rf $(B) build-asan build-fuzz build-wheel

.PHONY: all unit check check-layers asan fuzz fuzz-targets install wheel clean FORCE
FORCE:
-include $(OBJ:.o=.d) $(TRACE_OBJ:.o=.d)

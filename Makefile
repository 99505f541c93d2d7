# leakproof — build, test and install.
#
#   make                 build build/leakproof and the unit tests
#   make check           unit tests + end-to-end tests (needs the packages in
#                        scripts/install-deps)
#   make asan            the same binary with AddressSanitizer + UBSan, in build-asan/
#   make install PREFIX=/usr/local
#
# Dependencies come from pkg-config: sqlite3 (the store), libpcre2-8
# (--step-regex: Perl syntax such as \d, which POSIX regex lacks).

PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
LIBDIR   ?= $(PREFIX)/lib
DATADIR  ?= $(PREFIX)/share
MANDIR   ?= $(DATADIR)/man
INCDIR   ?= $(PREFIX)/include
PYDIR    ?= $(LIBDIR)/leakproof/python

B        ?= build
CC       ?= cc
PKGS      = sqlite3 libpcre2-8 yaml-0.1
VERSION   = 0.1.0

WARN      = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
            -Wmissing-prototypes -Wformat=2 -Wvla
# CFLAGS is the user's (optimisation, sanitizers: `make CFLAGS=...` works);
# what the build needs is added to it, never replaced.
CFLAGS   ?= -O2 -g
LP_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -Isrc -Iinclude \
            $(shell pkg-config --cflags $(PKGS)) \
            -DLP_VERSION='"$(VERSION)"' -DLP_PYDIR='"$(PYDIR)"' $(CFLAGS)
LDLIBS   += $(shell pkg-config --libs $(PKGS)) -ldl -lm

# `make V=1` shows the commands.
ifeq ($(V),1)
Q =
say = @true
else
Q = @
say = @echo "  $(1)	$@"
endif

SRC = $(wildcard src/util/*.c src/platform/*.c src/core/*.c src/store/*.c src/sweep/*.c \
                 src/report/*.c src/cmd/*.c)
OBJ = $(SRC:%.c=$(B)/%.o)
LIBOBJ = $(filter-out $(B)/src/main.o,$(OBJ))

UNIT_SRC = $(wildcard t/unit/test_*.c)
UNIT_BIN = $(UNIT_SRC:t/unit/%.c=$(B)/t/%)

all: $(B)/leakproof $(UNIT_BIN) $(B)/t/libnvidia-ml.so.1

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

# A stand-in for NVIDIA's library, for machines without a GPU (see t/fake-nvml).
$(B)/t/libnvidia-ml.so.1: t/fake-nvml/fake_nvml.c
	@mkdir -p $(dir $@)
	$(call say,LIB)
	$(Q)$(CC) $(LP_CFLAGS) -fPIC -shared -o $@ $<

unit: all
	@fail=0; for t in $(UNIT_BIN); do $$t || fail=1; done; exit $$fail

check: all
	/usr/bin/python3 -m pytest -q t

asan:
	$(MAKE) B=build-asan CFLAGS='-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all'

install: $(B)/leakproof
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PYDIR)/leakproof $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(INCDIR)
	install -m 755 $(B)/leakproof $(DESTDIR)$(BINDIR)/leakproof
	install -m 644 python/leakproof/*.py $(DESTDIR)$(PYDIR)/leakproof/
	install -m 644 man/leakproof.1 $(DESTDIR)$(MANDIR)/man1/leakproof.1
	install -m 644 include/leakproof.h $(DESTDIR)$(INCDIR)/leakproof.h

clean:
	rm -rf $(B) build-asan

.PHONY: all unit check asan install clean
-include $(OBJ:.o=.d)

# datavofs: plain Makefile with pkg-config (see README).
#   make                  build/datavofs and build/datavoctl
#   make check            unit tests, then integration tests
#   make DEVELOPER=1      warnings are errors
#   make SANITIZE=address,undefined check
#   make FUSE_PREFIX=DIR  build against a private libfuse (scripts/build-libfuse.sh);
#                         default build/libfuse when it has libfuse >= 3.17
#   make SYSTEM_FUSE=1    build against the system's libfuse
#   make install PREFIX=/usr/local DESTDIR=

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= /sbin
MANDIR ?= $(PREFIX)/share/man
BUILD ?= build

CC ?= cc
PKG_CONFIG ?= pkg-config
comma := ,
WARNINGS = -Wall -Wextra -Wstrict-prototypes -Wvla -Wwrite-strings -Wshadow \
	-Wno-unused-parameter -Wmissing-prototypes
CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=gnu11 $(WARNINGS) $(CFLAGS) -I. -D_GNU_SOURCE -MMD -MP -pthread
ALL_LDFLAGS = $(LDFLAGS) -pthread

ifeq ($(DEVELOPER),1)
ALL_CFLAGS += -Werror
endif
ifneq ($(SANITIZE),)
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
ALL_LDFLAGS += -fsanitize=$(SANITIZE)
endif

# libfuse: by default the private libfuse >= 3.17 that scripts/setup.sh
# builds into build/libfuse when the system's is older (3.18: passthrough
# read path and FUSE over io_uring), else the system's. FUSE_PREFIX=DIR picks
# another private build; SYSTEM_FUSE=1 or an empty FUSE_PREFIX= forces the
# system's. PKG_CONFIG_LIBDIR (not _PATH) puts the private fuse3.pc first:
# the system's directories follow only for what it requires (liburing, numa).
fuse_pc_dir = $(patsubst %/fuse3.pc,%,$(firstword $(wildcard $(1)/lib/*/pkgconfig/fuse3.pc \
	$(1)/lib/pkgconfig/fuse3.pc $(1)/lib64/pkgconfig/fuse3.pc)))
SYS_PC_PATH := $(shell $(PKG_CONFIG) --variable pc_path pkg-config)
ifeq ($(SYSTEM_FUSE),1)
override FUSE_PREFIX :=
else ifeq ($(origin FUSE_PREFIX),undefined)
FUSE_AUTO_PC := $(call fuse_pc_dir,$(CURDIR)/build/libfuse)
ifneq ($(FUSE_AUTO_PC),)
ifeq ($(shell PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$(FUSE_AUTO_PC):$(SYS_PC_PATH) $(PKG_CONFIG) --atleast-version=3.17 fuse3 && echo y),y)
FUSE_PREFIX := $(CURDIR)/build/libfuse
endif
endif
endif
ifneq ($(FUSE_PREFIX),)
FUSE_PC_DIR := $(call fuse_pc_dir,$(abspath $(FUSE_PREFIX)))
ifeq ($(FUSE_PC_DIR),)
$(error FUSE_PREFIX=$(FUSE_PREFIX) has no fuse3.pc; run scripts/build-libfuse.sh $(FUSE_PREFIX))
endif
FUSE_PC = PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$(FUSE_PC_DIR):$(SYS_PC_PATH)
FUSE_LIBDIR := $(shell $(FUSE_PC) $(PKG_CONFIG) --variable=libdir fuse3)
endif
FUSE_CFLAGS := $(shell $(FUSE_PC) $(PKG_CONFIG) --cflags fuse3)
# A private libfuse is linked statically (scripts/build-libfuse.sh builds
# only the archive): the installed datavofs is whole, and nothing else on
# the machine ever loads that libfuse. An older shared-only private build
# is found through an rpath into its prefix.
ifneq ($(wildcard $(FUSE_LIBDIR)/libfuse3.a),)
FUSE_LIBS := $(FUSE_LIBDIR)/libfuse3.a \
	$(filter-out -lfuse3 -L%,$(shell $(FUSE_PC) $(PKG_CONFIG) --static --libs fuse3))
else
FUSE_LIBS := $(shell $(FUSE_PC) $(PKG_CONFIG) --libs fuse3) \
	$(if $(FUSE_LIBDIR),-Wl$(comma)-rpath$(comma)$(FUSE_LIBDIR))
endif
# The passthrough API needs FUSE_USE_VERSION 317; older libfuse gets 312.
FUSE_API := $(shell $(FUSE_PC) $(PKG_CONFIG) --atleast-version=3.17 fuse3 && echo 317 || echo 312)
FUSE_CFLAGS += -DFUSE_USE_VERSION=$(FUSE_API)
# FUSE over io_uring: libfuse >= 3.18 whose meson found liburing and numa
# (its fuse3.pc then requires both, and the archive holds fuse_uring.o).
ifeq ($(shell $(FUSE_PC) $(PKG_CONFIG) --atleast-version=3.18 fuse3 && \
	$(FUSE_PC) $(PKG_CONFIG) --print-requires fuse3 | grep -qw liburing && echo y),y)
FUSE_CFLAGS += -DDV_FUSE_URING=1
endif

LIB_PKGS = libcurl openssl yaml-0.1 libxxhash liburing
LIB_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(LIB_PKGS))
LIB_LIBS := $(shell $(PKG_CONFIG) --libs $(LIB_PKGS))
# The daemon's own: the metrics exporter's HTTP server (fs/metrics.c).
DAEMON_PKGS = libmicrohttpd
DAEMON_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(DAEMON_PKGS))
DAEMON_LIBS := $(shell $(PKG_CONFIG) --libs $(DAEMON_PKGS))
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check)
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check)

# config/, tiers/ and stripe/ are one static library (libdatavo.a). fs/ is
# the daemon; fs/namespace/ (manifests, the tree) and fs/ctl/ (datavoctl)
# include no FUSE header: with the daemon's FUSE-free files (status,
# metrics) they form libdatavofs-core.a, which the tools and tests link too.
LIB_SRCS = $(wildcard config/*.c tiers/*/*.c stripe/*.c)
FUSE_SRCS = fs/main.c fs/fuse_ops.c fs/open_inodes.c fs/cache_push.c fs/transport.c \
	fs/writeback/wb_fuse.c fs/writeback/wb_fuse_dir.c
CTL_SRCS = fs/ctl/ctl_main.c
FS_CORE_SRCS = $(filter-out $(FUSE_SRCS) $(CTL_SRCS), \
	$(wildcard fs/*.c fs/namespace/*.c fs/ctl/*.c fs/writeback/*.c))
UNIT_SRCS = $(wildcard tests/unit/test_*.c)

LIB_OBJS = $(LIB_SRCS:%.c=$(BUILD)/%.o)
FS_CORE_OBJS = $(FS_CORE_SRCS:%.c=$(BUILD)/%.o)
FUSE_OBJS = $(FUSE_SRCS:%.c=$(BUILD)/%.o)
CTL_OBJS = $(CTL_SRCS:%.c=$(BUILD)/%.o)
UNIT_BINS = $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
LIBDV = $(BUILD)/libdatavo.a
LIBFS = $(BUILD)/libdatavofs-core.a

all: $(BUILD)/datavofs $(BUILD)/datavoctl

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -c -o $@ $<

# Which libfuse the FUSE objects were built for (as git's GIT-CFLAGS): a
# switch between the system's and the private one rebuilds them.
FUSE_STAMP = $(BUILD)/fuse-flags
$(FUSE_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(FUSE_CFLAGS) $(FUSE_LIBS)' | cmp -s - $@ || echo '$(FUSE_CFLAGS) $(FUSE_LIBS)' >$@

$(FUSE_OBJS): $(FUSE_STAMP)
$(FUSE_OBJS): $(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) $(FUSE_CFLAGS) -c -o $@ $<

$(BUILD)/fs/metrics.o: fs/metrics.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) $(DAEMON_CFLAGS) -c -o $@ $<

$(LIBDV): $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(LIBFS): $(FS_CORE_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/datavofs: $(FUSE_OBJS) $(LIBFS) $(LIBDV) $(FUSE_STAMP)
	$(CC) $(ALL_LDFLAGS) -o $@ $(filter %.o %.a,$^) $(FUSE_LIBS) $(DAEMON_LIBS) $(LIB_LIBS)

$(BUILD)/datavoctl: $(CTL_OBJS) $(LIBFS) $(LIBDV)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIB_LIBS)

$(BUILD)/tests/test_%.o: tests/unit/test_%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) $(CHECK_CFLAGS) -DUNIT_TEST -c -o $@ $<

TEST_HELPERS = $(BUILD)/tests/helpers.o $(BUILD)/tests/fake_remote.o

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_HELPERS) $(LIBFS) $(LIBDV)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(DAEMON_LIBS) $(LIB_LIBS)

$(TEST_HELPERS): $(BUILD)/tests/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) $(CHECK_CFLAGS) -DUNIT_TEST -c -o $@ $<

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; CK_FORK=yes $$t; done

integration: all
	DATAVOFS=$(abspath $(BUILD))/datavofs DATAVOCTL=$(abspath $(BUILD))/datavoctl \
		tests/integration/run.sh

check: unit integration

bench: all
	scripts/bench-read.sh

# The cold path (chunk lists, streaming fills) against curl, rclone and a
# PyTorch DataLoader; DV_BENCH_QUICK=1 for a run of under a minute.
bench-cold: all
	DATAVOFS=$(abspath $(BUILD))/datavofs DATAVOCTL=$(abspath $(BUILD))/datavoctl \
		scripts/bench-cold.sh

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(BUILD)/datavofs $(BUILD)/datavoctl $(DESTDIR)$(BINDIR)/
	ln -sf $(BINDIR)/datavofs $(DESTDIR)$(SBINDIR)/mount.fuse.datavofs
	for m in man/*.5; do [ -f "$$m" ] && install -m 0644 $$m $(DESTDIR)$(MANDIR)/man5/ || true; done
	for m in man/*.8; do [ -f "$$m" ] && install -m 0644 $$m $(DESTDIR)$(MANDIR)/man8/ || true; done

# The private libfuse (scripts/build-libfuse.sh) survives a clean.
clean:
	@[ ! -d $(BUILD) ] || find $(BUILD) -mindepth 1 -maxdepth 1 ! -name 'libfuse*' -exec rm -rf {} +

.PHONY: all unit integration check bench bench-cold install clean FORCE
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ==== reliability: fault matrix, valgrind, fuzzing ===========================
#   make faults            the fault matrix (tests/faults/t_*.sh) against build/
#   make valgrind          the mount smoke test under valgrind memcheck
#   make fuzz              libFuzzer targets in build-fuzz/fuzz/ (clang,
#                          address + undefined); scripts/fuzz.sh runs them
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_TARGETS = $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

faults: all
	DATAVOFS=$(abspath $(BUILD))/datavofs DATAVOCTL=$(abspath $(BUILD))/datavoctl \
		tests/faults/run.sh

valgrind: all
	DATAVOFS=$(abspath $(BUILD))/datavofs DATAVOCTL=$(abspath $(BUILD))/datavoctl \
		bash tests/faults/valgrind_smoke.sh

fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) \
		SANITIZE=fuzzer-no-link,address,undefined fuzz-bins

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

# fuzz_http.c includes tiers/net/http.c and http_sink.c (their static
# parsers): the archive's http.o and http_sink.o are then never pulled in.
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIBFS) $(LIBDV)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -o $@ $< $(LIBFS) $(LIBDV) \
		$(ALL_LDFLAGS) -fsanitize=fuzzer $(LIB_LIBS)

.PHONY: faults valgrind fuzz fuzz-bins

# ==== the stripe tier's test and benchmark tool ==============================
# build/dv-stripe: discovery listing, the tier's O_DIRECT read benchmark and a
# timed, checksummed file reader (tests/tools/dv_stripe.c). The stripe
# integration tests use it, so `integration` builds it; `make bench-stripe`
# runs scripts/bench-stripe.sh.
DV_STRIPE_TOOL = $(BUILD)/dv-stripe

$(DV_STRIPE_TOOL): $(BUILD)/tests/tools/dv_stripe.o $(LIBFS) $(LIBDV)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIB_LIBS)

integration: $(DV_STRIPE_TOOL)

bench-stripe: all $(DV_STRIPE_TOOL)
	DATAVOFS=$(abspath $(BUILD))/datavofs DV_STRIPE_TOOL=$(abspath $(DV_STRIPE_TOOL)) \
		scripts/bench-stripe.sh

.PHONY: bench-stripe
# ==== end of stripe tier =====================================================

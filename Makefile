# innet — build. `make` builds build/innet, the library (static and shared),
# the man pages and all tests.
#   make install [PREFIX=/usr/local] [DESTDIR=]   innet, the public headers,
#                                      libinnet.a/.so, innet.pc, man pages, bash
#                                      completion, the dp tree (DPDIR: building
#                                      a data path of one's own for both targets)
#   make uninstall [PREFIX=...] [DESTDIR=]
#   make CC=clang                      another compiler
#   make SANITIZE=address,undefined    sanitizer build (into build-san-address,undefined/)
#   make SANITIZE=thread               ThreadSanitizer build
#   make fuzz                          libFuzzer targets (clang)
#   make check                         the whole test suite (tests/run)
#   make p4                            p4/*.json from p4/*.p4 (needs p4c-bm2-ss)
# Sources are found by wildcard: the runtime's parts (src/engine, src/control,
# src/topology), one folder per target (src/targets/<target>/*.c), src/programs,
# one folder per service (src/<svc>/*.c); src/cli/*.c make the innet command.
#
# The data-path contract (docs/programs.md): every NAME_dp.c is compiled
#   - for the user-space engine freestanding (-ffreestanding -nostdinc: no
#     libc header exists), with a 512-byte stack frame limit, and its object is
#     then checked by tools/contract/check-dp (only innet_* symbols, no
#     mutable globals);
#   - for the XDP target with clang -target bpf (src/targets/xdp/prog.bpf.c), into
#     $(O)/bpf/NAME.bpf.o, embedded in libinnet ($(O)/bpf/objects.c), and that
#     object checked by tools/contract/check-bpf (no call left unresolved: a
#     hand-declared libc function, memcpy with a variable length).
# A data path marked INNET_DATAPATH_USERSPACE skips the second (and the
# stack limit); the build says so. Any violation fails the build. Both
# compiles and both checks are tools/contract/innet-dp.mk's, the rules a
# program built outside the tree gets from `make install` too.

CC       ?= cc
SANITIZE ?=
ifeq ($(SANITIZE),)
O        ?= build
else
O        ?= build-san-$(SANITIZE)
endif

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter -Wformat=2 -Wvla
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -Isrc -pthread -fno-math-errno -fPIC
LDLIBS   += -ljansson -lpcap -lxxhash -lsodium -lbpf -lelf -lz -lm -pthread
ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
LDFLAGS  += -fsanitize=$(SANITIZE)
endif

LIB_SRC  := $(sort $(filter-out src/cli/% %.bpf.c,$(wildcard src/*/*.c src/targets/*/*.c)))
TOOL_SRC := $(sort $(wildcard src/cli/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(O)/%.o) $(O)/bpf/objects.o $(O)/programs.o

# Data paths, and the program name each one declares (INNET_DATAPATH(name, ...)).
DP_SRC       := $(filter %_dp.c,$(LIB_SRC))
DP_USERSPACE := $(shell grep -l 'INNET_DATAPATH_USERSPACE' $(DP_SRC) /dev/null 2>/dev/null)
DP_XDP       := $(filter-out $(DP_USERSPACE),$(DP_SRC))
dp_name       = $(shell tools/contract/dp-name $(1))
BPF_OBJ      := $(foreach f,$(DP_XDP),$(O)/bpf/$(call dp_name,$(f)).bpf.o)
# The dp tree: what building a data path for both targets outside the tree
# needs besides the public headers (tools/contract/innet-dp.mk, installed as
# DPDIR/innet-dp.mk: `pkg-config --variable=dpmk innet`) — the targets'
# shared internals, not API (no program includes them: innet/dp.h picks
# dp_xdp.h when clang compiles for eBPF, and the template includes the rest).
DP_TREE := src/targets/xdp/prog.bpf.c src/targets/xdp/engine.bpf.h src/targets/xdp/dp_xdp.h \
           src/targets/xdp/xdp_abi.h src/engine/table_algo.h
DP_TOOLS := tools/contract/check-dp tools/contract/check-bpf tools/contract/dp-name
BPF_CLANG    ?= clang
# How a data path is compiled for each target and checked: one definition,
# tools/contract/innet-dp.mk, which `make install` installs for programs
# built outside the tree (the dp tree, DP_TREE below).
INNET_INCDIR    := include
INNET_DPDIR     := .
INNET_CC        := $(CC)
INNET_BPF_CLANG := $(BPF_CLANG)
INNET_DP_OPT    := $(filter -O% -g%,$(CFLAGS))
INNET_DP_RULES  := no
ifneq ($(SANITIZE),)
INNET_DP_EXTRA  := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
endif
include tools/contract/innet-dp.mk
TOOL_OBJ := $(TOOL_SRC:%.c=$(O)/%.o)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c tests/golden/test_*.c))
TEST_BIN := $(TEST_SRC:%.c=$(O)/%)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC := $(sort $(filter-out %.bpf.c,$(wildcard bench/src/*.c)))
BENCH_BIN := $(BENCH_SRC:bench/src/%.c=$(O)/bench/%)

# The version (include/innet/version.h) names the shared library: soname
# libinnet.so.MAJOR, file libinnet.so.MAJOR.MINOR.PATCH.
VER_PART  = $(shell sed -n 's/^\#define INNET_VERSION_$(1) \([0-9]*\).*/\1/p' include/innet/version.h)
VERSION  := $(call VER_PART,MAJOR).$(call VER_PART,MINOR).$(call VER_PART,PATCH)
SO_NAME  := libinnet.so.$(call VER_PART,MAJOR)
SO_FILE  := libinnet.so.$(VERSION)
MAN_MD   := $(sort $(wildcard docs/man/*.md))
MAN_OUT  := $(MAN_MD:docs/man/%.md=$(O)/man/%.1)

all: $(O)/innet $(O)/$(SO_FILE) $(MAN_OUT) $(TEST_BIN) $(BENCH_BIN) $(O)/tests/contract-load

$(O)/libinnet.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@   # (ar would keep the objects of sources since removed)
	$(AR) rcs $@ $^

# The shared library exports the innet_* API alone (src/libinnet.map);
# tests/integration/install.sh checks that with nm -D.
$(O)/$(SO_FILE): $(LIB_OBJ) src/libinnet.map
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script=src/libinnet.map \
	  -Wl,--no-undefined -o $@ $(LIB_OBJ) $(LDLIBS)
	ln -sf $(SO_FILE) $(O)/$(SO_NAME)
	ln -sf $(SO_NAME) $(O)/libinnet.so

# Man pages: roff from docs/man/*.md (go-md2man), at build time.
$(O)/man/%.1: docs/man/%.md include/innet/version.h
	@mkdir -p $(@D)
	(printf '%% %s 1 "" "innet $(VERSION)" "innet manual"\n' $*; tail -n +2 $<) | go-md2man > $@

# The programs register themselves from constructors (INNET_PROGRAM_REGISTER),
# so nothing refers to their objects: a static link names them (the shared
# library holds them all anyway). A test that fakes runtime calls or the
# registry (test_resources, test_topology)
# links without them.
PROG_SRC := $(shell grep -l '^INNET_PROGRAM_REGISTER' $(LIB_SRC) /dev/null 2>/dev/null)
PROG_OBJ := $(PROG_SRC:%.c=$(O)/%.o)
LINK_LIB = $(PROG_OBJ) $(O)/libinnet.a

# A data path built at run time (a P4 program's, src/p4/p4_build.c) is a
# shared object that calls innet_* in the process that loads it: the innet
# command and the tests export them.
EXPORT_API := -Wl,--export-dynamic-symbol='innet_*'

# The shipped programs, listed for the registry (src/engine/registry.c): the
# list refers to every program, so a static link against libinnet.a keeps
# them all without -Wl,--whole-archive (their constructors alone would be
# dropped with the unreferenced objects).
define programs_list
	@mkdir -p $(@D)
	{ echo '/* generated by the Makefile from INNET_PROGRAM_REGISTER lines */'; \
	  echo '#include "innet/program.h"'; \
	  names=$$(sed -n 's/^INNET_PROGRAM_REGISTER(\([a-z0-9_]*\)).*/\1/p' $(PROG_SRC) | sort); \
	  for n in $$names; do echo "extern const struct innet_program $$n;"; done; \
	  echo 'const struct innet_program *const innet__shipped_programs[] = {'; \
	  for n in $$names; do echo "	&$$n,"; done; \
	  echo '	NULL,'; echo '};'; } > $@
endef
$(O)/programs.c: $(PROG_SRC) Makefile
	$(programs_list)

$(O)/innet: $(TOOL_OBJ) $(O)/libinnet.a
	$(CC) $(LDFLAGS) $(EXPORT_API) -o $@ $(TOOL_OBJ) $(LINK_LIB) $(LDLIBS)

$(O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# A data path, user-space build: freestanding, checked (see the top).
$(O)/%_dp.o: %_dp.c tools/contract/check-dp tools/contract/innet-dp.mk
	@mkdir -p $(@D)
	$(call innet_dp_compile,$<,$@)
	$(if $(SANITIZE),,$(call innet_dp_check,$<,$@))

# A data path, XDP build: one eBPF object per program.
define bpf_rule
$(O)/bpf/$(call dp_name,$(1)).bpf.o: $(1) $(DP_TREE) include/innet/dp.h tools/contract/innet-dp.mk
	@mkdir -p $$(@D)
	$$(call innet_bpf_compile,$(1),$$@)
	$$(call innet_bpf_check,$(1),$$@)
endef
$(foreach f,$(DP_XDP),$(eval $(call bpf_rule,$(f))))

# The ALU check (tests/alu; docs/resources.md, "What innet_alu counts"): each
# data path with an eBPF object is compiled once more for eBPF, against the
# user-space engine's structures and with every primitive out of line
# (tests/alu/dp_alu.c), and embedded in the golden tests, which run it in a
# counting interpreter under INNET_TEST_TARGET=alu and compare the ALU
# operations it executes with what innet_alu() reports, pass by pass.
ALU_OBJ := $(foreach f,$(DP_XDP),$(O)/alu/$(call dp_name,$(f)).alu.o)
define alu_rule
$(O)/alu/$(call dp_name,$(1)).alu.o: $(1) tests/alu/dp_alu.c include/innet/dp.h include/innet/dp_user.h
	@mkdir -p $$(@D)
	$(BPF_CLANG) $$(INNET_BPF_CFLAGS) -Itests -DINNET_DP_SOURCE='"$$(abspath $(1))"' \
	  -MMD -MP -c -o $$@ tests/alu/dp_alu.c
endef
$(foreach f,$(DP_XDP),$(eval $(call alu_rule,$(f))))
$(O)/alu/objects.c: $(ALU_OBJ) $(DP_SRC) tests/alu/alu-objects
	@mkdir -p $(@D)
	tests/alu/alu-objects $(O)/alu $(DP_SRC) > $@
ALU_CHECK := $(O)/alu/objects.o $(O)/alu/alu_check.o $(O)/alu/alu_vm.o
$(O)/alu/objects.o: $(O)/alu/objects.c $(ALU_OBJ)
	$(CC) $(CFLAGS) -Itests -c -o $@ $<
$(O)/alu/%.o: tests/alu/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests -MMD -MP -c -o $@ $<

# The eBPF objects, embedded in the library, and the list of user-space-only
# data paths with their reasons (innet programs shows both); and the
# runtime's own eBPF (netns mode's link faults: src/topology/linkfault.bpf.c;
# the Paxos learner filter: src/consensus/learnfilter.bpf.c).
BPF_AUX := $(O)/bpf/linkfault.bpf.o $(O)/bpf/learnfilter.bpf.o
$(O)/bpf/linkfault.bpf.o: src/topology/linkfault.bpf.c
	@mkdir -p $(@D)
	$(BPF_CLANG) -target bpf -mcpu=v3 -O2 -g -Wall -Werror -I/usr/include/$(shell $(CC) -print-multiarch) -c -o $@ $<
$(O)/bpf/learnfilter.bpf.o: src/consensus/learnfilter.bpf.c src/consensus/learnfilter.h
	@mkdir -p $(@D)
	$(BPF_CLANG) -target bpf -mcpu=v3 -O2 -g -Wall -Werror -Isrc -I/usr/include/$(shell $(CC) -print-multiarch) -c -o $@ $<
$(O)/bpf/objects.c: $(BPF_OBJ) $(BPF_AUX) $(DP_SRC) tools/contract/bpf-objects
	@mkdir -p $(@D)
	tools/contract/bpf-objects --aux linkfault $(O)/bpf/linkfault.bpf.o \
	  --aux learnfilter $(O)/bpf/learnfilter.bpf.o $(O)/bpf $(DP_SRC) > $@
$(O)/tests/%: tests/%.c $(O)/libinnet.a tests/unit/testutil.h tests/unit/oom.h tests/unit/lb_contention.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $(EXPORT_API) -Itests -o $@ $< $(TEST_EXTRA) $(LINK_LIB) $(LDLIBS) -lcmocka
# The golden tests also run under the ALU check (INNET_TEST_TARGET=alu).
$(filter $(O)/tests/golden/%,$(TEST_BIN)): $(ALU_CHECK)
$(O)/tests/golden/%: TEST_EXTRA = $(ALU_CHECK)
$(O)/tests/unit/test_resources $(O)/tests/unit/test_topology: LINK_LIB = $(O)/libinnet.a

# Benchmark tools are standalone (the raw relay must not share innet's code).
$(O)/bench/%: bench/src/%.c bench/src/now.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -lm -pthread
# The XDP tools (generator, sink, the hand-written forwarder) and their eBPF.
$(O)/bench/xdptool: bench/src/xdptool.c bench/src/now.h $(O)/bench/xdptool.bpf.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -lbpf -lelf -lz
$(O)/bench/%.bpf.o: bench/src/%.bpf.c
	@mkdir -p $(@D)
	$(BPF_CLANG) -target bpf -mcpu=v3 -O2 -g -Wall -Werror -I/usr/include/$(shell $(CC) -print-multiarch) -c -o $@ $<

# Aggregation (docs/aggregation.md): the host library as a shared object for
# src/agg/python/innet_agg.py (ctypes), and the MPI interposition library (mpicc,
# OpenMPI). Not part of `all`: make build/libinnet-agg.so build/libinnet-mpi.so
AGG_SO_DEPS := src/agg/host.c src/engine/clock.c src/agg/wire.h include/innet/agg.h include/innet/wire.h \
	include/innet/clock.h
$(O)/libinnet-agg.so: $(AGG_SO_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -fPIC -shared -o $@ src/agg/host.c src/engine/clock.c -lm -pthread
$(O)/libinnet-mpi.so: src/agg/pmpi/innet_pmpi.c $(AGG_SO_DEPS)
	@mkdir -p $(@D)
	OMPI_CC=$(CC) mpicc $(CFLAGS) $(LDFLAGS) -fPIC -shared -o $@ src/agg/pmpi/innet_pmpi.c src/agg/host.c src/engine/clock.c -lm -pthread

# The contract on one file (tests/contract/*.c, tests/integration/contract.sh):
#   make dp-check DP=FILE   both builds of FILE, as for a program's NAME_dp.c
dp-check:
	@mkdir -p $(O)/contract
	$(call innet_dp_compile,$(DP),$(O)/contract/$(notdir $(DP:.c=.o)))
	$(call innet_dp_check,$(DP),$(O)/contract/$(notdir $(DP:.c=.o)))
	@if grep -q INNET_DATAPATH_USERSPACE $(DP); then \
	  tools/contract/bpf-objects $(O)/contract $(DP) > /dev/null; \
	else \
	  $(call innet_bpf_compile,$(DP),$(O)/contract/$(notdir $(DP:.c=.bpf.o))) && \
	  $(call innet_bpf_check,$(DP),$(O)/contract/$(notdir $(DP:.c=.bpf.o))); \
	fi
$(O)/tests/contract-load: tests/contract/load.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -lbpf -lelf -lz

# The fuzz targets: the library compiled once with coverage and sanitizers
# into build-fuzz/obj, each target linked against those objects.
FUZZ_O      := build-fuzz
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
               -fsanitize=fuzzer-no-link,address,undefined
FUZZ_OBJ    := $(LIB_SRC:%.c=$(FUZZ_O)/obj/%.o) $(FUZZ_O)/obj/bpf-objects.o $(FUZZ_O)/obj/programs.o
# (named only in the pattern rule below, the objects would be intermediate
# files: make deleted them after the first link in a fresh tree, and the next
# `make fuzz` (the -MMD files now naming them) compiled them all again)
.SECONDARY: $(FUZZ_OBJ)
fuzz: $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_O)/%)
$(FUZZ_O)/obj/%.o: %.c
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<
$(FUZZ_O)/obj/bpf-objects.o: $(FUZZ_O)/bpf/objects.c
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -c -o $@ $<
$(FUZZ_O)/obj/programs.o: $(FUZZ_O)/programs.c
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -c -o $@ $<
$(FUZZ_O)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer $(EXPORT_API) -o $@ $< $(FUZZ_OBJ) $(LDLIBS)
# (in that make, O is FUZZ_O: the rule for $(O)/bpf/objects.c builds it, and
# this one must not replace its recipe, or the make calls itself for ever)
ifneq ($(O),$(FUZZ_O))
$(FUZZ_O)/bpf/objects.c:
	$(MAKE) O=$(FUZZ_O) $@
$(FUZZ_O)/programs.c: $(PROG_SRC) Makefile
	$(programs_list)
endif

check: all
	tests/run

# The project's P4 programs (p4/NAME.p4, docs/p4.md) with the BMv2 JSON that
# p4c-bm2-ss compiles from them committed beside them: `make p4` regenerates
# the JSON (needs p4c-bm2-ss: P4C_BM2_SS or PATH; not needed to build
# innet); tests/integration/p4_json.sh checks that they agree. The test
# programs in tests/p4 likewise.
p4:
	tools/p4/p4test compile $(sort $(wildcard p4/*.p4 tests/p4/*.p4))

# ---- install ----------------------------------------------------------------
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man
PCDIR   ?= $(LIBDIR)/pkgconfig
COMPDIR ?= $(PREFIX)/share/bash-completion/completions
DPDIR   ?= $(PREFIX)/share/innet/dp
# The public API: what a program of one's own includes (innet/*.h).
HEADERS := $(sort $(wildcard include/innet/*.h))
# A P4 program's data path is generated and compiled when it is loaded
# (src/p4/p4_build.c): against this tree, or the installed headers and dp
# tree, which then holds the P4 run-time headers too.
P4_DP_TREE := src/p4/p4rt_dp.h src/p4/p4rt_state.h src/p4/p4rt_pipe.h
P4_BUILD_DIRS = -DINNET_SRC_DIR='"$(abspath .)"' -DINNET_SHARE_DIR='"$(DPDIR)"' \
                -DINNET_INC_DIR='"$(INCDIR)"'
$(O)/src/p4/p4_build.o: CFLAGS += $(P4_BUILD_DIRS)
$(FUZZ_O)/obj/src/p4/p4_build.o: FUZZ_CFLAGS += $(P4_BUILD_DIRS)

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR)/innet \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(PCDIR) $(DESTDIR)$(COMPDIR)
	install -m 755 $(O)/innet $(DESTDIR)$(BINDIR)/innet
	install -m 644 $(HEADERS) $(DESTDIR)$(INCDIR)/innet/
	install -m 644 $(O)/libinnet.a $(DESTDIR)$(LIBDIR)/libinnet.a
	install -m 755 $(O)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_FILE)
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/libinnet.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
	  -e 's|@DPDIR@|$(DPDIR)|' -e 's|@VERSION@|$(VERSION)|' src/innet.pc.in > $(DESTDIR)$(PCDIR)/innet.pc
	install -m 644 $(MAN_OUT) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 tools/completion/innet.bash $(DESTDIR)$(COMPDIR)/innet
	install -d $(sort $(addprefix $(DESTDIR)$(DPDIR)/,$(dir $(DP_TREE) $(P4_DP_TREE) $(DP_TOOLS))))
	for f in $(DP_TREE) $(P4_DP_TREE); do install -m 644 $$f $(DESTDIR)$(DPDIR)/$$f || exit 1; done
	for f in $(DP_TOOLS); do install -m 755 $$f $(DESTDIR)$(DPDIR)/$$f || exit 1; done
	sed -e 's|@INCDIR@|$(INCDIR)|' tools/contract/innet-dp.mk > $(DESTDIR)$(DPDIR)/innet-dp.mk
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/innet $(DESTDIR)$(LIBDIR)/libinnet.a \
	  $(DESTDIR)$(LIBDIR)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_NAME) $(DESTDIR)$(LIBDIR)/libinnet.so \
	  $(DESTDIR)$(PCDIR)/innet.pc $(DESTDIR)$(COMPDIR)/innet \
	  $(addprefix $(DESTDIR)$(INCDIR)/innet/,$(notdir $(HEADERS))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN_OUT))) \
	  $(addprefix $(DESTDIR)$(DPDIR)/,$(DP_TREE) $(P4_DP_TREE) $(DP_TOOLS) innet-dp.mk)
	-rmdir $(DESTDIR)$(INCDIR)/innet 2>/dev/null
	-cd $(DESTDIR)$(DPDIR) 2>/dev/null && rmdir -p $(sort $(dir $(DP_TREE) $(P4_DP_TREE) $(DP_TOOLS))) 2>/dev/null
	-rmdir $(DESTDIR)$(DPDIR) $(dir $(DESTDIR)$(DPDIR)) 2>/dev/null

clean:
	rm -rf build build-san-* build-fuzz

.PHONY: all check clean fuzz dp-check install uninstall p4
-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(BPF_OBJ:.o=.d) $(FUZZ_OBJ:.o=.d) $(ALU_OBJ:.o=.d) \
  $(ALU_CHECK:.o=.d)

# innet — build. `make` builds build/innet, the library and all tests.
#   make CC=clang                      another compiler
#   make SANITIZE=address,undefined    sanitizer build (into build-san-address,undefined/)
#   make SANITIZE=thread               ThreadSanitizer build
#   make fuzz                          libFuzzer targets (clang)
#   make check                         the whole test suite (tests/run)
# Sources are found by wildcard: src/runtime, src/programs, one folder per
# service (src/<svc>/*.c); src/tools/*.c make the innet command.

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
CFLAGS   += -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -Isrc -pthread -fno-math-errno
LDLIBS   += -ljansson -lpcap -lxxhash -lsodium -lm -pthread
ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
LDFLAGS  += -fsanitize=$(SANITIZE)
endif

LIB_SRC  := $(sort $(filter-out src/tools/%,$(wildcard src/*/*.c)))
TOOL_SRC := $(sort $(wildcard src/tools/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(O)/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(O)/%.o)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c tests/golden/test_*.c))
TEST_BIN := $(TEST_SRC:%.c=$(O)/%)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC := $(sort $(wildcard bench/src/*.c))
BENCH_BIN := $(BENCH_SRC:bench/src/%.c=$(O)/bench/%)

all: $(O)/innet $(TEST_BIN) $(BENCH_BIN)

$(O)/libinnet.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(O)/innet: $(TOOL_OBJ) $(O)/libinnet.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(O)/libinnet.a $(LDLIBS)

$(O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(O)/tests/%: tests/%.c $(O)/libinnet.a tests/unit/testutil.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -Itests -o $@ $< $(O)/libinnet.a $(LDLIBS) -lcmocka

# Benchmark tools are standalone (the raw relay must not share innet's code).
$(O)/bench/%: bench/src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -lm -pthread

# Aggregation (docs/aggregation.md): the host library as a shared object for
# python/innet_agg.py (ctypes), and the MPI interposition library (mpicc,
# OpenMPI). Not part of `all`: make build/libinnet-agg.so build/libinnet-mpi.so
AGG_SO_DEPS := src/agg/host.c src/agg/wire.h include/innet/agg.h include/innet/wire.h
$(O)/libinnet-agg.so: $(AGG_SO_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -fPIC -shared -o $@ src/agg/host.c -lm -pthread
$(O)/libinnet-mpi.so: src/agg/pmpi/innet_pmpi.c $(AGG_SO_DEPS)
	@mkdir -p $(@D)
	OMPI_CC=$(CC) mpicc $(CFLAGS) $(LDFLAGS) -fPIC -shared -o $@ src/agg/pmpi/innet_pmpi.c src/agg/host.c -lm -pthread

FUZZ_O := build-fuzz
fuzz: $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_O)/%)
$(FUZZ_O)/%: tests/fuzz/%.c $(LIB_SRC)
	@mkdir -p $(@D)
	clang -std=gnu11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
	  -fsanitize=fuzzer,address,undefined -o $@ $< $(LIB_SRC) $(LDLIBS)

check: all
	tests/run

clean:
	rm -rf build build-san-* build-fuzz

.PHONY: all check clean fuzz
-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d)

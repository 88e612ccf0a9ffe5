# innet-dp.mk — how a data-plane program's data path (NAME_dp.c: handlers
# against innet/dp.h, docs/programs.md "The contract") is built for both
# targets, with the contract checked: innet's own Makefile builds its
# programs with it, and `make install` installs it with what it needs (the
# dp tree: DATADIR/innet/dp) so that a program built outside the tree gets
# the same two objects from the same rules:
#
#   NAME_dp.o       the user-space engine's: freestanding (-ffreestanding
#                   -nostdinc), frames of at most 512 bytes, then checked
#                   (tools/contract/check-dp: only innet_* and mem* undefined,
#                   no mutable global)
#   NAME_dp.bpf.o   the XDP target's: clang -target bpf over the template
#                   src/targets/xdp/prog.bpf.c, then checked (check-bpf: no
#                   call outside the object); a program instance loads it
#                   with innet_decl_datapath (innet/program.h)
#
# Outside the tree:
#
#   include $(shell pkg-config --variable=dpmk innet)
#   my_switch: my_switch.o my_dp.o          # the user-space object, linked in
#   all: my_switch my_dp.bpf.o              # the eBPF object, loaded at run time
#
# Variables (set before the include to change them):
#   INNET_INCDIR     innet's public headers (innet/dp.h ...)
#   INNET_DPDIR      the dp tree (src/targets/xdp, tools/contract); default:
#                    where this file is
#   INNET_CC, INNET_BPF_CLANG   the compilers (cc, clang)
#   INNET_DP_OPT     optimisation and debug flags (-O2 -g)
#   INNET_DP_EXTRA   more flags for the user-space object (innet's own
#                    build: the sanitizers')
#   INNET_DP_RULES   "no": define no pattern rules, only the variables and
#                    the recipes below (innet's own Makefile does so)
#
# Recipes, for rules of one's own ($(1) the source, $(2) the object):
#   $(call innet_dp_compile,SRC,OBJ)   $(call innet_dp_check,SRC,OBJ)
#   $(call innet_bpf_compile,SRC,OBJ)  $(call innet_bpf_check,SRC,OBJ)

ifndef INNET_DPDIR
INNET_DPDIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
endif
INNET_INCDIR    ?= @INCDIR@
INNET_CC        ?= $(CC)
INNET_BPF_CLANG ?= clang
INNET_DP_OPT    ?= -O2 -g
INNET_DP_EXTRA  ?=

INNET_DP_WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
                    -Wno-unused-parameter -Wformat=2 -Wvla
INNET_DP_CFLAGS   = -std=gnu11 $(INNET_DP_WARN) -I$(INNET_INCDIR) -I$(INNET_DPDIR)/src \
                    -ffreestanding -nostdinc -isystem $(shell $(INNET_CC) -print-file-name=include) \
                    $(INNET_DP_OPT) -fno-math-errno -fPIC $(INNET_DP_EXTRA)
INNET_BPF_CFLAGS  = -target bpf -mcpu=v3 -O2 -g -ffreestanding -Wall -Wextra -Werror \
                    -Wno-unused-parameter -Wno-unused-function -I$(INNET_INCDIR) -I$(INNET_DPDIR)/src \
                    -I/usr/include/$(shell $(INNET_CC) -print-multiarch)

# A data path that says it is user-space only (INNET_DATAPATH_USERSPACE):
# no stack limit for it, and no eBPF object.
innet_dp_userspace = $(shell grep -l '^INNET_DATAPATH_USERSPACE' $(1) /dev/null 2>/dev/null)

innet_dp_compile = $(INNET_CC) $(INNET_DP_CFLAGS) \
	$(if $(call innet_dp_userspace,$(1)),,-Wframe-larger-than=512) -MMD -MP -c -o $(2) $(1)
innet_dp_check = $(INNET_DPDIR)/tools/contract/check-dp $(2) $(1)
innet_bpf_compile = $(INNET_BPF_CLANG) $(INNET_BPF_CFLAGS) -DINNET_DP_SOURCE='"$(abspath $(1))"' \
	-MMD -MP -c -o $(2) $(INNET_DPDIR)/src/targets/xdp/prog.bpf.c
innet_bpf_check = $(INNET_DPDIR)/tools/contract/check-bpf $(2) $(1) || { rm -f $(2); exit 1; }

ifneq ($(INNET_DP_RULES),no)
%_dp.o: %_dp.c
	$(call innet_dp_compile,$<,$@)
	$(call innet_dp_check,$<,$@)

%_dp.bpf.o: %_dp.c
	@if [ -n "$(call innet_dp_userspace,$<)" ]; then \
	  echo "$<: user-space only (INNET_DATAPATH_USERSPACE): no eBPF object" >&2; exit 1; fi
	$(call innet_bpf_compile,$<,$@)
	$(call innet_bpf_check,$<,$@)
endif

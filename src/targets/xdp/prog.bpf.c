/*
 * prog.bpf.c — the template of every program's eBPF object: the program's
 * data-path source (NAME_dp.c, named by -DINNET_DP_SOURCE) and the engine
 * around its handler. The Makefile compiles it once per program with
 * clang -target bpf; a data path that breaks the contract fails here (or,
 * for what only the verifier sees, in tests/unit/test_xdp_verifier.c).
 */
#include INNET_DP_SOURCE
#include "targets/xdp/engine.bpf.h"

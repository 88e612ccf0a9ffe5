/*
 * alu_vm.h — an eBPF interpreter that counts what it executes, for the ALU
 * check of the data paths (alu_check.c, docs/resources.md "alu ops/pass").
 *
 * It runs the code of a relocatable eBPF object (clang -target bpf -c) on
 * the host's own memory: registers hold host pointers, loads and stores go
 * straight to them, a call to an undefined symbol goes to the native
 * function of that name from the table it was opened with, a call inside
 * the object gets a new 512-byte frame. It is for trusted, tested code (a
 * data path the build compiled): a wild pointer crashes the test as the
 * native handler would.
 *
 * What it counts per run (struct alu_vm_count): every instruction by kind.
 * An "ALU operation" is an instruction of the ALU or ALU64 class that
 * computes — add, sub, mul, div, mod, and, or, xor, shifts, neg — except
 *   - moves (mov, mov32): register allocation, argument passing and
 *     zero-extension, no work on a switch;
 *   - byte swaps (be16/32/64, le): a switch's header fields are already in
 *     network order;
 *   - address arithmetic: an add or sub that moves a pointer within the
 *     run's own stack (the address of a local, passed to a primitive) or
 *     within memory the caller names (struct alu_vm_mem: the packet, the
 *     context, the configuration ...) — a struct member's or an array
 *     element's address; a switch addresses its fields by wiring;
 *   - byte-lane moves: a shift by a whole number of bytes, the OR of two
 *     pieces of data as loaded (from memory or from a primitive) that share
 *     no bit, an AND keeping the low 1, 2 or 4 bytes of such data. eBPF
 *     cannot load a field at an unaligned address, so clang assembles a
 *     packed header's 4-byte field from 4 byte loads with 3 shifts and 3 ORs
 *     (and splits a store likewise), and a key is built from fields the same
 *     way: on a switch the parser and the crossbars move those bytes, no
 *     ALU does.
 */
#ifndef INNET_ALU_VM_H
#define INNET_ALU_VM_H

#include <stddef.h>
#include <stdint.h>

/* A native function the object may call: up to five 64-bit arguments (the
 * eBPF calling convention), one 64-bit result. */
typedef uint64_t (*alu_vm_native_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

struct alu_vm_native {
	const char *name;      /* the undefined symbol the object calls */
	alu_vm_native_fn fn;
};

/* Instructions executed by one run, by kind (they add up to insns). */
struct alu_vm_count {
	uint64_t insns;        /* all */
	uint64_t alu;          /* ALU operations (see the file comment) */
	uint64_t moves;        /* mov, mov32 */
	uint64_t swaps;        /* be, le */
	uint64_t addr;         /* address arithmetic */
	uint64_t lanes;        /* byte-lane moves */
	uint64_t loads;        /* ldx, lddw */
	uint64_t stores;       /* st, stx, atomics */
	uint64_t jumps;        /* conditional and unconditional jumps */
	uint64_t calls;        /* calls (native and local) and exits */
	uint64_t *alu_at;      /* NULL, or one counter per instruction of the object
	                        * (alu_vm_insns): ALU operations executed there */
};

struct alu_vm;

/* The instruction index of the call being made, on this thread, while a
 * native runs (for reports: the call site's offset is 8 times it). */
extern __thread long alu_vm_call_pc;

/* Open the object of `len` bytes at `elf` (copied: the caller may free it).
 * Every call to an undefined symbol must name one of natives[] (a NULL name
 * ends the table). 0, or -errno with a message in err. */
int alu_vm_open(struct alu_vm **vm, const void *elf, size_t len,
		const struct alu_vm_native *natives, char *err, size_t errlen);
void alu_vm_close(struct alu_vm *vm);

/* The number of instructions of the object's code. */
size_t alu_vm_insns(const struct alu_vm *vm);
/* The entry of the global function `name` (its first instruction), or -1. */
long alu_vm_func(const struct alu_vm *vm, const char *name);
/* The bytes of the global object `name` and their number, or NULL. */
const void *alu_vm_data(const struct alu_vm *vm, const char *name, size_t *size);

/* Run the function at `entry` with args[0..4] in r1..r5 (mem[0..n_mem-1]:
 * memory it was given, for telling address arithmetic): its result in
 * *ret and what it executed added to *cnt. 0, or -errno with a message in
 * err (a bad instruction, a jump out of the code, more than ALU_VM_MAX_INSNS
 * instructions, calls nested deeper than eBPF's 8 frames). Thread-safe: a
 * run keeps its state on the caller's stack. */
#define ALU_VM_MAX_INSNS (1u << 24)
struct alu_vm_mem {
	uintptr_t lo, hi;      /* [lo, hi): memory the code was given */
};
int alu_vm_run(const struct alu_vm *vm, long entry, const uint64_t args[5],
	       const struct alu_vm_mem *mem, unsigned n_mem, uint64_t *ret,
	       struct alu_vm_count *cnt, char *err, size_t errlen);

#endif /* INNET_ALU_VM_H */

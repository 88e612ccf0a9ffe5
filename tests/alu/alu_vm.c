/*
 * alu_vm.c — an eBPF interpreter that counts what it executes (alu_vm.h).
 *
 * The object is read with libelf: .text is the code, every other allocated
 * section (.rodata ...) is copied into memory of its own, and the
 * relocations of .text are applied at open — a call to an undefined symbol
 * becomes a call to its native function, an lddw of a data symbol its host
 * address. A run keeps its registers and its stack (eight 512-byte frames,
 * eBPF's limits) on the caller's stack:
 *
 *   stack[]  | frame 7 | ... | frame 1 | frame 0 |
 *            lowest                     r10 of the entry function = the end
 *
 * Instructions are those of -mcpu=v3 (the XDP build's): ALU/ALU64, JMP/JMP32,
 * LDX/ST/STX of 1, 2, 4, 8 bytes, lddw, atomics; anything else stops the run
 * with a message naming the instruction.
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alu/alu_vm.h"

/* One eBPF instruction (linux/bpf.h's struct bpf_insn, without its header). */
struct vm_insn {
	uint8_t code;
	uint8_t regs;     /* dst in bits 0-3, src in bits 4-7 */
	int16_t off;
	int32_t imm;
};

enum {
	VM_LD = 0x00, VM_LDX = 0x01, VM_ST = 0x02, VM_STX = 0x03,
	VM_ALU = 0x04, VM_JMP = 0x05, VM_JMP32 = 0x06, VM_ALU64 = 0x07,
};
enum { /* ALU ops (code & 0xf0) */
	OP_ADD = 0x00, OP_SUB = 0x10, OP_MUL = 0x20, OP_DIV = 0x30, OP_OR = 0x40,
	OP_AND = 0x50, OP_LSH = 0x60, OP_RSH = 0x70, OP_NEG = 0x80, OP_MOD = 0x90,
	OP_XOR = 0xa0, OP_MOV = 0xb0, OP_ARSH = 0xc0, OP_END = 0xd0,
};
enum { /* JMP ops */
	OP_JA = 0x00, OP_JEQ = 0x10, OP_JGT = 0x20, OP_JGE = 0x30, OP_JSET = 0x40,
	OP_JNE = 0x50, OP_JSGT = 0x60, OP_JSGE = 0x70, OP_CALL = 0x80, OP_EXIT = 0x90,
	OP_JLT = 0xa0, OP_JLE = 0xb0, OP_JSLT = 0xc0, OP_JSLE = 0xd0,
};
#define VM_SRC_X      0x08   /* source operand: a register (else imm) */
#define VM_MODE_MEM   0x60
#define VM_MODE_ATOM  0xc0
#define VM_FETCH      0x01
#define VM_XCHG       0xe1
#define VM_CMPXCHG    0xf1
#define VM_FRAMES     8
#define VM_FRAME_SIZE 512

/* What a call instruction calls (resolved at open). */
struct vm_call {
	alu_vm_native_fn native;  /* an undefined symbol's native, or NULL */
	long target;              /* a function of the object: its first insn, or -1 */
};

struct vm_sym {
	char *name;
	bool func;                /* in .text: value is an instruction index */
	const uint8_t *addr;      /* data: its bytes */
	size_t value, size;
};

struct alu_vm {
	struct vm_insn *code;
	size_t n_insns;
	struct vm_call *calls;    /* one per instruction */
	uint8_t **secs;           /* per ELF section: its copy (allocated data) */
	size_t n_secs;
	struct vm_sym *syms;
	size_t n_syms;
};

__thread long alu_vm_call_pc;

static int vm_err(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int vm_err(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

void alu_vm_close(struct alu_vm *vm)
{
	if (vm == NULL)
		return;
	for (size_t i = 0; i < vm->n_secs; i++)
		free(vm->secs[i]);
	for (size_t i = 0; i < vm->n_syms; i++)
		free(vm->syms[i].name);
	free(vm->secs);
	free(vm->syms);
	free(vm->code);
	free(vm->calls);
	free(vm);
}

static alu_vm_native_fn vm_native(const struct alu_vm_native *natives, const char *name)
{
	for (const struct alu_vm_native *n = natives; n->name != NULL; n++)
		if (strcmp(n->name, name) == 0)
			return n->fn;
	return NULL;
}

/* Apply the relocations of .text (section text_idx). */
static int vm_relocate(struct alu_vm *vm, Elf *elf, Elf_Scn *rel_scn, GElf_Shdr *rel_sh,
		       size_t text_idx, const struct alu_vm_native *natives, char *err, size_t errlen)
{
	Elf_Scn *sym_scn = elf_getscn(elf, rel_sh->sh_link);
	GElf_Shdr sym_sh;
	Elf_Data *rels = elf_getdata(rel_scn, NULL), *syms;
	if (sym_scn == NULL || gelf_getshdr(sym_scn, &sym_sh) == NULL || rels == NULL ||
	    (syms = elf_getdata(sym_scn, NULL)) == NULL)
		return vm_err(err, errlen, -EINVAL, "unreadable relocations");
	size_t n = rel_sh->sh_size / rel_sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Rel r;
		GElf_Sym s;
		if (gelf_getrel(rels, (int)i, &r) == NULL ||
		    gelf_getsym(syms, (int)GELF_R_SYM(r.r_info), &s) == NULL)
			return vm_err(err, errlen, -EINVAL, "unreadable relocation %zu", i);
		size_t at = r.r_offset / sizeof(struct vm_insn);
		const char *name = elf_strptr(elf, sym_sh.sh_link, s.st_name);
		if (name == NULL || name[0] == '\0') { /* a section symbol: its name */
			size_t str;
			Elf_Scn *sec = elf_getscn(elf, s.st_shndx);
			GElf_Shdr sh;
			name = sec != NULL && gelf_getshdr(sec, &sh) != NULL &&
					       elf_getshdrstrndx(elf, &str) == 0
				       ? elf_strptr(elf, str, sh.sh_name)
				       : "?";
		}
		if (at >= vm->n_insns)
			return vm_err(err, errlen, -EINVAL, "relocation of %s outside the code", name);
		struct vm_insn *in = &vm->code[at];
		if (in->code == (VM_JMP | OP_CALL)) {
			if (s.st_shndx == SHN_UNDEF) {
				vm->calls[at].native = vm_native(natives, name);
				if (vm->calls[at].native == NULL)
					return vm_err(err, errlen, -ENOENT,
						      "the code calls %s, which has no native "
						      "(tests/alu/alu_check.c, natives[])", name);
			} else if (s.st_shndx == text_idx) {
				/* as libbpf: the symbol's instruction plus imm + 1 */
				vm->calls[at].target = (long)(s.st_value / sizeof(struct vm_insn)) +
						       in->imm + 1;
			} else {
				return vm_err(err, errlen, -EINVAL, "call to %s outside .text", name);
			}
			continue;
		}
		if (in->code == (VM_LD | 0x18) && at + 1 < vm->n_insns) { /* lddw */
			if (s.st_shndx == SHN_UNDEF || s.st_shndx >= vm->n_secs ||
			    vm->secs[s.st_shndx] == NULL)
				return vm_err(err, errlen, -EINVAL,
					      "the code takes the address of %s (not data of the object)",
					      name);
			uint64_t a = (uint64_t)(uintptr_t)vm->secs[s.st_shndx] + s.st_value +
				     (uint64_t)(int64_t)in->imm;
			in[0].imm = (int32_t)(uint32_t)a;
			in[1].imm = (int32_t)(uint32_t)(a >> 32);
			continue;
		}
		return vm_err(err, errlen, -EINVAL, "unexpected relocation of %s at insn %zu", name,
			      at);
	}
	return 0;
}

static int vm_load_syms(struct alu_vm *vm, Elf *elf, Elf_Scn *scn, GElf_Shdr *sh,
			size_t text_idx, char *err, size_t errlen)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (d == NULL)
		return vm_err(err, errlen, -EINVAL, "unreadable symbol table");
	size_t n = sh->sh_size / sh->sh_entsize;
	vm->syms = calloc(n, sizeof(*vm->syms));
	if (vm->syms == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (gelf_getsym(d, (int)i, &s) == NULL)
			return vm_err(err, errlen, -EINVAL, "unreadable symbol %zu", i);
		const char *name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (GELF_ST_BIND(s.st_info) != STB_GLOBAL || name == NULL || s.st_shndx == SHN_UNDEF ||
		    s.st_shndx >= vm->n_secs)
			continue;
		struct vm_sym *v = &vm->syms[vm->n_syms];
		v->func = s.st_shndx == text_idx;
		if (!v->func && vm->secs[s.st_shndx] == NULL)
			continue;
		v->name = strdup(name);
		if (v->name == NULL)
			return -ENOMEM;
		v->value = v->func ? s.st_value / sizeof(struct vm_insn) : s.st_value;
		v->size = s.st_size;
		v->addr = v->func ? NULL : vm->secs[s.st_shndx] + s.st_value;
		vm->n_syms++;
	}
	return 0;
}

int alu_vm_open(struct alu_vm **out, const void *image, size_t len,
		const struct alu_vm_native *natives, char *err, size_t errlen)
{
	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return vm_err(err, errlen, -EINVAL, "libelf: %s", elf_errmsg(-1));
	char *copy = malloc(len);
	if (copy == NULL)
		return -ENOMEM;
	memcpy(copy, image, len);
	int rc = -EINVAL;
	Elf *elf = elf_memory(copy, len);
	struct alu_vm *vm = calloc(1, sizeof(*vm));
	size_t shnum, shstr, text_idx = 0;
	if (vm == NULL) {
		rc = -ENOMEM;
		goto err_free;
	}
	GElf_Ehdr eh;
	if (elf == NULL || gelf_getehdr(elf, &eh) == NULL || eh.e_machine != EM_BPF ||
	    elf_getshdrnum(elf, &shnum) != 0 || elf_getshdrstrndx(elf, &shstr) != 0) {
		rc = vm_err(err, errlen, -EINVAL, "not an eBPF object");
		goto err_free;
	}
	vm->n_secs = shnum;
	vm->secs = calloc(shnum, sizeof(*vm->secs));
	if (vm->secs == NULL) {
		rc = -ENOMEM;
		goto err_free;
	}
	/* Pass 1: the code and the data sections. */
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) == NULL)
			goto err_free;
		const char *name = elf_strptr(elf, shstr, sh.sh_name);
		size_t idx = elf_ndxscn(scn);
		if (!(sh.sh_flags & SHF_ALLOC) || sh.sh_size == 0)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (sh.sh_flags & SHF_EXECINSTR) {
			if (name == NULL || strcmp(name, ".text") != 0 || vm->code != NULL || d == NULL) {
				rc = vm_err(err, errlen, -EINVAL, "code outside .text (%s)",
					    name ? name : "?");
				goto err_free;
			}
			text_idx = idx;
			vm->n_insns = sh.sh_size / sizeof(struct vm_insn);
			vm->code = malloc(sh.sh_size);
			vm->calls = calloc(vm->n_insns, sizeof(*vm->calls));
			if (vm->code == NULL || vm->calls == NULL) {
				rc = -ENOMEM;
				goto err_free;
			}
			memcpy(vm->code, d->d_buf, sh.sh_size);
			for (size_t i = 0; i < vm->n_insns; i++)
				vm->calls[i].target = -1;
			continue;
		}
		vm->secs[idx] = calloc(1, sh.sh_size + 8);
		if (vm->secs[idx] == NULL) {
			rc = -ENOMEM;
			goto err_free;
		}
		if (sh.sh_type != SHT_NOBITS && d != NULL && d->d_buf != NULL)
			memcpy(vm->secs[idx], d->d_buf, d->d_size);
	}
	if (vm->code == NULL) {
		rc = vm_err(err, errlen, -EINVAL, "no .text");
		goto err_free;
	}
	/* Pass 2: symbols, then the relocations of .text (data sections that
	 * need relocating would hold pointers: none does, refuse them). */
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) == NULL)
			goto err_free;
		if (sh.sh_type == SHT_SYMTAB &&
		    (rc = vm_load_syms(vm, elf, scn, &sh, text_idx, err, errlen)) != 0)
			goto err_free;
	}
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) == NULL)
			goto err_free;
		if (sh.sh_type != SHT_REL && sh.sh_type != SHT_RELA)
			continue;
		if (sh.sh_info == text_idx && sh.sh_type == SHT_REL) {
			if ((rc = vm_relocate(vm, elf, scn, &sh, text_idx, natives, err, errlen)) != 0)
				goto err_free;
		} else if (sh.sh_info < vm->n_secs && vm->secs[sh.sh_info] != NULL) {
			rc = vm_err(err, errlen, -EINVAL, "relocated data (pointers in constants)");
			goto err_free;
		}
	}
	elf_end(elf);
	free(copy);
	*out = vm;
	return 0;

err_free:
	if (rc == -EINVAL && err[0] == '\0')
		vm_err(err, errlen, rc, "libelf: %s", elf_errmsg(-1));
	alu_vm_close(vm);
	if (elf != NULL)
		elf_end(elf);
	free(copy);
	return rc;
}

size_t alu_vm_insns(const struct alu_vm *vm)
{
	return vm->n_insns;
}

long alu_vm_func(const struct alu_vm *vm, const char *name)
{
	for (size_t i = 0; i < vm->n_syms; i++)
		if (vm->syms[i].func && strcmp(vm->syms[i].name, name) == 0)
			return (long)vm->syms[i].value;
	return -1;
}

const void *alu_vm_data(const struct alu_vm *vm, const char *name, size_t *size)
{
	for (size_t i = 0; i < vm->n_syms; i++)
		if (!vm->syms[i].func && strcmp(vm->syms[i].name, name) == 0) {
			*size = vm->syms[i].size;
			return vm->syms[i].addr;
		}
	return NULL;
}

/* Whether an ALU instruction only moves bytes (alu_vm.h, "byte lanes"): a
 * shift by a whole number of bytes; the OR of two pieces of data as loaded
 * that share no bit; an AND that keeps the low 1, 2 or 4 bytes of data as
 * loaded. dst_lane, src_lane: whether the operands are data as loaded (a
 * load, a primitive's result, or lanes of those). */
static bool vm_lane_op(uint8_t op, uint8_t cls, bool x, int32_t imm, bool dst_lane,
		       bool src_lane, uint64_t d, uint64_t s)
{
	if (cls == VM_ALU) {
		d = (uint32_t)d;
		s = (uint32_t)s;
	}
	switch (op) {
	case OP_LSH:
	case OP_RSH:
		return !x && imm % 8 == 0;
	case OP_OR:
		return x && dst_lane && src_lane && (d & s) == 0;
	case OP_AND:
		return !x && dst_lane && (imm == 0xff || imm == 0xffff || imm == -1);
	default:
		return false;
	}
}

static uint64_t vm_alu64(uint8_t op, uint64_t d, uint64_t s)
{
	switch (op) {
	case OP_ADD: return d + s;
	case OP_SUB: return d - s;
	case OP_MUL: return d * s;
	case OP_DIV: return s != 0 ? d / s : 0;
	case OP_OR: return d | s;
	case OP_AND: return d & s;
	case OP_LSH: return d << (s & 63);
	case OP_RSH: return d >> (s & 63);
	case OP_NEG: return -d;
	case OP_MOD: return s != 0 ? d % s : d;
	case OP_XOR: return d ^ s;
	case OP_MOV: return s;
	default: return (uint64_t)((int64_t)d >> (s & 63)); /* OP_ARSH */
	}
}

static uint32_t vm_alu32(uint8_t op, uint32_t d, uint32_t s)
{
	switch (op) {
	case OP_ADD: return d + s;
	case OP_SUB: return d - s;
	case OP_MUL: return d * s;
	case OP_DIV: return s != 0 ? d / s : 0;
	case OP_OR: return d | s;
	case OP_AND: return d & s;
	case OP_LSH: return d << (s & 31);
	case OP_RSH: return d >> (s & 31);
	case OP_NEG: return -d;
	case OP_MOD: return s != 0 ? d % s : d;
	case OP_XOR: return d ^ s;
	case OP_MOV: return s;
	default: return (uint32_t)((int32_t)d >> (s & 31)); /* OP_ARSH */
	}
}

/* be16/32/64 (to network order: a swap on this little-endian host) or
 * le16/32/64 (a truncation). */
static uint64_t vm_end(bool to_be, int32_t bits, uint64_t d)
{
	switch (bits) {
	case 16: return to_be ? __builtin_bswap16((uint16_t)d) : (uint16_t)d;
	case 32: return to_be ? __builtin_bswap32((uint32_t)d) : (uint32_t)d;
	default: return to_be ? __builtin_bswap64(d) : d;
	}
}

static bool vm_cond(uint8_t op, bool is32, uint64_t d, uint64_t s)
{
	if (is32) {
		d = (uint32_t)d;
		s = (uint32_t)s;
	}
	int64_t sd = is32 ? (int32_t)d : (int64_t)d, ss = is32 ? (int32_t)s : (int64_t)s;
	switch (op) {
	case OP_JA: return true;
	case OP_JEQ: return d == s;
	case OP_JGT: return d > s;
	case OP_JGE: return d >= s;
	case OP_JSET: return (d & s) != 0;
	case OP_JNE: return d != s;
	case OP_JSGT: return sd > ss;
	case OP_JSGE: return sd >= ss;
	case OP_JLT: return d < s;
	case OP_JLE: return d <= s;
	case OP_JSLT: return sd < ss;
	default: return sd <= ss; /* OP_JSLE */
	}
}

static uint64_t vm_load(uintptr_t a, unsigned size)
{
	switch (size) {
	case 1: return *(const uint8_t *)a;
	case 2: { uint16_t v; memcpy(&v, (const void *)a, 2); return v; }
	case 4: { uint32_t v; memcpy(&v, (const void *)a, 4); return v; }
	default: { uint64_t v; memcpy(&v, (const void *)a, 8); return v; }
	}
}

static void vm_store(uintptr_t a, unsigned size, uint64_t v)
{
	switch (size) {
	case 1: *(uint8_t *)a = (uint8_t)v; break;
	case 2: { uint16_t x = (uint16_t)v; memcpy((void *)a, &x, 2); break; }
	case 4: { uint32_t x = (uint32_t)v; memcpy((void *)a, &x, 4); break; }
	default: memcpy((void *)a, &v, 8); break;
	}
}

/* An atomic operation (STX | ATOMIC) of 4 or 8 bytes at a. */
#define VM_ATOMIC(T, a, imm, r, src)                                                     \
	do {                                                                             \
		T *p_ = (T *)(a), v_ = (T)(r)[src], old_;                                \
		switch ((imm) & ~VM_FETCH) {                                             \
		case OP_ADD: old_ = __atomic_fetch_add(p_, v_, __ATOMIC_SEQ_CST); break; \
		case OP_OR: old_ = __atomic_fetch_or(p_, v_, __ATOMIC_SEQ_CST); break;   \
		case OP_AND: old_ = __atomic_fetch_and(p_, v_, __ATOMIC_SEQ_CST); break; \
		case OP_XOR: old_ = __atomic_fetch_xor(p_, v_, __ATOMIC_SEQ_CST); break; \
		case VM_XCHG & ~VM_FETCH:                                                \
			old_ = __atomic_exchange_n(p_, v_, __ATOMIC_SEQ_CST);            \
			break;                                                           \
		case VM_CMPXCHG & ~VM_FETCH: {                                           \
			T e_ = (T)(r)[0];                                                \
			__atomic_compare_exchange_n(p_, &e_, v_, false, __ATOMIC_SEQ_CST, \
						    __ATOMIC_SEQ_CST);                   \
			(r)[0] = e_;                                                     \
			lane |= 1u;                                                      \
			goto atomic_done;                                                \
		}                                                                        \
		default: return vm_err(err, errlen, -EINVAL, "insn %ld: atomic op 0x%x", pc, \
				       (unsigned)(imm));                                 \
		}                                                                        \
		if ((imm) & VM_FETCH)                                                    \
			(r)[src] = old_;                                                 \
		lane |= 1u << (src);                                                     \
	} while (0)

/* Whether d -> v moves a pointer within one piece of memory (the stack or
 * one of mem[]; its end included). */
static bool vm_addr_op(uint64_t d, uint64_t v, uintptr_t stack_lo, uintptr_t stack_hi,
		       const struct alu_vm_mem *mem, unsigned n_mem)
{
	if (d >= stack_lo && d <= stack_hi)
		return v >= stack_lo && v <= stack_hi;
	for (unsigned i = 0; i < n_mem; i++)
		if (d >= mem[i].lo && d <= mem[i].hi)
			return v >= mem[i].lo && v <= mem[i].hi;
	return false;
}

int alu_vm_run(const struct alu_vm *vm, long entry, const uint64_t args[5],
	       const struct alu_vm_mem *mem, unsigned n_mem, uint64_t *ret,
	       struct alu_vm_count *cnt, char *err, size_t errlen)
{
	_Alignas(16) uint8_t stack[VM_FRAMES * VM_FRAME_SIZE];
	const uintptr_t stack_lo = (uintptr_t)stack, stack_hi = stack_lo + sizeof(stack);
	struct {
		uint64_t saved[4];   /* r6..r9 of the caller */
		long ret_pc;
		uint32_t lane;       /* the caller's lane bits */
	} frames[VM_FRAMES];
	unsigned depth = 0;
	uint32_t lane = 0;           /* bit i: r[i] holds data as loaded (vm_lane_op) */
	uint64_t r[11] = { 0 };
	for (int i = 0; i < 5; i++)
		r[i + 1] = args[i];
	r[10] = stack_hi;
	long pc = entry;
	uint64_t budget = ALU_VM_MAX_INSNS;
	for (;;) {
		if (pc < 0 || (size_t)pc >= vm->n_insns)
			return vm_err(err, errlen, -EFAULT, "jump out of the code (insn %ld)", pc);
		if (budget-- == 0)
			return vm_err(err, errlen, -E2BIG, "more than %u instructions",
				      ALU_VM_MAX_INSNS);
		const struct vm_insn *in = &vm->code[pc];
		const uint8_t cls = in->code & 0x07, op = in->code & 0xf0;
		const unsigned dst = in->regs & 0x0f, src = in->regs >> 4;
		if (dst > 10 || src > 10)
			return vm_err(err, errlen, -EINVAL, "insn %ld: register %u", pc,
				      dst > 10 ? dst : src);
		cnt->insns++;
		switch (cls) {
		case VM_ALU:
		case VM_ALU64: {
			if (op == OP_END) {
				if (cls != VM_ALU)
					return vm_err(err, errlen, -EINVAL, "insn %ld: bswap (v4)", pc);
				cnt->swaps++;
				r[dst] = vm_end(in->code & VM_SRC_X, in->imm, r[dst]);
				break;
			}
			if (op > OP_ARSH || (op == OP_MOV && in->off != 0) ||
			    ((op == OP_DIV || op == OP_MOD) && in->off != 0))
				return vm_err(err, errlen, -EINVAL, "insn %ld: ALU op 0x%02x", pc,
					      in->code);
			const bool x = in->code & VM_SRC_X;
			uint64_t s = x ? r[src] : (uint64_t)(int64_t)in->imm;
			bool to_lane = false;
			if (op == OP_MOV) {
				cnt->moves++;
				to_lane = x && (lane >> src & 1);
			} else if (cls == VM_ALU64 && (op == OP_ADD || op == OP_SUB) &&
				   vm_addr_op(r[dst], vm_alu64(op, r[dst], s), stack_lo, stack_hi,
					      mem, n_mem)) {
				cnt->addr++;
			} else if (vm_lane_op(op, cls, x, in->imm, lane >> dst & 1,
					      x && (lane >> src & 1), r[dst], s)) {
				cnt->lanes++;
				to_lane = true;
			} else {
				cnt->alu++;
				if (cnt->alu_at != NULL)
					__atomic_fetch_add(&cnt->alu_at[pc], 1, __ATOMIC_RELAXED);
			}
			lane = to_lane ? lane | 1u << dst : lane & ~(1u << dst);
			r[dst] = cls == VM_ALU64 ? vm_alu64(op, r[dst], s)
						 : vm_alu32(op, (uint32_t)r[dst], (uint32_t)s);
			break;
		}
		case VM_LDX: {
			static const unsigned sizes[4] = { 4, 2, 1, 8 };
			if ((in->code & 0xe0) != VM_MODE_MEM)
				return vm_err(err, errlen, -EINVAL, "insn %ld: load 0x%02x", pc,
					      in->code);
			cnt->loads++;
			r[dst] = vm_load((uintptr_t)(r[src] + (uint64_t)(int64_t)in->off),
					 sizes[(in->code >> 3) & 3]);
			lane |= 1u << dst;
			break;
		}
		case VM_ST:
		case VM_STX: {
			static const unsigned sizes[4] = { 4, 2, 1, 8 };
			const unsigned size = sizes[(in->code >> 3) & 3];
			const uintptr_t a = (uintptr_t)(r[dst] + (uint64_t)(int64_t)in->off);
			cnt->stores++;
			if ((in->code & 0xe0) == VM_MODE_MEM) {
				vm_store(a, size, cls == VM_ST ? (uint64_t)(int64_t)in->imm : r[src]);
				break;
			}
			if (cls != VM_STX || (in->code & 0xe0) != VM_MODE_ATOM || size < 4)
				return vm_err(err, errlen, -EINVAL, "insn %ld: store 0x%02x", pc,
					      in->code);
			if (size == 8)
				VM_ATOMIC(uint64_t, a, in->imm, r, src);
			else
				VM_ATOMIC(uint32_t, a, in->imm, r, src);
atomic_done:
			break;
		}
		case VM_LD:
			if (in->code != (VM_LD | 0x18) || src != 0 || (size_t)pc + 1 >= vm->n_insns)
				return vm_err(err, errlen, -EINVAL, "insn %ld: ld 0x%02x (src %u)", pc,
					      in->code, src);
			cnt->loads++;
			r[dst] = (uint64_t)(uint32_t)in[0].imm | (uint64_t)(uint32_t)in[1].imm << 32;
			lane &= ~(1u << dst);
			pc += 2;
			continue;
		case VM_JMP:
		case VM_JMP32:
			if (op == OP_CALL && cls == VM_JMP) {
				const struct vm_call *c = &vm->calls[pc];
				cnt->calls++;
				if (c->native != NULL) {
					alu_vm_call_pc = pc;
					r[0] = c->native(r[1], r[2], r[3], r[4], r[5]);
					lane = (lane & ~0x3fu) | 1u; /* r0 data; r1-r5 clobbered */
					break;
				}
				long target = c->target >= 0 ? c->target
					      : src == 1   ? pc + in->imm + 1
							   : -1;
				if (target < 0)
					return vm_err(err, errlen, -EINVAL,
						      "insn %ld: call of helper %d", pc, in->imm);
				if (depth + 1 >= VM_FRAMES)
					return vm_err(err, errlen, -E2BIG,
						      "calls nested deeper than %u frames", VM_FRAMES);
				memcpy(frames[depth].saved, &r[6], sizeof(frames[depth].saved));
				frames[depth].ret_pc = pc + 1;
				frames[depth].lane = lane;
				depth++;
				r[10] = stack_hi - (uintptr_t)depth * VM_FRAME_SIZE;
				pc = target;
				continue;
			}
			if (op == OP_EXIT && cls == VM_JMP) {
				cnt->calls++;
				if (depth == 0) {
					*ret = r[0];
					return 0;
				}
				depth--;
				memcpy(&r[6], frames[depth].saved, sizeof(frames[depth].saved));
				lane = (lane & 1u) | (frames[depth].lane & 0x3c0u);
				r[10] = stack_hi - (uintptr_t)depth * VM_FRAME_SIZE;
				pc = frames[depth].ret_pc;
				continue;
			}
			if (op > OP_JSLE || op == OP_CALL || op == OP_EXIT || (op == OP_JA && cls != VM_JMP))
				return vm_err(err, errlen, -EINVAL, "insn %ld: jump 0x%02x", pc,
					      in->code);
			cnt->jumps++;
			if (vm_cond(op, cls == VM_JMP32, r[dst],
				    (in->code & VM_SRC_X) ? r[src] : (uint64_t)(int64_t)in->imm))
				pc += in->off;
			break;
		}
		pc++;
	}
}

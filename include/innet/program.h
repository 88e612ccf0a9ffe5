/*
 * innet/program.h — the program API: declaring a data-plane program and its
 * control side. The handler's own API (packet, registers, tables, verdicts)
 * is innet/dp.h, which this header includes; see it for the contract that
 * splits every program into a data-path source (NAME_dp.c: handlers, checked
 * by the build for both targets) and a control source (NAME.c: setup, init,
 * settings, control commands; ordinary C).
 *
 * A data-plane program is a pure function over one packet and the state the
 * program declared up front (register arrays, exact-match tables, multicast
 * groups, timers) and its config block. The runtime allocates that state,
 * calls the handler once per packet, and carries out the verdict the handler
 * returns. The helpers count what a packet uses (register operations, table
 * lookups, ALU operations, emitted packets), which the resource model
 * (innet/resources.h) compares against Tofino, Trio and eBPF profiles.
 *
 * Two execution models, chosen per program (struct innet_program.model):
 *
 *   INNET_MODEL_PISA  match-action pipeline (Tofino/RMT). The handler may only
 *                     modify and route the packet in hand. At most
 *                     pisa_reg_ops_per_pass register operations per pass; to do
 *                     more, return INNET_RECIRCULATE. innet_emit, timers and
 *                     data-plane table writes are refused (the packet is
 *                     dropped with INNET_DROP_MODEL_VIOLATION).
 *   INNET_MODEL_TRIO  run-to-completion threads (Juniper Trio). State is shared
 *                     across worker threads through atomic read-modify-write
 *                     (the RMW engine); the handler may emit new packets, write
 *                     tables and arm timers whose callbacks run on the timer
 *                     thread (Trio's timer threads).
 *
 * Two targets run the same data-path source (docs/xdp.md): the user-space
 * engine (worker threads over UDP sockets or raw AF_PACKET ports) and XDP
 * (the program compiled to eBPF, run by the kernel on network devices), with
 * one state that both map. What XDP cannot finish (emit, timers, frames too
 * big for one XDP buffer, packets for the CPU) is handed to the user-space
 * engine on the same state, and counted.
 *
 * Concurrency: unless a program sets INNET_PROG_SERIAL, its packets are
 * handled by several worker threads (or CPUs, on XDP) at once; packets of one
 * flow (same source address and port, same destination port) always reach
 * the same worker, in order. Register helpers are atomic per element; tables
 * are safe for concurrent lookups and writes. A SERIAL program's packets are
 * all handled by one worker thread (its timers still run on the timer
 * thread). On the XDP target, where the kernel runs the handler on several
 * CPUs and the user-space engine runs it for what is passed up, a SERIAL
 * program's handler runs under a lock word both take (docs/xdp.md, "SERIAL
 * programs"): still one packet at a time.
 */
#ifndef INNET_PROGRAM_H
#define INNET_PROGRAM_H

#include "innet/dp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Declaring a program.                                                       */

struct innet_decl;   /* collects declarations during setup (opaque) */
struct innet_args;   /* the program's settings from the topology (opaque) */

/* Declare register array `id` (ids are dense, in order from 0). width is the
 * element size in bytes; 1, 2, 4, 8 allow atomic RMW, others are blobs.
 * Returns 0 or -errno (and the setup fails with a message). */
int innet_decl_reg(struct innet_decl *d, unsigned id, const char *name, uint32_t width, uint32_t count);
/* Declare exact-match table `id` (dense ids from 0). */
int innet_decl_table(struct innet_decl *d, unsigned id, const char *name, uint32_t key_size,
		     uint32_t value_size, uint32_t capacity);
/* Declare the number of multicast groups (ids 0..n-1). */
int innet_decl_groups(struct innet_decl *d, uint32_t n);
/* Declare the number of one-shot timers (ids 0..n-1; Trio only). */
int innet_decl_timers(struct innet_decl *d, uint32_t n);
/* Declare the program's config block: size bytes of plain data (no
 * pointers) that setup fills in and handlers read with innet_conf(ctx),
 * read-only. Returns the zeroed block (valid for the instance's lifetime;
 * the runtime owns it), or NULL when size is 0 or above INNET_CONF_MAX (the
 * setup then fails). On the XDP target the block is a BPF array map that the
 * eBPF program and the user-space engine both read. */
void *innet_decl_conf(struct innet_decl *d, uint32_t size);
/* Give the instance a data path of its own, built outside innet rather than
 * compiled into it — a program of one's own built against the installed
 * headers (innet-dp.mk: `pkg-config --variable=dpmk innet`, docs/programs.md
 * "Programs of your own"), or a P4 program's, built at run time: the
 * handler and the timer callback the user-space engine calls instead of the
 * program's, and the eBPF object the XDP target loads for it — NAME_dp.c
 * compiled with the template the build uses (src/targets/xdp/prog.bpf.c),
 * read here; NULL: none, the instance's packets go to the user-space engine
 * on XDP. The code behind the pointers must stay loaded while the instance
 * lives (its priv can own it: freed after the last packet). From setup,
 * before innet_decl_timers; 0, or -EINVAL with the setup failed and a
 * message. */
int innet_decl_datapath(struct innet_decl *d,
			enum innet_action (*handle)(struct innet_ctx *ctx, struct innet_pkt *pkt),
			void (*on_timer)(struct innet_ctx *ctx, uint32_t timer, uint64_t arg),
			const char *bpf_object_path);
/* Set the program's control-side private state, passed to init, on_cpu and
 * on_ctl (never to handlers) and freed with free() when the program is
 * destroyed. */
void innet_decl_priv(struct innet_decl *d, void *priv);
/* The same, freed with priv_free(priv) instead (state of several
 * allocations, or shared between instances with a reference count). */
void innet_decl_priv_with(struct innet_decl *d, void *priv, void (*priv_free)(void *priv));
/* The switch the program is being declared on: its fabric node id and its
 * number of ports (to check settings that name ports during setup), and a
 * port's own IPv4 address (host order; 0 for a raw port or no such port:
 * say, for the config block of a program that sends itself datagrams). */
uint16_t innet_decl_node_id(const struct innet_decl *d);
uint32_t innet_decl_n_ports(const struct innet_decl *d);
uint32_t innet_decl_port_ip(const struct innet_decl *d, uint32_t port);
/* The UDP ports the instance binds (all of them, ranges expanded, in the
 * order configured), *n set to their count (0 for a raw-only instance). Valid
 * for the instance's lifetime: a program may keep the pointer (for example a
 * load balancer's pool of source ports for out.src_udp). */
const uint16_t *innet_decl_udp(const struct innet_decl *d, uint32_t *n);
/* Fail the setup with a message (printf-style); returns -EINVAL. */
int innet_decl_error(struct innet_decl *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Settings: look up key; if absent, *out = def and 0. Wrong type or out of
 * [min, max] is an error (-EINVAL, with a message recorded for the user).
 * Every key a program does not ask for is reported as unknown. */
int innet_args_u64(struct innet_args *a, const char *key, uint64_t def, uint64_t min,
		   uint64_t max, uint64_t *out);
int innet_args_bool(struct innet_args *a, const char *key, bool def, bool *out);
/* *out points into the args (valid during setup) or is def. */
int innet_args_str(struct innet_args *a, const char *key, const char *def, const char **out);
/* Array of unsigned integers: up to max entries into out, count in *n. */
int innet_args_u64_array(struct innet_args *a, const char *key, uint64_t *out, uint32_t max,
			 uint32_t *n);
/* A structured setting as a jansson value (borrowed; valid during setup), or
 * NULL if absent. For settings the typed getters cannot express. */
struct json_t;
struct json_t *innet_args_json(struct innet_args *a, const char *key);

struct innet_res_usage;   /* innet/resources.h */

struct innet_program {
	const char *name;             /* registry name, e.g. "forward" */
	const char *summary;          /* one line for --list-programs */
	enum innet_model model;
	uint32_t flags;               /* INNET_PROG_* */
	/* PISA: register operations allowed per pass (0 = profile default, 48). */
	uint32_t pisa_reg_ops_per_pass;
	/* Bytes of header the parser extracts (checked against the PHV / Trio
	 * local memory by the resource model). */
	uint32_t parse_bytes;
	/* Names of the program's drop reasons; reason INNET_DROP_PROGRAM + i. */
	const char *const *drop_reasons;
	uint32_t n_drop_reasons;

	/* Declare state and read settings. Runs once, before any packet. */
	int (*setup)(struct innet_decl *d, struct innet_args *args);
	/* Initialise state (tables, registers, groups) after allocation; may be
	 * NULL. Control-plane context: may allocate. On failure, return -errno
	 * after innet_cp_init_error() to say why (innet/switch.h). */
	int (*init)(struct innet_cp *cp, void *priv);
	/* The per-packet handler: innet_dp_NAME_handle from NAME_dp.c
	 * (INNET_DATAPATH; restricted C). */
	enum innet_action (*handle)(struct innet_ctx *ctx, struct innet_pkt *pkt);
	/* Trio: a timer fired (timer thread; restricted C): innet_dp_NAME_timer. */
	void (*on_timer)(struct innet_ctx *ctx, uint32_t timer, uint64_t arg);
	/* A packet handed to the control plane (INNET_TO_CPU), on the control
	 * thread: ordinary C, may allocate and use the innet_cp_* calls. What
	 * it refuses it may count under one of the program's drop reasons
	 * (innet_cp_count_drop, innet/switch.h). */
	void (*on_cpu)(struct innet_cp *cp, void *priv, const struct innet_pkt *pkt);
	/* A program-specific control command, `innet ctl prog INSTANCE WORD...`
	 * (control thread, ordinary C; may be NULL). argv holds the words after
	 * the instance name. Fill reply (a JSON object, struct json_t from
	 * jansson) and return 0, or write a message to err and return -errno
	 * (-EINVAL for a command or an argument it does not take). */
	int (*on_ctl)(struct innet_cp *cp, void *priv, int argc, char **argv,
		      struct json_t *reply, char *err, size_t errlen);
	/* The resource model's view (innet/resources.h) when the state the
	 * program declared is not what a hardware target would hold — a P4
	 * program translated onto innet's registers and tables reports its own
	 * tables, registers and table dependency chain. innet_res_usage_from_prog
	 * calls it last, on a usage filled from the declarations, the statistics
	 * and the eBPF column, which it may change. Control thread; may be NULL.
	 * 0 or -errno. */
	int (*resources)(struct innet_cp *cp, void *priv, struct innet_res_usage *u);
};

#define INNET_PROG_SERIAL 0x1u  /* all packets on one worker thread */

/*
 * The registry of programs (src/engine/registry.c). A program registers
 * itself, as DPDK's drivers do: its control source ends with
 *
 *     INNET_PROGRAM_REGISTER(innet_prog_NAME)
 *
 * a constructor that runs when the library (or the program that links the
 * object) is loaded, so the runtime knows no list of programs. A program
 * of an application's own may register the same way, or be given to
 * innet_switch_create directly (struct innet_prog_conf.program).
 */
/* 0; -EEXIST (a program of that name is registered), -ENOSPC (more than
 * INNET_MAX_PROGRAMS), -EINVAL (no name or handler). */
int innet_program_register(const struct innet_program *prog);
/* What INNET_PROGRAM_REGISTER calls: innet_program_register, and a refusal
 * (a second program under a taken name, too many, no name) is kept, since a
 * constructor has no caller to tell: innet_switch_create then fails, naming
 * it, and innet_program_registration_error says it. */
void innet_program_register_ctor(const struct innet_program *prog);
/* 0 if every constructor's registration went in; else -EEXIST, -ENOSPC or
 * -EINVAL (the first refusal's) with err saying which program and why. */
int innet_program_registration_error(char *err, size_t errlen);
#define INNET_MAX_PROGRAMS 64u
#define INNET_PROGRAM_REGISTER(prog)                                              \
	__attribute__((constructor)) static void innet__register_##prog(void)    \
	{                                                                         \
		innet_program_register_ctor(&prog);                               \
	}
/* The registered program called name, or NULL. */
const struct innet_program *innet_program_find(const char *name);
/* NULL-terminated list of the registered programs, sorted by name. */
const struct innet_program *const *innet_program_list(void);

#ifdef __cplusplus
}
#endif
#endif /* INNET_PROGRAM_H */

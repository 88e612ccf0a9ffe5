/*
 * load.c — load one eBPF object of a data path into the kernel (the
 * verifier's half of the contract: bounded loops, the stack, every access
 * checked) with its maps at their placeholder sizes: the contract tests'
 * fixtures and, in tests/integration/contract.sh, every shipped program's
 * object. Prints "loaded" or "the verifier refused program NAME: " and the
 * verifier's last words (or libbpf's, when the object cannot even be
 * opened); exit 0 / 1.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "innet/xdp_abi.h"

static char vlog[1 << 20];
static char lbuf[8192];   /* what libbpf said (warnings and errors) */
static size_t llen;

static int on_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static int on_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || llen >= sizeof(lbuf) - 1)
		return 0;
	int n = vsnprintf(lbuf + llen, sizeof(lbuf) - llen, fmt, ap);
	if (n > 0)
		llen = llen + (size_t)n < sizeof(lbuf) ? llen + (size_t)n : sizeof(lbuf) - 1;
	return 0;
}

/* The program's name: the object's file name without ".bpf.o". */
static const char *prog_name(const char *path, char *out, size_t len)
{
	const char *b = strrchr(path, '/');
	snprintf(out, len, "%s", b ? b + 1 : path);
	char *dot = strstr(out, ".bpf.o");
	if (dot != NULL)
		*dot = '\0';
	return out;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: load OBJECT.bpf.o\n");
		return 2;
	}
	char name[256];
	prog_name(argv[1], name, sizeof(name));
	libbpf_set_print(on_libbpf);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (obj == NULL) {
		printf("cannot open the eBPF object of program %s (%s): %s\n", name, argv[1],
		       llen ? lbuf : "libbpf said nothing");
		return 1;
	}
	/* A switch of one port, the program on one UDP port: enough that the
	 * verifier cannot prove the handler unreachable. */
	struct innet_xdp_layout L;
	memset(&L, 0, sizeof(L));
	L.n_ports = 1;
	L.n_udp = 1;
	L.first_udp = 9;
	L.reg_ops_budget = UINT32_MAX;
	L.model = 1;
	struct bpf_map *m;
	bpf_object__for_each_map(m, obj) {
		if (strstr(bpf_map__name(m), ".rodata.innet") == NULL)
			continue;
		size_t sz = 0;
		bpf_map__initial_value(m, &sz);
		char *v = calloc(1, sz);
		memcpy(v, &L, sizeof(L) < sz ? sizeof(L) : sz);
		bpf_map__set_initial_value(m, v, sz);
		free(v);
	}
	struct bpf_program *p = bpf_object__find_program_by_name(obj, "innet_xdp_main");
	if (p == NULL)
		return 1;
	bpf_program__set_log_buf(p, vlog, sizeof(vlog));
	bpf_program__set_log_level(p, 1);
	int rc = bpf_object__load(obj);
	if (rc != 0) {
		size_t n = strlen(vlog);
		if (n == 0)   /* refused before the verifier ran: libbpf says why */
			printf("libbpf refused program %s: %s\n", name, llen ? lbuf : "(nothing said)");
		else
			printf("the verifier refused program %s: ...%s\n", name,
			       n > 600 ? vlog + n - 600 : vlog);
		bpf_object__close(obj);
		return 1;
	}
	printf("loaded\n");
	bpf_object__close(obj);
	return 0;
}

/*
 * load.c — load one eBPF object of the data-path contract tests into the
 * kernel (the verifier's half of the contract: bounded loops, the stack,
 * every access checked) with its maps at their placeholder sizes. Prints
 * "loaded" or the verifier's last words; exit 0 / 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "targets/xdp/xdp_abi.h"

static char vlog[1 << 20];

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: load OBJECT.bpf.o\n");
		return 2;
	}
	libbpf_set_print(NULL);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (obj == NULL) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
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
		printf("refused by the verifier: ...%s\n", n > 600 ? vlog + n - 600 : vlog);
		bpf_object__close(obj);
		return 1;
	}
	printf("loaded\n");
	bpf_object__close(obj);
	return 0;
}

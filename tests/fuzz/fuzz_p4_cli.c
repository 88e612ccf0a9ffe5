/*
 * fuzz_p4_cli.c — libFuzzer target: arbitrary text through simple_switch_CLI's
 * command language as innet ctl takes it (src/p4/p4_cli.c), on a switch
 * running tests/p4/cli.json (p4c's output for tests/p4/cli.p4: a table of
 * every match kind, profiles, selectors, counters, meters, registers, a value
 * set, multicast, mirroring) on the user-space engine, with no sockets.
 *
 * Each input is split into lines; a line whose first word is a
 * simple_switch_CLI command goes through the switch's control request path
 * (innet ctl's), and between commands a frame is injected now and then, so
 * that what the commands wrote is also read by the data path. Invariants:
 * every answer is a JSON object with "ok"; nothing crashes or leaks (ASan);
 * a frame injected is answered. After each input, reset_state and the value
 * set cleared bring the switch back (each input starts from the same state).
 *
 * The program is built once (the P4 cache; the C compiler must be there):
 * INNET_FUZZ_P4_JSON names another program.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/switch.h"
#include "engine/switch_pvt.h"
#include "p4/p4_ctl.h"

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_p4_cli: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                          \
			abort();                                                           \
		}                                                                          \
	} while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct innet_switch *sw;
static struct innet_inject_result *res;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *json = getenv("INNET_FUZZ_P4_JSON");
	if (json == NULL)
		json = "tests/p4/cli.json";
	char *abs = realpath(json, NULL);
	if (abs == NULL) {
		fprintf(stderr, "fuzz_p4_cli: %s: %s (run from the source tree, or set "
			"INNET_FUZZ_P4_JSON)\n", json, strerror(errno));
		exit(1);
	}
	struct innet_switch_conf *conf = calloc(1, sizeof(*conf));
	CHECK(conf != NULL);
	snprintf(conf->name, sizeof(conf->name), "fuzz");
	conf->target = INNET_TARGET_UDP;
	conf->no_sockets = true;
	conf->n_workers = 1;
	conf->n_ports = 4;
	for (uint32_t p = 0; p < conf->n_ports; p++) {
		snprintf(conf->ports[p].name, sizeof(conf->ports[p].name), "p%u", p);
		snprintf(conf->ports[p].iface, sizeof(conf->ports[p].iface), "fuzz%u", p);
	}
	struct innet_prog_conf *pc = &conf->progs[0];
	snprintf(pc->name, sizeof(pc->name), "p4");
	pc->program = innet_program_find("p4");
	pc->raw = true;
	json_t *args = json_pack("{s:s}", "json", abs);
	pc->args_json = json_dumps(args, JSON_COMPACT);
	json_decref(args);
	free(abs);
	conf->n_progs = 1;
	char err[2048] = "";
	CHECK(pc->program != NULL);
	sw = innet_switch_create(conf, err, sizeof(err));
	free(pc->args_json);
	free(conf);
	if (sw == NULL) {
		fprintf(stderr, "fuzz_p4_cli: cannot start the switch: %s\n", err);
		exit(1);
	}
	res = malloc(sizeof(*res));
	CHECK(res != NULL);
	return 0;
}

static void request(const char *line)
{
	char *resp = innet_control_request(sw, line, strlen(line));
	CHECK(resp != NULL);
	json_t *r = json_loads(resp, 0, NULL);
	CHECK(r != NULL && json_is_object(r));
	CHECK(json_is_boolean(json_object_get(r, "ok")));
	json_decref(r);
	free(resp);
}

/* A frame built from the line's bytes: Ethernet + IPv4 + UDP, so that the
 * tables the commands filled are looked up. */
static void inject(const uint8_t *b, size_t n)
{
	uint8_t f[64] = {
		0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00,
		0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00,
		10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xd2, 0x16, 0x2e, 0x00, 0x08, 0x00, 0x00,
	};
	for (size_t i = 0; i < n && i < 8; i++)
		f[26 + i] ^= b[i];   /* addresses */
	memset(res, 0, offsetof(struct innet_inject_result, out));
	int rc = innet_switch_inject(sw, (uint16_t)(n % 4), 0, NULL, f, sizeof(f), res);
	CHECK(rc == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char line[1024];
	size_t start = 0;
	unsigned lines = 0;
	for (size_t i = 0; i <= size && lines < 64; i++) {
		if (i < size && data[i] != '\n')
			continue;
		size_t n = i - start;
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, data + start, n);
		line[n] = '\0';
		start = i + 1;
		lines++;
		if (memchr(line, '\0', n) != NULL)
			continue;
		char word[64];
		if (sscanf(line, "%63s", word) != 1)
			continue;
		if (!strcmp(word, "packet")) {
			inject((const uint8_t *)line, n);
			continue;
		}
		/* only the command language: innet's own commands (capture to a
		 * file, ...) are not this target's */
		if (!p4c_is_command(word))
			continue;
		request(line);
	}
	request("reset_state");
	request("pvs_clear extra_types");
	/* mirroring sessions outlive reset_state (as in BMv2) */
	struct p4_inst *in = innet_cp_priv(innet_switch_prog(sw, "p4"));
	CHECK(in != NULL);
	for (uint32_t s = 0; s < P4_MIRROR_SESSIONS; s++)
		if (in->mirror[s] != 0) {
			in->mirror[s] = 0;
			p4c_mirror_sync(in, s);
		}
	return 0;
}

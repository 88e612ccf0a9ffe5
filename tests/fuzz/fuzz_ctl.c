/*
 * fuzz_ctl.c — libFuzzer target for the control socket's request parser
 * and commands (src/control/ctl_request.c, ctl_state.c, ctl_monitor.c):
 * every input is one request line answered by innet_control_request on
 * a switch with the forward and counter programs.
 * Invariants: an answer always comes back, it is one line of JSON with an
 * "ok" member, and errors carry a message. Requests that would write files
 * (capture) are skipped: the fuzzer must not create files at random paths.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"

static struct innet_switch *sw;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct innet_switch_conf c;
	snprintf(c.name, sizeof(c.name), "fuzz-ctl");
	c.n_workers = 1;
	c.n_ports = 2;
	c.ports[0].ip = 0x7f003d01; /* 127.0.61.1 */
	c.ports[1].ip = 0x7f003d02;
	c.ports[1].peer_ip = 0x7f003d03;
	c.n_progs = 2;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
	c.progs[0].program = innet_program_find("forward");
	c.progs[0].udp[0] = 46950;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = (char *)"{\"map\":[1,0],\"routes\":[{\"node\":5,\"ports\":[0,1]}]}";
	snprintf(c.progs[1].name, sizeof(c.progs[1].name), "count");
	c.progs[1].program = innet_program_find("counter");
	c.progs[1].udp[0] = 46951;
	c.progs[1].n_udp = 1;
	c.progs[1].args_json = (char *)"{\"size\":16}";
	char err[256];
	sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL) {
		fprintf(stderr, "fuzz_ctl: %s\n", err);
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096 || memmem(data, size, "capture", 7) != NULL)
		return 0;
	char *resp = innet_control_request(sw, (const char *)data, size);
	if (resp == NULL)
		abort();
	if (strchr(resp, '\n') != NULL)
		abort();
	json_error_t e;
	json_t *j = json_loads(resp, 0, &e);
	if (j == NULL || !json_is_boolean(json_object_get(j, "ok")))
		abort();
	if (json_is_false(json_object_get(j, "ok")) && !json_is_string(json_object_get(j, "error")))
		abort();
	json_decref(j);
	free(resp);
	return 0;
}

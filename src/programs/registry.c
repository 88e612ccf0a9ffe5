/*
 * registry.c — the data-plane programs compiled into innet, by name.
 * A service adds its programs here (one extern line and one list entry).
 */
#include <stddef.h>
#include <string.h>

#include "innet/program.h"

extern const struct innet_program innet_prog_forward;
extern const struct innet_program innet_prog_counter;
extern const struct innet_program innet_prog_dnn_layer;
extern const struct innet_program innet_prog_paxos_coordinator;
extern const struct innet_program innet_prog_paxos_acceptor;
extern const struct innet_program innet_prog_agg;
extern const struct innet_program innet_prog_l2fwd;
extern const struct innet_program innet_prog_lb;

static const struct innet_program *const programs[] = {
	&innet_prog_forward,
	&innet_prog_counter,
	&innet_prog_dnn_layer,
	&innet_prog_paxos_coordinator,
	&innet_prog_paxos_acceptor,
	&innet_prog_agg,
	&innet_prog_l2fwd,
	&innet_prog_lb,
	NULL,
};

const struct innet_program *innet_program_find(const char *name)
{
	for (size_t i = 0; programs[i] != NULL; i++)
		if (!strcmp(programs[i]->name, name))
			return programs[i];
	return NULL;
}

const struct innet_program *const *innet_program_list(void)
{
	return programs;
}

/*
 * targets.c — the registration of every target (engine/target.h): one line
 * per target below. Adding a target is a folder src/targets/NAME/ that fills
 * a struct innet_target_ops, and its line here.
 *
 * A list rather than constructors (as the programs register themselves):
 * nothing else refers to a target's object, and a static link would leave
 * out one that registered itself from a constructor.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "engine/target.h"

extern const struct innet_target_ops innet_target_udp;   /* src/targets/user/user.c */
extern const struct innet_target_ops innet_target_xdp;   /* src/targets/xdp/xdp.c */

static const struct innet_target_ops *const targets[] = {
	&innet_target_udp,
	&innet_target_xdp,
};

#define N_TARGETS (sizeof(targets) / sizeof(targets[0]))

const struct innet_target_ops *innet_target_ops(enum innet_target t)
{
	for (size_t i = 0; i < N_TARGETS; i++)
		if (targets[i]->info.id == t)
			return targets[i];
	return NULL;
}

const struct innet_target_info *innet_target_info(enum innet_target t)
{
	const struct innet_target_ops *ops = innet_target_ops(t);
	return ops != NULL ? &ops->info : NULL;
}

const struct innet_target_info *innet_target_find(const char *name)
{
	for (size_t i = 0; i < N_TARGETS; i++)
		if (!strcmp(targets[i]->info.name, name))
			return &targets[i]->info;
	return NULL;
}

static char names[64];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_init(void)
{
	size_t off = 0;
	for (size_t i = 0; i < N_TARGETS && off < sizeof(names); i++)
		off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? "|" : "",
					targets[i]->info.name);
}

const char *innet_target_names(void)
{
	pthread_once(&names_once, names_init);
	return names;
}

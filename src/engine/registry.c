/*
 * registry.c — the data-plane programs this process knows, by name. Each
 * program registers itself from a constructor (INNET_PROGRAM_REGISTER in
 * its control source, innet/program.h): the runtime holds no list of them,
 * and a program of an application's own registers the same way.
 *
 * Registration happens before main, one constructor at a time; lookups come
 * later. The list is kept sorted by name, so listings do not depend on the
 * order in which the linker laid out the objects.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "innet/program.h"

static const struct innet_program *programs[INNET_MAX_PROGRAMS + 1];
static unsigned n_programs;

int innet_program_register(const struct innet_program *prog)
{
	if (prog == NULL || prog->name == NULL || prog->name[0] == '\0' || prog->handle == NULL)
		return -EINVAL;
	if (innet_program_find(prog->name) != NULL)
		return -EEXIST;
	if (n_programs >= INNET_MAX_PROGRAMS)
		return -ENOSPC;
	unsigned i = n_programs;
	while (i > 0 && strcmp(programs[i - 1]->name, prog->name) > 0) {
		programs[i] = programs[i - 1];
		i--;
	}
	programs[i] = prog;
	programs[++n_programs] = NULL;
	return 0;
}

const struct innet_program *innet_program_find(const char *name)
{
	for (unsigned i = 0; i < n_programs; i++)
		if (!strcmp(programs[i]->name, name))
			return programs[i];
	return NULL;
}

const struct innet_program *const *innet_program_list(void)
{
	return programs;
}

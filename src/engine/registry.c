/*
 * registry.c — the data-plane programs this process knows, by name. Each
 * program registers itself from a constructor (INNET_PROGRAM_REGISTER in
 * its control source, innet/program.h), and a program of an application's
 * own registers the same way. The shipped programs are also listed by the
 * build ($(O)/programs.c: innet__shipped_programs, from the same
 * INNET_PROGRAM_REGISTER lines) and registered on the first lookup: that
 * reference is what keeps them in a program linked statically against
 * libinnet.a, where the linker drops objects nothing refers to — constructors
 * and all. Registering the same program twice (its constructor, then the
 * list) is a no-op; another program under a taken name is -EEXIST.
 *
 * Registration happens before main, one constructor at a time; lookups come
 * later (the shipped list once, under pthread_once). A constructor's
 * registration that is refused (INNET_PROGRAM_REGISTER has no caller to
 * return to) is remembered: innet_switch_create refuses to create a switch
 * while one is, naming the program, so a duplicate name never silently
 * loses. The list is kept sorted
 * by name, so listings do not depend on the order in which the linker laid
 * out the objects.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "innet/program.h"

extern const struct innet_program *const innet__shipped_programs[];

static const struct innet_program *programs[INNET_MAX_PROGRAMS + 1];
static unsigned n_programs;
static pthread_once_t shipped_once = PTHREAD_ONCE_INIT;
/* The first refused constructor registration, and how many were refused. */
static const char *refused_name;
static int refused_rc;
static unsigned n_refused;

static const struct innet_program *find(const char *name)
{
	for (unsigned i = 0; i < n_programs; i++)
		if (!strcmp(programs[i]->name, name))
			return programs[i];
	return NULL;
}

static int add(const struct innet_program *prog)
{
	if (prog == NULL || prog->name == NULL || prog->name[0] == '\0' || prog->handle == NULL)
		return -EINVAL;
	const struct innet_program *had = find(prog->name);
	if (had == prog)
		return 0;
	if (had != NULL)
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

static void add_shipped(void)
{
	for (const struct innet_program *const *p = innet__shipped_programs; *p != NULL; p++)
		add(*p);
}

int innet_program_register(const struct innet_program *prog)
{
	pthread_once(&shipped_once, add_shipped);
	return add(prog);
}

const struct innet_program *innet_program_find(const char *name)
{
	pthread_once(&shipped_once, add_shipped);
	return find(name);
}

const struct innet_program *const *innet_program_list(void)
{
	pthread_once(&shipped_once, add_shipped);
	return programs;
}

void innet_program_register_ctor(const struct innet_program *prog)
{
	int rc = innet_program_register(prog);
	if (rc == 0)
		return;
	if (n_refused++ == 0) {
		refused_name = prog != NULL && prog->name != NULL ? prog->name : "";
		refused_rc = rc;
	}
}

int innet_program_registration_error(char *err, size_t errlen)
{
	if (n_refused == 0)
		return 0;
	const char *why = refused_rc == -EEXIST ? "another program of this process has that name"
			  : refused_rc == -ENOSPC ? "more programs than INNET_MAX_PROGRAMS"
						  : "it has no name or no handler";
	snprintf(err, errlen, "program '%s' was not registered: %s%s", refused_name, why,
		 n_refused > 1 ? " (and more refused registrations)" : "");
	return refused_rc;
}

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
 * A registration from a constructor or the list has no caller to tell: a
 * failed one is kept (the first MAX_FAILED), innet_program_registry_check
 * reports it, and innet_switch_create refuses to build a switch while there
 * is one — a name two programs use must not leave one of them silently
 * unreachable.
 *
 * Registration happens before main, one constructor at a time; lookups come
 * later (the shipped list once, under pthread_once). The list is kept sorted
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

#define MAX_FAILED 8u
static struct {
	const struct innet_program *prog;
	int err;
} failed[MAX_FAILED];
static unsigned n_failed;   /* all of them, even past MAX_FAILED */

static void note_failure(const struct innet_program *prog, int err)
{
	if (n_failed < MAX_FAILED) {
		failed[n_failed].prog = prog;
		failed[n_failed].err = err;
	}
	n_failed++;
}

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
	for (const struct innet_program *const *p = innet__shipped_programs; *p != NULL; p++) {
		int rc = add(*p);
		if (rc != 0)
			note_failure(*p, rc);
	}
}

int innet_program_register(const struct innet_program *prog)
{
	pthread_once(&shipped_once, add_shipped);
	return add(prog);
}

int innet__program_register_at_load(const struct innet_program *prog)
{
	int rc = innet_program_register(prog);
	if (rc != 0)
		note_failure(prog, rc);
	return rc;
}

int innet_program_registry_check(char *err, size_t errlen)
{
	pthread_once(&shipped_once, add_shipped);
	if (n_failed == 0)
		return 0;
	const struct innet_program *prog = failed[0].prog;
	const char *name = prog != NULL && prog->name != NULL ? prog->name : "(no name)";
	const char *more = n_failed > 1 ? " (and more)" : "";
	switch (failed[0].err) {
	case -EEXIST:
		snprintf(err, errlen, "program '%s' (\"%s\") was not registered: another program has "
			 "that name%s", name, prog->summary ? prog->summary : "", more);
		break;
	case -ENOSPC:
		snprintf(err, errlen, "program '%s' was not registered: more than %u programs%s", name,
			 INNET_MAX_PROGRAMS, more);
		break;
	default:
		snprintf(err, errlen, "program '%s' was not registered: it has no name or no handler%s",
			 name, more);
		break;
	}
	return failed[0].err;
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

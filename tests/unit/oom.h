/*
 * oom.h — allocation failure injection for unit tests (include it once, in
 * the test's own file, before anything allocates).
 *
 * Once oom_countdown reaches 0, every malloc, calloc and realloc fails
 * (glibc routes its own and jansson's allocations through these), and
 * oom_live counts blocks allocated minus blocks freed, so that a failure
 * path that leaks shows up without valgrind. Sanitizers and valgrind bring
 * their own allocator: there OOM_INJECTION is 0 and tests skip their OOM
 * cases.
 */
#ifndef INNET_TEST_OOM_H
#define INNET_TEST_OOM_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OOM_INJECTION 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
	__has_feature(memory_sanitizer)
#define OOM_INJECTION 0
#endif
#endif
#ifndef OOM_INJECTION
#define OOM_INJECTION 1
#endif

static long oom_countdown = -1;   /* allocations left before failing; -1 = off */
static long oom_live;             /* allocated minus freed */

#if OOM_INJECTION
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static bool oom_fail(void)
{
	if (oom_countdown < 0)
		return false;
	if (oom_countdown == 0) {
		errno = ENOMEM;
		return true;
	}
	oom_countdown--;
	return false;
}

void *malloc(size_t n)
{
	void *p = oom_fail() ? NULL : __libc_malloc(n);
	oom_live += p != NULL;
	return p;
}

void *calloc(size_t n, size_t size)
{
	void *p = oom_fail() ? NULL : __libc_calloc(n, size);
	oom_live += p != NULL;
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p = oom_fail() ? NULL : __libc_realloc(old, n);
	oom_live += old == NULL && p != NULL;
	return p;
}

void free(void *p)
{
	oom_live -= p != NULL;
	__libc_free(p);
}
#endif

#endif /* INNET_TEST_OOM_H */

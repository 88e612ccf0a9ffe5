/*
 * clock.c — innet_now_ns (innet/clock.h).
 */
#include <time.h>

#include "innet/clock.h"

uint64_t innet_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

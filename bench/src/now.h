/*
 * bench/src/now.h — the benchmark tools' one clock: CLOCK_MONOTONIC in
 * seconds. The tools are stand-alone programs that must not share innet's
 * code (the raw relay is a baseline), so they do not link libinnet's
 * innet_now_ns (include/innet/clock.h); they share this instead.
 */
#ifndef INNET_BENCH_NOW_H
#define INNET_BENCH_NOW_H

#include <time.h>

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* INNET_BENCH_NOW_H */

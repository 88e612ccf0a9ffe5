/*
 * innet/clock.h — the one monotonic clock of the engine, its timers and the
 * host libraries (src/engine/clock.c; a file of its own so that the
 * stand-alone host libraries, libinnet-agg.so and libinnet-mpi.so, link it
 * without the engine).
 */
#ifndef INNET_CLOCK_H
#define INNET_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t innet_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* INNET_CLOCK_H */

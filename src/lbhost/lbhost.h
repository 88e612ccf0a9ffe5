/*
 * lbhost.h — the host side of the load-balancing service (docs/lb.md):
 * the processing units' stand-in DNS service, the open-loop load generator
 * and the agent that reports a unit's load to the switch (include/innet/lb.h).
 * `innet lb backend|load|agent` (src/cli/cmd_lb.c) are thin wrappers.
 *
 * Every entry point runs until its duration ends or *stop becomes non-zero
 * (a signal handler sets it), then returns 0 or -errno with the reason in
 * err. None of them calls exit().
 */
#ifndef INNET_LBHOST_H
#define INNET_LBHOST_H

#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "innet/lb.h"
#include "innet/hist.h"
#include "innet/switch.h"

#define LBH_MAX_THREADS  16u
#define LBH_MAX_QNAMES   16u
#define LBH_MAX_ANSWERS  8u    /* distinct A-record addresses a client tells apart */
#define LBH_AGENT_MAX_BURST 15u

/* ---------------------------------------------------------------------- */
/* backend: a DNS service with a configurable capacity                      */

struct lbh_backend_cfg {
	struct sockaddr_in bind;      /* where it listens */
	uint32_t service_us;          /* service time per request; 0 = fast mode */
	uint32_t busy_service_us;     /* service time while busy_file exists (0: unused) */
	const char *busy_file;        /* NULL or a path polled every 100 ms */
	uint32_t queue;               /* requests waiting at most (slow mode); more are dropped */
	uint32_t threads;             /* fast mode: receive threads (SO_REUSEPORT) */
	const char *zone;             /* lower-case, no final dot */
	uint32_t answer;              /* A record for names in the zone (host order) */
	uint32_t ttl;                 /* its TTL */
	double duration_s;            /* 0 = until *stop */
};

struct lbh_backend_stats {
	uint64_t rx;                  /* datagrams received */
	uint64_t answered;            /* NOERROR answers (with or without an A record) */
	uint64_t nxdomain;            /* names outside the zone */
	uint64_t formerr;             /* malformed queries answered FORMERR */
	uint64_t notimp;              /* opcodes other than QUERY */
	uint64_t drop_malformed;      /* under 12 bytes, or a response: dropped */
	uint64_t drop_queue_full;     /* the bounded queue was full: dropped */
	uint64_t tx_errors;           /* sendto failures */
	uint64_t max_queue;           /* deepest queue seen */
};

void lbh_backend_defaults(struct lbh_backend_cfg *c);
/* The answer to one request datagram req (len bytes, at most
 * LBH_DNS_MSG_MAX: what a receive of that size keeps) into out
 * (LBH_DNS_MSG_MAX bytes): its length, or 0 when it is dropped. Each
 * datagram counts in exactly one of st's answered, nxdomain, formerr,
 * notimp, drop_malformed. */
int lbh_backend_answer(const struct lbh_backend_cfg *c, const uint8_t *req, size_t len, uint8_t *out,
		       struct lbh_backend_stats *st);
int lbh_backend_run(const struct lbh_backend_cfg *c, volatile sig_atomic_t *stop,
		    struct lbh_backend_stats *st, FILE *log, char *err, size_t errlen);

/* ---------------------------------------------------------------------- */
/* load: open-loop DNS client                                               */

struct lbh_load_cfg {
	struct sockaddr_in target;    /* the VIP (or a server) */
	uint32_t bind_ip;             /* source address (host order; 0 = any) */
	double rate;                  /* queries per second, all threads together */
	double duration_s;            /* sending time, measured */
	double warmup_s;              /* sending time before, not measured */
	uint32_t threads;             /* sender/receiver threads */
	uint32_t flows;               /* sockets (UDP flows) per thread */
	uint32_t flow_ms;             /* a flow's lifetime before its socket is replaced; 0 = forever */
	uint32_t timeout_ms;          /* a reply later than this is lost */
	uint32_t report_ms;           /* 0, or print a progress line every report_ms on log */
	uint32_t nqnames;             /* names, cycled */
	const char *qnames[LBH_MAX_QNAMES];
};

struct lbh_load_result {
	uint64_t sent;                /* queries sent */
	uint64_t received;            /* replies matched in time */
	uint64_t lost;                /* no reply within timeout_ms */
	uint64_t late;                /* replies after their timeout (also in lost) */
	uint64_t unmatched;           /* replies matching no query (bad id, malformed) */
	uint64_t send_errors;         /* sendto failures (also in lost) */
	uint64_t early_closes;        /* retired flow sockets closed before timeout_ms (too many open) */
	uint64_t rcode[16];           /* replies per rcode */
	uint64_t max_lag_ns;          /* how far sending fell behind its schedule */
	double elapsed_s;             /* sending time actually spent */
	uint32_t nanswers;            /* distinct A addresses seen (up to LBH_MAX_ANSWERS) */
	uint32_t answer_addr[LBH_MAX_ANSWERS];  /* host order */
	uint64_t answer_count[LBH_MAX_ANSWERS];
	uint64_t answer_other;        /* replies with another / no A record */
	struct innet_hist hist;         /* latency from the scheduled send time, ns */
};

void lbh_load_defaults(struct lbh_load_cfg *c);
/* Runs the load; r->hist is initialised here and must be freed with
 * lbh_load_result_fini (also after a failure). */
int lbh_load_run(const struct lbh_load_cfg *c, volatile sig_atomic_t *stop, struct lbh_load_result *r,
		 FILE *log, char *err, size_t errlen);
void lbh_load_result_fini(struct lbh_load_result *r);
void lbh_load_print(const struct lbh_load_cfg *c, const struct lbh_load_result *r, bool json, FILE *f);

/* ---------------------------------------------------------------------- */
/* agent: probes one unit, reports to the switch                            */

struct lbh_agent_cfg {
	struct sockaddr_in sw;        /* the switch's report address */
	struct sockaddr_in probe;     /* the unit's service address */
	uint32_t bind_ip;             /* source address (host order; 0 = any) */
	uint16_t server;              /* server id */
	uint16_t unit;                /* unit id */
	uint8_t kind;                 /* enum innet_lb_kind */
	uint32_t interval_ms;         /* probe period */
	uint32_t heartbeat_ms;        /* report at least this often */
	uint32_t busy_us;             /* EWMA latency above: busy */
	uint32_t idle_us;             /* EWMA latency below: not busy (< busy_us) */
	uint32_t probe_timeout_ms;    /* a probe unanswered this long counts as this latency */
	double alpha;                 /* EWMA weight of a new sample (0..1] */
	uint32_t window;              /* samples in the windowed p99 */
	uint32_t burst;               /* probes per interval; their median is the sample */
	int pid;                      /* 0, or the unit's process: its CPU use is measured */
	uint32_t busy_cpu_pct;        /* with pid: busy also when CPU use is above this */
	const char *qname;            /* name the probes ask for */
	double duration_s;            /* 0 = until *stop */
	struct innet_lb_key key;      /* the shared report key */
};

struct lbh_agent_stats {
	uint64_t probes;              /* probes sent (burst x intervals) */
	uint64_t probe_timeouts;      /* unanswered in time */
	uint64_t reports;             /* reports sent (all) */
	uint64_t threshold_reports;   /* sent because the state or level changed */
	uint64_t heartbeats;          /* sent because the heartbeat came due */
	uint64_t send_errors;         /* sendto failures */
	uint64_t busy_transitions;    /* times the busy bit flipped */
	uint64_t last_seq;            /* last sequence number sent */
	uint32_t ewma_us;             /* latency estimate at the end */
	uint32_t p99_us;              /* windowed p99 at the end */
	bool busy;                    /* the bit at the end */
};

void lbh_agent_defaults(struct lbh_agent_cfg *c);
int lbh_agent_run(const struct lbh_agent_cfg *c, volatile sig_atomic_t *stop, struct lbh_agent_stats *st,
		  FILE *log, char *err, size_t errlen);

/* The agent's decision, apart for the unit tests: feed latency samples,
 * get the busy bit (with hysteresis) and the graded level, a utilisation
 * estimate: 255 * EWMA of (1 - idle latency / sample), or 255 * CPU share
 * if higher. */
struct lbh_agent_model {
	double ewma_us;               /* < 0 before the first sample */
	double base_us;               /* idle latency: lowest sample, slowly forgotten (< 0: none) */
	double util;                  /* EWMA of 1 - base_us / sample: utilisation estimate, 0..1 (< 0: none) */
	bool busy;                    /* P4Mite's bit */
	uint8_t level;                /* 0..255 */
	uint32_t window;              /* ring capacity */
	uint32_t n;                   /* samples in the ring */
	uint32_t head;                /* next slot */
	uint32_t *ring;               /* last samples (us) */
};

int lbh_agent_model_init(struct lbh_agent_model *m, uint32_t window);
void lbh_agent_model_fini(struct lbh_agent_model *m);
/* One sample; returns true when the busy bit flipped. cpu_pct < 0: unknown. */
bool lbh_agent_model_sample(struct lbh_agent_model *m, const struct lbh_agent_cfg *c, uint32_t lat_us,
			    double cpu_pct);
uint32_t lbh_agent_model_p99(const struct lbh_agent_model *m);

/* A sequence number start for a fresh agent: the wall clock in microseconds
 * (never 0), so a restarted agent continues above its previous numbers. */
uint64_t lbh_agent_seq_start(void);

/* ---------------------------------------------------------------------- */
/* helpers shared by the subcommands                                        */

/* "IP:PORT" (port required) or "IP" with default_port. 0 or -EINVAL. */
int lbh_parse_addr(const char *s, uint16_t default_port, struct sockaddr_in *out);

#endif

/*
 * lb/lb.c — the control source of the load balancer program "lb": setup
 * (settings, the config block, registers, tables, the timer), the names of
 * its counters and drop reasons, and the struct innet_program. The data path
 * (handler, sweep timer) is lb_dp.c, whose header comment describes the
 * program; the rest of the control side is config.c (settings), ctl.c (init,
 * on_cpu, commands, the sweep), maglev.c (tables), report.c (the report
 * format and its MAC). docs/lb.md is the user's page.
 *
 *   settings (JSON) ─► lb_conf_parse (config.c) ─► struct lb_priv (priv: all of it,
 *                                                   the key, servers, units)
 *                                                        │ conf: what the data path reads
 *                                                        ▼
 *                          innet_decl_conf ─► the config block (struct lb_conf, lb.h)
 *                                             ─► innet_conf(ctx) in lb_dp.c
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb_pvt.h"

const char *const lb_stat_names[LB_ST_COUNT] = {
	"reports_ok", "conn_new", "conn_expired", "conn_swept", "conn_table_full", "stateless",
	"bloom_new", "bloom_collisions", "tcp_closing", "fallback", "sweeps", "csum_completed",
};
_Static_assert(sizeof(lb_stat_names) / sizeof(lb_stat_names[0]) == LB_ST_COUNT, "stat names");

const char *const lb_drop_names[LB_N_DROPS] = {
	"report_bad_length", "report_bad_magic", "report_wrong_service", "report_bad_type",
	"report_bad_field", "report_bad_mac", "report_no_key", "report_unknown_unit",
	"report_bad_kind", "report_replayed", "no_backend", "nat_exhausted", "conn_table_full",
	"unknown_source", "no_connection", "not_a_vip", "bad_frame", "not_ipv4", "bad_ip",
	"ip_fragment", "bad_l4", "wrong_mode", "ttl_expired", "conn_busy",
};
_Static_assert(sizeof(lb_drop_names) / sizeof(lb_drop_names[0]) == LB_N_DROPS, "drop names");

static void priv_free(void *priv)
{
	struct lb_priv *p = priv;
	if (p == NULL)
		return;
	innet_lb_key_wipe(&p->key);
	free(p);
}

static int lb_setup(struct innet_decl *d, struct innet_args *a)
{
	struct lb_priv *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	innet_decl_priv_with(d, p, priv_free);
	int rc = lb_conf_parse(d, a, p);
	if (rc != 0)
		return rc;
	struct lb_conf *c = &p->conf;
	/* The timer's sweep datagram goes to port 0's own address (none in
	 * packet mode: raw ports have no address, and frames take its place);
	 * the nonce tells the handler it is this instance's. */
	c->own_ip = innet_decl_n_ports(d) > 0 ? innet_decl_port_ip(d, 0) : 0;
	if (sodium_init() < 0)
		return innet_decl_error(d, "libsodium failed to initialise");
	randombytes_buf(&c->nonce, sizeof(c->nonce));
	struct lb_conf *block = innet_decl_conf(d, sizeof(*block));
	if (block == NULL)
		return -ENOMEM;
	memcpy(block, c, sizeof(*block));
	uint32_t np = p->n_pools, ms = c->maglev_size;
	if ((rc = innet_decl_reg(d, R_UNIT_ADDR, "unit_addr", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_MAC, "unit_mac", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_META, "unit_meta", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_STATE, "unit_state", 4, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_LAT, "unit_latency_us", 4, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_SEQ, "unit_seq", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_SEEN, "unit_seen_ns", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_CONNS, "unit_conns", 4, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_NEW, "unit_new_conns", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_PKTS, "unit_pkts", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_SRV_BY_ID, "server_by_id", 1, 65536)) ||
	    (rc = innet_decl_reg(d, R_POOL_VER, "pool_version", 4, np)) ||
	    (rc = innet_decl_reg(d, R_MAGLEV, "maglev", 2, np * 4 * ms)) ||
	    (rc = innet_decl_reg(d, R_LIST, "eligible", 2, np * 2 * LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_LIST_N, "eligible_n", 4, np * 2)) ||
	    (rc = innet_decl_reg(d, R_WRR, "wrr", 2, np * 2 * LB_WRR_MAX)) ||
	    (rc = innet_decl_reg(d, R_WRR_N, "wrr_n", 4, np * 2)) ||
	    (rc = innet_decl_reg(d, R_WRR_CTR, "wrr_counter", 8, np)) ||
	    (rc = innet_decl_reg(d, R_DIP, "dip", 1, p->n_servers * LB_DIP_STATES)) ||
	    (rc = innet_decl_reg(d, R_NATMAP, "nat_ports", 8, LB_MAX_UNIT_SLOTS * c->nat_words)) ||
	    (rc = innet_decl_reg(d, R_BLOOM, "bloom", 1, c->bloom_size)) ||
	    (rc = innet_decl_reg(d, R_STATS, "lb_stats", 8, LB_ST_COUNT)) ||
	    (rc = innet_decl_reg(d, R_SWEEP, "sweep", 8, 2)) ||
	    (rc = innet_decl_reg(d, R_PORT_MAC, "port_mac", 8, INNET_MAX_PORTS)) ||
	    (rc = innet_decl_table(d, T_CONN, "conn", sizeof(struct lb_conn_key),
				   sizeof(struct lb_conn_val), p->conn_capacity)) ||
	    (rc = innet_decl_table(d, T_REV, "conn_rev", sizeof(struct lb_rev_key),
				   sizeof(struct lb_rev_val), p->conn_capacity)) ||
	    (rc = innet_decl_table(d, T_UADDR, "unit_by_addr", sizeof(struct lb_uaddr_key), 4,
				   LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_timers(d, 1)))
		return rc;
	return 0;
}

const struct innet_program innet_prog_lb = {
	.name = "lb",
	.summary = "load balancer: Maglev, P4Mite accelerator-aware policy, agent reports (docs/lb.md)",
	.model = INNET_MODEL_TRIO,
	.parse_bytes = 14 + 60 + 60,
	.drop_reasons = lb_drop_names,
	.n_drop_reasons = LB_N_DROPS,
	.setup = lb_setup,
	.init = lb_init,
	.handle = innet_dp_lb_handle,
	.on_timer = innet_dp_lb_timer,
	.on_cpu = lb_on_cpu,
	.on_ctl = lb_on_ctl,
};

INNET_PROGRAM_REGISTER(innet_prog_lb)

/*
 * link_conf.c — a port's link emulation settings (struct innet_link_conf,
 * innet/switch.h) as the engine-neutral runtime reads them: whether they
 * fault the link, whether they apply on this switch's engine, and their one
 * JSON rendering (ctl info, fabric show --json, fabric.json). The user-space
 * engine carries them out (src/targets/user/link.c); a netns fabric gives
 * them to the kernel instead (src/topology/netns.c).
 */
#include <stdio.h>

#include <jansson.h>

#include "innet/switch.h"

bool innet_link_faulty(const struct innet_link_conf *lc)
{
	return lc->loss > 0 || lc->dup > 0 || lc->reorder > 0 || lc->delay_us > 0 || lc->jitter_us > 0;
}

bool innet_link_active(const struct innet_link_conf *lc)
{
	return (lc->on_egress || lc->on_ingress) && innet_link_faulty(lc);
}

json_t *innet_link_json(const struct innet_link_conf *l)
{
	json_t *o = json_object();
	if (o == NULL)
		return NULL;
	int rc = json_object_set_new(o, "loss", json_real(l->loss));
	rc |= json_object_set_new(o, "dup", json_real(l->dup));
	rc |= json_object_set_new(o, "reorder", json_real(l->reorder));
	rc |= json_object_set_new(o, "delay_us", json_integer(l->delay_us));
	rc |= json_object_set_new(o, "jitter_us", json_integer(l->jitter_us));
	rc |= json_object_set_new(o, "on_egress", json_boolean(l->on_egress));
	rc |= json_object_set_new(o, "on_ingress", json_boolean(l->on_ingress));
	/* a 64-bit seed does not fit a JSON integer everywhere: a hex string */
	char seed[24];
	snprintf(seed, sizeof(seed), "0x%016llx", (unsigned long long)l->seed);
	rc |= json_object_set_new(o, "seed", json_string(seed));
	rc |= json_object_set_new(o, "active", json_boolean(innet_link_active(l)));
	if (rc != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

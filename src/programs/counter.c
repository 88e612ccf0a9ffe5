/*
 * counter.c — the counter program's control source (the handler is
 * counter_dp.c). Settings: "size": number of counters (default 1024).
 */
#include <errno.h>

#include "innet/program.h"
#include "innet/wire.h"
#include "programs/counter.h"

static const char *const counter_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "is_reply",
};

static int counter_setup(struct innet_decl *d, struct innet_args *a)
{
	uint64_t size;
	int rc = innet_args_u64(a, "size", 1024, 1, 1u << 24, &size);
	if (rc != 0)
		return rc;
	struct counter_conf *c = innet_decl_conf(d, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->size = (uint32_t)size;
	return innet_decl_reg(d, CNT_R_VALUE, "value", 8, c->size);
}

const struct innet_program innet_prog_counter = {
	.name = "counter",
	.summary = "example: an array of counters clients increment and read (innet counter header)",
	.model = INNET_MODEL_PISA,
	.parse_bytes = sizeof(struct innet_hdr) + sizeof(struct innet_counter_hdr),
	.drop_reasons = counter_drop_names,
	.n_drop_reasons = sizeof(counter_drop_names) / sizeof(counter_drop_names[0]),
	.setup = counter_setup,
	.handle = innet_dp_counter_handle,
};

INNET_PROGRAM_REGISTER(innet_prog_counter)

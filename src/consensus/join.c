/*
 * join.c — completing the join of a restarted acceptor (acceptor.c, setting
 * "join": true) from the control plane. docs/consensus.md, "Acceptor
 * restart", has the argument; in short, the restarted acceptor may have
 * voted in any instance handed out before it died and promised any ballot a
 * majority containing it promised, so it must
 *
 *   - answer nothing below J = max(the coordinator's next, every other
 *     acceptor's hi): every instance it could have voted in is below J;
 *   - refuse ballots below JB = the highest ballot promised or voted by the
 *     others read (promised and every slot's rnd): a majority that contained
 *     it contained one of them when at least N - majority + 1 are read.
 *
 * Registers read: the others' "promised", "rnd" (every slot), "hi"; the
 * coordinator's "next". Written: the joiner's join_inst, join_ballot, then
 * joining = 0 (the order matters: it must not answer before both are set).
 */
#include <errno.h>
#include <stdint.h>

#include "innet/consensus.h"
#include "innet/switch.h"

static int reg_u64(struct innet_cp *cp, const char *name, uint32_t idx, uint64_t *v)
{
	int id = innet_cp_reg_find(cp, name);
	if (id < 0)
		return id;
	return innet_cp_reg_read(cp, (unsigned)id, idx, v);
}

int innet_paxos_acceptor_join(struct innet_cp *joiner, struct innet_cp *const *others,
			      uint32_t n_others, uint32_t n_acceptors, uint64_t coord_next)
{
	if (n_acceptors == 0 || n_others < n_acceptors - (n_acceptors / 2 + 1) + 1)
		return -EINVAL; /* too few to bound its promises */
	uint64_t j = coord_next, jb = 0, v;
	for (uint32_t k = 0; k < n_others; k++) {
		struct innet_cp *cp = others[k];
		int rc, rnd = innet_cp_reg_find(cp, "rnd");
		if (rnd < 0)
			return rnd;
		if ((rc = reg_u64(cp, "hi", 0, &v)) != 0)
			return rc;
		j = v > j ? v : j;
		if ((rc = reg_u64(cp, "promised", 0, &v)) != 0)
			return rc;
		jb = v > jb ? v : jb;
		const struct innet_reg *r = innet_cp_reg(cp, (unsigned)rnd);
		for (uint32_t i = 0; r != NULL && i < r->count; i++) {
			if ((rc = innet_cp_reg_read(cp, (unsigned)rnd, i, &v)) != 0)
				return rc;
			jb = v > jb ? v : jb;
		}
	}
	int ji = innet_cp_reg_find(joiner, "join_inst"), jbi = innet_cp_reg_find(joiner, "join_ballot");
	int jn = innet_cp_reg_find(joiner, "joining");
	if (ji < 0 || jbi < 0 || jn < 0)
		return -ENOENT;
	int rc = innet_cp_reg_write(joiner, (unsigned)ji, 0, j);
	if (rc == 0)
		rc = innet_cp_reg_write(joiner, (unsigned)jbi, 0, jb);
	if (rc == 0)
		rc = innet_cp_reg_write(joiner, (unsigned)jn, 0, 0);
	return rc;
}

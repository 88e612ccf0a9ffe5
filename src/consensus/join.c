/*
 * join.c — completing the join of a restarted acceptor (acceptor.c, setting
 * "join": true) from the control plane. docs/consensus.md, "Acceptor
 * restart", has the argument; in short, the restarted acceptor A may have
 * voted or promised, before it died, in any instance handed out until then,
 * and may have made range promises (a leader's phase 1) to any ballot. It
 * therefore
 *
 *   - answers nothing below J = max(the next instance of the coordinator in
 *     charge; over the others read: hi, trim, and the highest instance held
 *     in any of their slots);
 *   - refuses ballots below JB = the highest range promise ("promised") of
 *     the others read.
 *
 * Why J is enough for every vote and every per-instance promise A gave,
 * whatever its ballot (the coordinator's, a backup leader's, or a learner's
 * gap-recovery ballot, which is routinely above the coordinator's after a
 * lossy run): a vote or promise of A's that anyone relies on was given by a
 * majority containing A, so by another acceptor too, and any N - majority + 1
 * of the others include one of that majority — whose slot holds the instance
 * (below its trim the instance is decided and delivered everywhere) or whose
 * hi is above it. An instance no one else touched was handed out by a
 * coordinator: if it was the one in charge, its next is above it; if it was
 * an older one (a coordinator switch superseded by a backup leader), no
 * value can be chosen there below the leader's ballot unless a member of the
 * leader's phase-1 majority voted there first — then the leader's next is
 * above it. Range promises: the leader that relies on A's counted on a
 * majority, which again includes one of the others read, so JB covers it.
 *
 * The coordinator in charge is the one whose ballot is at least every
 * promise read (JB): the coordinator switch while no backup leader took
 * over, else the serving leader (innet_paxos_leader_next). If the caller's
 * coordinator is below JB it was superseded: -ESTALE, nothing written.
 *
 * Registers read: the others' "hi", "trim", "promised", "inst" (every
 * slot). Written: the joiner's join_inst, join_ballot, then joining = 0 (the
 * order matters: it must not answer before both are set).
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

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

int innet_paxos_acceptor_join(struct innet_cp *joiner, struct innet_cp *const *others,
			      uint32_t n_others, uint32_t n_acceptors, uint64_t coord_next,
			      uint32_t coord_ballot)
{
	if (n_acceptors == 0 || n_others < n_acceptors - (n_acceptors / 2 + 1) + 1)
		return -EINVAL; /* too few to bound its votes and promises */
	uint64_t j = coord_next, jb = 0, v;
	for (uint32_t k = 0; k < n_others; k++) {
		struct innet_cp *cp = others[k];
		int rc, inst = innet_cp_reg_find(cp, "inst");
		if (inst < 0)
			return inst;
		if ((rc = reg_u64(cp, "hi", 0, &v)) != 0)
			return rc;
		j = max64(j, v);
		if ((rc = reg_u64(cp, "trim", 0, &v)) != 0)
			return rc;
		j = max64(j, v);
		if ((rc = reg_u64(cp, "promised", 0, &v)) != 0)
			return rc;
		jb = max64(jb, v);
		const struct innet_reg *r = innet_cp_reg(cp, (unsigned)inst);
		for (uint32_t i = 0; r != NULL && i < r->count; i++) {
			if ((rc = innet_cp_reg_read(cp, (unsigned)inst, i, &v)) != 0)
				return rc;
			j = max64(j, v); /* the slot holds instance v - 1 */
		}
	}
	if (jb > coord_ballot)
		return -ESTALE; /* that coordinator was superseded */
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

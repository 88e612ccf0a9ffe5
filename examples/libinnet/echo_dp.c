/*
 * echo_dp.c — the echo program's data path: count the packet, send it back
 * to its sender (PISA: one register operation). Restricted C against
 * innet/dp.h alone, built outside innet's tree for both targets by the
 * installed rules (innet-dp.mk, `pkg-config --variable=dpmk innet`):
 * echo_dp.o (the user-space engine's, linked into echo_switch) and
 * echo_dp.bpf.o (the XDP target's, loaded at run time: innet_decl_datapath).
 */
#include "echo.h"

static enum innet_action echo_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	innet_reg_fetch_add(ctx, ECHO_R_COUNT, 0, 1);
	return innet_reflect(pkt);
}
INNET_DATAPATH(echo, echo_handle, NULL)

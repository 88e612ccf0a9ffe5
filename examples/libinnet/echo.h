/*
 * echo.h — what the echo program's two sources share: its register ids,
 * and the data path's exported handler (INNET_DATAPATH in echo_dp.c).
 */
#ifndef ECHO_H
#define ECHO_H

#include <innet/dp.h>

enum { ECHO_R_COUNT };   /* one 8-byte counter: packets echoed */

INNET_DATAPATH_DECL(echo);

#endif /* ECHO_H */

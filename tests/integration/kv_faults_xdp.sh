#!/usr/bin/env bash
# kv_faults_xdp.sh — kv_faults.sh with the switches on the XDP target: the
# coordinator and the acceptors run in eBPF on veths between network
# namespaces, the link faults (5% loss, 5% duplication, 5% reordering on every
# acceptor link) are netem on those veths, and the kills are kill -9 of the
# switch processes (an acceptor, then the coordinator: its XDP program goes
# with its process). The same checks: a linearizable history, no
# acknowledged write lost, the backup coordinator took over, identical
# replicas. The replicas run the learner filter (netns mode's default), which
# then also sees the lossy links' duplicates and the recovery's 2Bs. Needs
# root (skips without it).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
KV_FAULTS_TARGET=xdp exec bash tests/integration/kv_faults.sh

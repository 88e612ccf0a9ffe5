#!/usr/bin/env bash
# kv_faults_20.sh — kv_faults.sh at the issue's upper bound of link faults:
# 20% loss, 10% duplication, 10% reordering on every acceptor link, with the
# same kills (an acceptor, then the coordinator switch) and the same checks
# (linearizable history, no acknowledged write lost, identical replicas).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
KV_FAULTS_RATES=0.2,0.1,0.1 exec bash tests/integration/kv_faults.sh

#!/usr/bin/env bash
# agg_python.sh — the aggregation service's Python binding (src/agg/python/innet_agg.py,
# ctypes over build/libinnet-agg.so) and the data-parallel training demo
# (src/agg/python/agg_train_digits.py) against real `innet switch` processes on
# loopback (127.209.P.0/24): src/agg/python/test_innet_agg.py. A few seconds.
# Skips (77) without Debian's python3-numpy / python3-sklearn.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy, sklearn' 2>/dev/null; then
	skip "needs python3-numpy and python3-sklearn"
fi
make -s build/innet build/libinnet-agg.so
export INNET="${INNET:-$PWD/build/innet}"
exec timeout -k 5 120 "$PY" -W error::ResourceWarning -m unittest -v src/agg/python/test_innet_agg.py

#!/usr/bin/env bash
# engine_raw_xdp.sh — engine_raw_netns.sh on the XDP target: two hosts
# bridged by the l2fwd program's eBPF object on raw ports (ping, UDP echo,
# 2 MiB of TCP, counters).
exec env ENGINE_RAW_TARGET=xdp bash "$(dirname "$0")/engine_raw_netns.sh"

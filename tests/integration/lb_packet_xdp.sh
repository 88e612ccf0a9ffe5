#!/usr/bin/env bash
# lb_packet_xdp.sh — lb_packet_netns.sh on the XDP target: the load balancer's
# packet mode run by its eBPF object on the raw ports (UDP and TCP through the
# VIPs, a drain, reports as frames, malformed frames by name, the sweep's slow
# path through the hand-off ring), every frame handled in eBPF.
exec env LB_PACKET_TARGET=xdp bash "$(dirname "$0")/lb_packet_netns.sh"

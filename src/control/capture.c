/*
 * capture.c — pcap capture of a switch port's traffic, for debugging with
 * tshark/Wireshark (and tools/wireshark/innet.lua).
 *
 * A switch port is a UDP socket, so the runtime only ever sees UDP payloads.
 * To make the capture decodable, every packet is written as a raw IPv4
 * datagram (LINKTYPE_RAW) whose IPv4 and UDP headers are synthesized from the
 * addresses the worker knows:
 *
 *   pcap record:  | IPv4 header (20, checksummed) | UDP header (8) | payload |
 *                   src/dst = the datagram's        ports from the
 *                   source and destination          sockaddrs; UDP checksum
 *                                                   computed (IPv4 pseudo-header)
 *
 * A raw port (AF_PACKET, docs/runtime.md) carries whole Ethernet frames: its
 * capture is written as they are, LINKTYPE_ETHERNET (DLT_EN10MB), nothing
 * synthesized.
 *
 * Ingress packets are recorded as the worker receives them (before ingress
 * link emulation); egress packets as the worker queues them (before egress
 * link emulation), so a packet the emulated link loses still appears.
 *
 * THREAD SAFETY NOTES
 * -------------------
 * A port's capture slot (innet_switch_capture_slot, engine/switch_ctl.h) is
 * an _Atomic pointer that workers test (relaxed) for
 * every packet; only when it is non-NULL do they call innet_capture_packet().
 * Every access to a struct innet_capture — writing a packet, starting,
 * stopping, the automatic stop after max_pkts, close_all — happens under
 * the switch's capture lock, and innet_capture_packet() re-reads the port's pointer
 * under that lock. So a worker that saw a non-NULL pointer just before a stop
 * finds NULL under the lock and returns: the struct can be freed by whoever
 * clears the pointer, with no use after free.
 *
 * The cost: while any port is being captured, workers that handle its packets
 * serialise on capture_lock and write (and flush) the file per packet. Capture
 * is a debug path; it is off, and costs one relaxed load per packet, otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "control/control.h"
#include "engine/switch_ctl.h"

#define CAP_SNAPLEN   65535u
#define CAP_IP_HDR    20u
#define CAP_UDP_HDR   8u
#define CAP_HDRS      (CAP_IP_HDR + CAP_UDP_HDR)
#define CAP_MAX_DATA  (CAP_SNAPLEN - CAP_HDRS)

/* One port's capture. Owned by the port's atomic pointer; see the notes. */
struct innet_capture {
	pcap_t *pd;              /* pcap_open_dead(DLT_RAW or DLT_EN10MB): the dumper's format */
	bool frames;             /* a raw port: records are the frames as they are */
	pcap_dumper_t *dumper;   /* the open file */
	uint64_t max_pkts;       /* stop after this many packets; 0 = unlimited */
	uint64_t n_pkts;         /* packets written so far */
	uint16_t ip_id;          /* next IPv4 identification (synthesized) */
	uint8_t buf[CAP_SNAPLEN];/* one record being assembled (under the lock) */
};

/* Close the file (flushing it) and free c. NULL is allowed. */
static void capture_free(struct innet_capture *c)
{
	if (c == NULL)
		return;
	if (c->dumper != NULL) {
		pcap_dump_flush(c->dumper);
		pcap_dump_close(c->dumper);
	}
	if (c->pd != NULL)
		pcap_close(c->pd);
	free(c);
}

/* One's-complement sum of len bytes, added to sum (not folded). */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	while (len > 1) {
		sum += (uint32_t)p[0] << 8 | p[1];
		p += 2;
		len -= 2;
	}
	if (len)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * Build one record in c->buf: IPv4 + UDP headers for src → dst (network-order
 * sockaddrs) in front of len payload bytes. Returns the record length.
 * len must be <= CAP_MAX_DATA.
 */
static uint32_t build_record(struct innet_capture *c, const struct sockaddr_in *src,
			     const struct sockaddr_in *dst, const void *data, uint32_t len)
{
	uint8_t *ip = c->buf, *udp = c->buf + CAP_IP_HDR;
	uint32_t total = CAP_HDRS + len;

	memset(ip, 0, CAP_HDRS);
	ip[0] = 0x45;                          /* version 4, IHL 5 */
	put16(ip + 2, (uint16_t)total);        /* total length */
	put16(ip + 4, c->ip_id++);             /* identification */
	put16(ip + 6, 0x4000);                 /* DF, fragment offset 0 */
	ip[8] = 64;                            /* TTL */
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, &src->sin_addr.s_addr, 4);
	memcpy(ip + 16, &dst->sin_addr.s_addr, 4);
	put16(ip + 10, csum_fold(csum_add(0, ip, CAP_IP_HDR)));

	memcpy(udp + 0, &src->sin_port, 2);
	memcpy(udp + 2, &dst->sin_port, 2);
	put16(udp + 4, (uint16_t)(CAP_UDP_HDR + len));
	memcpy(udp + CAP_UDP_HDR, data, len);

	/* UDP checksum over the IPv4 pseudo-header, the header and the data. */
	uint8_t pseudo[12];
	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_UDP;
	put16(pseudo + 10, (uint16_t)(CAP_UDP_HDR + len));
	uint16_t sum = csum_fold(csum_add(csum_add(0, pseudo, sizeof(pseudo)), udp, CAP_UDP_HDR + len));
	put16(udp + 6, sum ? sum : 0xffff);    /* 0 means "no checksum" in UDP/IPv4 */
	return total;
}

/*
 * Record one packet seen on `port` (egress: sent by the switch; otherwise
 * received). src/dst are the datagram's addresses (network order). Called by
 * workers only while the port's capture pointer is non-NULL; takes
 * capture_lock. After max_pkts packets, the capture stops by itself: the port
 * pointer is cleared and the file closed.
 */
void innet_capture_packet(struct innet_switch *sw, uint32_t port, bool egress,
			  const struct sockaddr_in *src, const struct sockaddr_in *dst, const void *data,
			  uint32_t len)
{
	(void)egress; /* the direction is in the addresses */
	if (port >= innet_switch_conf(sw)->n_ports)
		return;
	pthread_mutex_lock(innet_switch_capture_lock(sw));
	struct innet_capture *c = atomic_load_explicit(innet_switch_capture_slot(sw, port),
						       memory_order_acquire);
	if (c == NULL)
		goto out_unlock; /* stopped between the worker's test and here */
	if (len > CAP_MAX_DATA)
		len = CAP_MAX_DATA;

	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct pcap_pkthdr h = {
		.ts = { .tv_sec = ts.tv_sec, .tv_usec = (suseconds_t)(ts.tv_nsec / 1000) },
	};
	if (c->frames) {
		h.caplen = h.len = len;
		pcap_dump((u_char *)c->dumper, &h, data);
	} else {
		h.caplen = h.len = build_record(c, src, dst, data, len);
		pcap_dump((u_char *)c->dumper, &h, c->buf);
	}
	pcap_dump_flush(c->dumper);

	if (c->max_pkts != 0 && ++c->n_pkts >= c->max_pkts) {
		atomic_store_explicit(innet_switch_capture_slot(sw, port), NULL, memory_order_release);
		capture_free(c);
	}
out_unlock:
	pthread_mutex_unlock(innet_switch_capture_lock(sw));
}

/*
 * Start capturing `port` into a new pcap file at `path` (created or
 * truncated, mode 0666 & ~umask), stopping after max_pkts packets (0 =
 * unlimited). Returns 0; -EINVAL (bad port or empty path), -EBUSY (already
 * capturing that port), -ENOMEM, or the -errno of creating the file.
 */
int innet_switch_capture_start(struct innet_switch *sw, uint32_t port, const char *path,
			       uint64_t max_pkts)
{
	if (sw == NULL || port >= innet_switch_conf(sw)->n_ports || path == NULL || path[0] == '\0')
		return -EINVAL;
	struct innet_capture *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->max_pkts = max_pkts;
	c->frames = innet_switch_conf(sw)->ports[port].iface[0] != '\0';
	c->pd = pcap_open_dead(c->frames ? DLT_EN10MB : DLT_RAW, (int)CAP_SNAPLEN);
	if (c->pd == NULL) {
		free(c);
		return -ENOMEM;
	}

	pthread_mutex_lock(innet_switch_capture_lock(sw));
	int rc = 0;
	if (atomic_load_explicit(innet_switch_capture_slot(sw, port), memory_order_relaxed) != NULL) {
		rc = -EBUSY;
		goto err_unlock;
	}
	/* fopen ourselves so that a failure has a meaningful errno. */
	FILE *f = fopen(path, "wbe");
	if (f == NULL) {
		rc = -errno;
		goto err_unlock;
	}
	c->dumper = pcap_dump_fopen(c->pd, f);
	if (c->dumper == NULL) {
		fclose(f);
		rc = -EIO;
		goto err_unlock;
	}
	pcap_dump_flush(c->dumper); /* the file header, for an early reader */
	atomic_store_explicit(innet_switch_capture_slot(sw, port), c, memory_order_release);
	pthread_mutex_unlock(innet_switch_capture_lock(sw));
	return 0;

err_unlock:
	pthread_mutex_unlock(innet_switch_capture_lock(sw));
	capture_free(c);
	return rc;
}

/*
 * Stop capturing `port` and close its file. Returns 0, -EINVAL (bad port) or
 * -ENOENT (not capturing: never started, already stopped, or it stopped by
 * itself after its max_pkts).
 */
int innet_switch_capture_stop(struct innet_switch *sw, uint32_t port)
{
	if (sw == NULL || port >= innet_switch_conf(sw)->n_ports)
		return -EINVAL;
	pthread_mutex_lock(innet_switch_capture_lock(sw));
	struct innet_capture *c = atomic_exchange_explicit(innet_switch_capture_slot(sw, port), NULL,
							   memory_order_acq_rel);
	capture_free(c);
	pthread_mutex_unlock(innet_switch_capture_lock(sw));
	return c != NULL ? 0 : -ENOENT;
}

/* Stop every capture (the switch is being destroyed; workers have stopped). */
void innet_capture_close_all(struct innet_switch *sw)
{
	if (sw == NULL)
		return;
	pthread_mutex_lock(innet_switch_capture_lock(sw));
	for (uint32_t p = 0; p < innet_switch_conf(sw)->n_ports; p++)
		capture_free(atomic_exchange_explicit(innet_switch_capture_slot(sw, p), NULL, memory_order_acq_rel));
	pthread_mutex_unlock(innet_switch_capture_lock(sw));
}

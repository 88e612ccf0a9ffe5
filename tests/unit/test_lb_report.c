/*
 * test_lb_report.c — the load balancer's agent report (src/lb/report.c):
 * seal/open round trip, the byte layout drawn in innet/lb.h, the MAC against
 * an independent HMAC-SHA256 (RFC 4231 test case 2), every rejection with its
 * named error (bit flips anywhere, wrong key, bad fields, bad lengths), and
 * the key file loader (good file, bad hex, short, long, missing).
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/lb.h"
#include "lb/wire.h"

static const uint8_t key_raw[32] = {
	0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
	0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
};

static struct innet_lb_report sample(void)
{
	struct innet_lb_report r = {
		.server = 0x0102, .unit = 3, .kind = INNET_LB_KIND_ACCEL,
		.state = INNET_LB_ST_AVAILABLE | INNET_LB_ST_BUSY, .load = 200,
		.rflags = INNET_LB_RF_THRESHOLD, .seq = 0x1122334455667788ull,
		.latency_us = 123456, .src_node = 7, .dst_node = 9,
	};
	return r;
}

static void test_roundtrip_layout(void **state)
{
	struct innet_lb_key k;
	assert_int_equal(innet_lb_key_init(&k, key_raw), 0);
	struct innet_lb_report r = sample(), o;
	uint8_t buf[64];
	assert_int_equal(innet_lb_report_seal(&r, &k, buf, sizeof(buf)), INNET_LB_REPORT_LEN);
	/* The layout drawn in lb.h. */
	static const uint8_t want[32] = {
		0x1e, 1, 5, 0, 0, 9, 0, 7,
		1, 1, 3, 200, 0x01, 0x02, 0, 3,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x00, 0x01, 0xe2, 0x40, 0, 2, 0, 0,
	};
	assert_memory_equal(buf, want, sizeof(want));
	memset(&o, 0, sizeof(o));
	assert_int_equal(innet_lb_report_open(buf, INNET_LB_REPORT_LEN, &k, &o), 0);
	assert_int_equal(o.server, r.server);
	assert_int_equal(o.unit, r.unit);
	assert_int_equal(o.kind, r.kind);
	assert_int_equal(o.state, r.state);
	assert_int_equal(o.load, r.load);
	assert_int_equal(o.rflags, r.rflags);
	assert_true(o.seq == r.seq);
	assert_int_equal(o.latency_us, r.latency_us);
	assert_int_equal(o.src_node, r.src_node);
	assert_int_equal(o.dst_node, r.dst_node);
	/* Buffer too small. */
	assert_int_equal(innet_lb_report_seal(&r, &k, buf, 47), -ENOSPC);
}

/* RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?". */
static void test_hmac_vector(void **state)
{
	static const uint8_t want[16] = {
		0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
		0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
	};
	uint8_t raw[32] = { 'J', 'e', 'f', 'e' }; /* zero padding = the same HMAC key */
	struct innet_lb_key k;
	assert_int_equal(innet_lb_key_init(&k, raw), 0);
	uint8_t mac[16];
	const char *msg = "what do ya want for nothing?";
	innet_lb_mac(&k, msg, strlen(msg), mac);
	assert_memory_equal(mac, want, 16);
	assert_true(innet_lb_mac_ok(&k, msg, strlen(msg), want));
	mac[15] ^= 1;
	assert_false(innet_lb_mac_ok(&k, msg, strlen(msg), mac));
	/* The expanded state is reusable: the same MAC twice. */
	innet_lb_mac(&k, msg, strlen(msg), mac);
	assert_memory_equal(mac, want, 16);
}

static void test_rejects(void **state)
{
	struct innet_lb_key k, k2;
	uint8_t other[32];
	memcpy(other, key_raw, 32);
	other[31] ^= 0x80;
	assert_int_equal(innet_lb_key_init(&k, key_raw), 0);
	assert_int_equal(innet_lb_key_init(&k2, other), 0);
	struct innet_lb_report r = sample(), o;
	uint8_t buf[64], b2[64];
	innet_lb_report_seal(&r, &k, buf, sizeof(buf));

	/* Wrong key: spoofed. */
	assert_int_equal(innet_lb_report_open(buf, 48, &k2, &o), -INNET_LB_E_BAD_MAC);
	assert_string_equal(innet_lb_err_name(-INNET_LB_E_BAD_MAC), "bad_mac");
	/* Every single bit flip is caught, with the right reason. */
	for (unsigned bit = 0; bit < 48 * 8; bit++) {
		memcpy(b2, buf, 48);
		b2[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		int rc = innet_lb_report_open(b2, 48, &k, &o);
		unsigned byte = bit / 8;
		int want = -INNET_LB_E_BAD_MAC;
		if (byte == 0 || byte == 1)
			want = -INNET_LB_E_BAD_MAGIC;
		else if (byte == 2)
			want = -INNET_LB_E_WRONG_SERVICE;
		else if (byte == 8)
			want = -INNET_LB_E_BAD_TYPE;
		assert_int_equal(rc, want);
	}
	/* Lengths. */
	assert_int_equal(innet_lb_report_open(buf, 47, &k, &o), -INNET_LB_E_TOO_SHORT);
	assert_int_equal(innet_lb_report_open(buf, 49, &k, &o), -INNET_LB_E_TOO_SHORT);
	assert_int_equal(innet_lb_report_open(buf, 0, &k, &o), -INNET_LB_E_TOO_SHORT);

	/* Fields out of range, correctly MACed: bad_field (seal refuses them too). */
	struct innet_lb_report bad;
	bad = r; bad.kind = 2;
	assert_int_equal(innet_lb_report_seal(&bad, &k, b2, 64), -INNET_LB_E_BAD_FIELD);
	bad = r; bad.state = 4;
	assert_int_equal(innet_lb_report_seal(&bad, &k, b2, 64), -INNET_LB_E_BAD_FIELD);
	bad = r; bad.rflags = 0x8000;
	assert_int_equal(innet_lb_report_seal(&bad, &k, b2, 64), -INNET_LB_E_BAD_FIELD);
	bad = r; bad.seq = 0;
	assert_int_equal(innet_lb_report_seal(&bad, &k, b2, 64), -INNET_LB_E_BAD_FIELD);
	static const unsigned field_bytes[] = { 9, 10, 28, 30, 31, 3 };
	static const uint8_t field_vals[] = { 7, 0x80, 0x80, 1, 1, 1 };
	for (unsigned i = 0; i < sizeof(field_bytes) / sizeof(field_bytes[0]); i++) {
		memcpy(b2, buf, 48);
		b2[field_bytes[i]] = field_vals[i];
		innet_lb_mac(&k, b2, INNET_LB_MAC_OFF, b2 + INNET_LB_MAC_OFF);
		assert_int_equal(innet_lb_report_open(b2, 48, &k, &o), -INNET_LB_E_BAD_FIELD);
	}
	/* seq 0 on the wire. */
	memcpy(b2, buf, 48);
	memset(b2 + 16, 0, 8);
	innet_lb_mac(&k, b2, INNET_LB_MAC_OFF, b2 + INNET_LB_MAC_OFF);
	assert_int_equal(innet_lb_report_open(b2, 48, &k, &o), -INNET_LB_E_BAD_FIELD);
	/* o never written on failure: still what the loop left (zeroes). */
	assert_string_equal(innet_lb_err_name(INNET_LB_E_COUNT + 3), "unknown");
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static void test_key_file(void **state)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/innet-lb-key-%d", (int)getpid());
	char err[256];
	struct innet_lb_key k, ref;
	assert_int_equal(innet_lb_key_init(&ref, key_raw), 0);

	char hex[80];
	for (int i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", key_raw[i]);
	strcat(hex, "\n");
	assert_int_equal(write_file(path, hex), 0);
	assert_int_equal(innet_lb_key_load(&k, path, err, sizeof(err)), 0);
	assert_memory_equal(k.raw, key_raw, 32);
	/* The same MAC as a key from raw bytes. */
	uint8_t m1[16], m2[16];
	innet_lb_mac(&k, "abc", 3, m1);
	innet_lb_mac(&ref, "abc", 3, m2);
	assert_memory_equal(m1, m2, 16);

	/* Upper case is fine. */
	for (char *p = hex; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	assert_int_equal(write_file(path, hex), 0);
	assert_int_equal(innet_lb_key_load(&k, path, err, sizeof(err)), 0);
	assert_memory_equal(k.raw, key_raw, 32);

	static const char *const bad[] = {
		"0123", /* short */
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeX\n", /* bad hex */
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef00\n", /* long */
		"", /* empty */
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef x", /* trailing */
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(write_file(path, bad[i]), 0);
		err[0] = '\0';
		assert_int_equal(innet_lb_key_load(&k, path, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "64 hexadecimal"));
	}
	unlink(path);
	assert_int_equal(innet_lb_key_load(&k, path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	innet_lb_key_wipe(&k);
	for (int i = 0; i < 32; i++)
		assert_int_equal(k.raw[i], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_layout),
		cmocka_unit_test(test_hmac_vector),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_key_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_parse.c — numbers and addresses from text (src/engine/parse.c),
 * table-driven: what each accepts, what it refuses and with which error.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "innet/parse.h"

static void test_u64(void **state)
{
	static const struct {
		const char *s;
		uint64_t min, max;
		int rc;
		uint64_t v;
	} cases[] = {
		{ "0", 0, 10, 0, 0 },          { "10", 0, 10, 0, 10 },
		{ "11", 0, 10, -ERANGE, 0 },   { "0x1F", 0, 100, 0, 31 },
		{ "0X10", 0, 100, 0, 16 },     { "010", 0, 100, 0, 10 },   /* no octal */
		{ "", 0, 10, -EINVAL, 0 },     { "0x", 0, 10, -EINVAL, 0 },
		{ "-1", 0, 10, -EINVAL, 0 },   { "+1", 0, 10, -EINVAL, 0 },
		{ " 1", 0, 10, -EINVAL, 0 },   { "1 ", 0, 10, -EINVAL, 0 },
		{ "1k", 0, 10, -EINVAL, 0 },   { "3", 5, 10, -ERANGE, 0 },
		{ "18446744073709551615", 0, UINT64_MAX, 0, UINT64_MAX },
		{ "18446744073709551616", 0, UINT64_MAX, -ERANGE, 0 },
		{ "0xg", 0, 10, -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int rc = innet_parse_u64(cases[i].s, cases[i].min, cases[i].max, &v);
		if (rc != cases[i].rc)
			fail_msg("'%s': rc %d, want %d", cases[i].s, rc, cases[i].rc);
		if (rc == 0)
			assert_int_equal(v, cases[i].v);
		else
			assert_int_equal(v, 12345);   /* untouched on error */
	}
	assert_int_equal(innet_parse_u64(NULL, 0, 1, &(uint64_t){ 0 }), -EINVAL);
}

static void test_addr(void **state)
{
	uint32_t ip;
	assert_int_equal(innet_parse_ip("10.1.2.3", &ip), 0);
	assert_int_equal(ip, 0x0a010203u);
	assert_int_equal(innet_parse_ip("10.1.2", &ip), -EINVAL);
	assert_int_equal(innet_parse_ip("10.1.2.300", &ip), -EINVAL);
	assert_int_equal(innet_parse_ip("", &ip), -EINVAL);

	struct innet_addr a;
	assert_int_equal(innet_parse_addr("127.0.0.1:9000", 0, &a), 0);
	assert_int_equal(a.ip, 0x7f000001u);
	assert_int_equal(a.udp, 9000);
	assert_int_equal(innet_parse_addr("127.0.0.1", 47800, &a), 0);   /* default port */
	assert_int_equal(a.udp, 47800);
	assert_int_equal(innet_parse_addr("127.0.0.1", 0, &a), -EINVAL);  /* port required */
	assert_int_equal(innet_parse_addr("127.0.0.1:0", 0, &a), -EINVAL);
	assert_int_equal(innet_parse_addr("127.0.0.1:65536", 0, &a), -EINVAL);
	assert_int_equal(innet_parse_addr("127.0.0.1:", 0, &a), -EINVAL);
	assert_int_equal(innet_parse_addr("host:80", 0, &a), -EINVAL);
	assert_int_equal(innet_parse_addr("127.0.0.1:80x", 0, &a), -EINVAL);
	char longs[200];
	memset(longs, '1', sizeof(longs) - 1);
	longs[sizeof(longs) - 1] = '\0';
	assert_int_equal(innet_parse_addr(longs, 0, &a), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u64),
		cmocka_unit_test(test_addr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

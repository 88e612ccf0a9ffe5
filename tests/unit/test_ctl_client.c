/*
 * test_ctl_client.c — the control-socket client (src/control/ctl_client.c,
 * innet/ctl_client.h) against a stand-in switch (fake_ctl.h): requests and
 * responses on one connection, a response in pieces, a megabyte response,
 * no response (a timeout within the bound), a closed connection, no socket
 * and a path too long (errors that say what and where), innet_ctl_call's
 * three outcomes (ok, the switch's error, not JSON), innet_ctl_answers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "fake_ctl.h"
#include "innet/clock.h"
#include "innet/ctl_client.h"

static char dir[64], sock[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/innet-ctl-client.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(sock, sizeof(sock), "%s/sw.sock", dir);
	return 0;
}

static int teardown(void **state)
{
	unlink(sock);
	rmdir(dir);
	return 0;
}

/* "echo X" -> {"ok": true, "echo": "X"}; "error" -> the switch's error;
 * "garbage" -> not JSON; "big" -> a megabyte; "silent" -> nothing. */
static const char *answer(struct fake_ctl *f, const char *line, char *out, size_t outlen)
{
	if (!strncmp(line, "echo ", 5)) {
		snprintf(out, outlen, "{\"ok\": true, \"echo\": \"%s\"}", line + 5);
		return out;
	}
	if (!strcmp(line, "error"))
		return "{\"ok\": false, \"error\": \"no such register 'x'\"}";
	if (!strcmp(line, "garbage"))
		return "this is not json";
	if (!strcmp(line, "big")) {
		static char big[(1 << 20) + 64];
		size_t n = snprintf(big, sizeof(big), "{\"ok\": true, \"pad\": \"");
		memset(big + n, 'x', 1 << 20);
		strcpy(big + n + (1 << 20), "\"}");
		return big;
	}
	return NULL;
}

static void test_requests(void **state)
{
	struct fake_ctl f;
	assert_int_equal(fake_ctl_start(&f, sock, answer, NULL), 0);
	char err[512];
	struct innet_ctl_client *c = innet_ctl_client_open(sock, 5, err, sizeof(err));
	assert_non_null(c);
	assert_string_equal(innet_ctl_client_path(c), sock);
	/* two requests on one connection */
	char *r = innet_ctl_client_request(c, "echo one", err, sizeof(err));
	assert_non_null(r);
	assert_string_equal(r, "{\"ok\": true, \"echo\": \"one\"}");
	free(r);
	r = innet_ctl_client_request(c, "echo two", err, sizeof(err));
	assert_string_equal(r, "{\"ok\": true, \"echo\": \"two\"}");
	free(r);
	/* a megabyte */
	r = innet_ctl_client_request(c, "big", err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(strlen(r), strlen("{\"ok\": true, \"pad\": \"\"}") + (1 << 20));
	free(r);
	innet_ctl_client_close(c);
	/* the answer in 7-byte pieces */
	atomic_store(&f.split, 7);
	c = innet_ctl_client_open(sock, 5, err, sizeof(err));
	r = innet_ctl_client_request(c, "echo pieces", err, sizeof(err));
	assert_non_null(r);
	assert_string_equal(r, "{\"ok\": true, \"echo\": \"pieces\"}");
	free(r);
	innet_ctl_client_close(c);
	assert_int_equal(atomic_load(&f.requests), 4);
	fake_ctl_stop(&f);
}

static void test_no_answer(void **state)
{
	struct fake_ctl f;
	assert_int_equal(fake_ctl_start(&f, sock, answer, NULL), 0);
	char err[512];
	struct innet_ctl_client *c = innet_ctl_client_open(sock, 0.3, err, sizeof(err));
	assert_non_null(c);
	uint64_t t0 = innet_now_ns();
	errno = 0;
	assert_null(innet_ctl_client_request(c, "silent", err, sizeof(err)));
	uint64_t took = innet_now_ns() - t0;
	assert_int_equal(errno, ETIMEDOUT);
	assert_non_null(strstr(err, "no response within 0.3 s"));
	assert_non_null(strstr(err, sock));
	assert_true(took >= 290000000ull); /* it waited its bound (no upper bound: a busy machine) */
	innet_ctl_client_close(c);
	/* the switch closes the connection instead of answering */
	atomic_store(&f.close_without_answer, true);
	c = innet_ctl_client_open(sock, 5, err, sizeof(err));
	assert_null(innet_ctl_client_request(c, "echo x", err, sizeof(err)));
	assert_int_equal(errno, ECONNRESET);
	assert_non_null(strstr(err, "the switch closed the connection"));
	innet_ctl_client_close(c);
	fake_ctl_stop(&f);
}

static void test_open_errors(void **state)
{
	char err[512], longp[200];
	errno = 0;
	assert_null(innet_ctl_client_open(sock, 1, err, sizeof(err)));   /* nothing there */
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err, "cannot connect to"));
	assert_non_null(strstr(err, "(is the switch running?)"));
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	assert_null(innet_ctl_client_open(longp, 1, err, sizeof(err)));
	assert_int_equal(errno, ENAMETOOLONG);
	assert_non_null(strstr(err, "socket path too long"));
	innet_ctl_client_close(NULL);
}

static void test_call(void **state)
{
	struct fake_ctl f;
	assert_int_equal(fake_ctl_start(&f, sock, answer, NULL), 0);
	char err[512];
	json_t *j = innet_ctl_call(sock, "echo hello", 5, err, sizeof(err));
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "echo")), "hello");
	json_decref(j);
	assert_null(innet_ctl_call(sock, "error", 5, err, sizeof(err)));
	assert_int_equal(errno, EPROTO);
	assert_non_null(strstr(err, "'error': no such register 'x'"));
	assert_null(innet_ctl_call(sock, "garbage", 5, err, sizeof(err)));
	assert_int_equal(errno, EBADMSG);
	assert_non_null(strstr(err, "not a JSON object"));
	assert_true(innet_ctl_answers(sock));
	fake_ctl_stop(&f);
	assert_false(innet_ctl_answers(sock));
	assert_null(innet_ctl_call(sock, "echo x", 5, err, sizeof(err)));
	assert_int_equal(errno, ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requests),
		cmocka_unit_test(test_no_answer),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_call),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

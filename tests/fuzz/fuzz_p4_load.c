/*
 * fuzz_p4_load.c — libFuzzer target: arbitrary bytes through the P4 loader
 * (src/p4/p4_load.c: BMv2 JSON into the IR), then, for what it accepts, the
 * state layout (p4_layout.c) and the code generator (p4_gen.c). Nothing is
 * compiled: the generated source is checked, not built.
 *
 * Invariants: a refused text comes with a message; an accepted program
 * either lays out and generates, or is refused there with a message; the
 * source generated is one NUL-terminated C text that defines the data path
 * (it ends by including p4rt_pipe.h); everything is freed (ASan's leak check).
 *
 * Seeds: tests/fuzz/corpus/p4_load (p4c's output for the project's test
 * programs in tests/p4).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p4/p4.h"
#include "p4/p4_ir.h"

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_p4_load: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                          \
			abort();                                                           \
		}                                                                          \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[2048];
	struct p4_prog *p = NULL;

	err[0] = '\0';
	int rc = p4_load((const char *)data, size, &p, err, sizeof(err));
	if (rc != 0) {
		CHECK(p == NULL);
		CHECK(rc < 0);
		CHECK(err[0] != '\0' || rc == -ENOMEM);
		return 0;
	}
	CHECK(p != NULL);
	struct p4_layout lay;
	err[0] = '\0';
	rc = p4_layout(p, &lay, err, sizeof(err));
	if (rc != 0) {
		CHECK(err[0] != '\0' || rc == -ENOMEM);
		p4_prog_free(p);
		return 0;
	}
	char *src = NULL;
	err[0] = '\0';
	rc = p4_gen(p, &lay, "fuzz", &src, err, sizeof(err));
	if (rc != 0) {
		CHECK(src == NULL);
		CHECK(err[0] != '\0' || rc == -ENOMEM);
	} else {
		CHECK(src != NULL);
		CHECK(strstr(src, "#include \"p4/p4rt_pipe.h\"") != NULL);
		free(src);
	}
	p4_prog_free(p);
	return 0;
}

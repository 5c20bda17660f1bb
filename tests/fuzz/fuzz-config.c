/* fuzz-config: the configuration file parser (src/config/cfgfile.c) and the policy
 * built on it (src/config/policy.c, src/config/parse.c) under libFuzzer, or under
 * fuzz-replay for the seed corpus and the regression cases.
 *
 * Each input is a whole configuration file "fuzz.conf", read with an empty
 * environment for the program "train.py". What must hold, whatever the
 * bytes (a violation is __builtin_trap(), a crash for libFuzzer):
 *   - on failure the message is not empty, one line (no '\n') and starts
 *     with "fuzz.conf:" (the file's line is named); a message cut short by
 *     a small buffer is a prefix of the full one, and the buffer is never
 *     overrun (it is malloc'd to its exact size, for ASan);
 *   - success or failure, and the message, do not depend on the program
 *     name: a [program] section that does not match is still checked;
 *   - on success, every GPU's limit is UINT64_MAX (none, from the default)
 *     or in [1, total] from a line of the file that exists;
 *   - every selector the rules name formats to text that parses back to
 *     the same selector, and its source is a line of the file. */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "config/parse.h"
#include "config/policy.h"

#define PATH "fuzz.conf"
#define PROGRAM "train.py"
#define GPUS 4
#define TOTAL (16ull * 1024 * 1024 * 1024)
#define ERR_LEN 2048
#define SHORT_ERR_LEN 17

#define CHECK(cond)                       \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

/* One parse: a fresh err buffer of exactly errlen bytes, pre-filled so a
 * message that is not NUL-terminated shows. */
static bool build(struct cumemcap_policy *p, const char *text, size_t len, const char *program,
		  char *err, size_t errlen)
{
	memset(err, 0x5a, errlen);
	return cumemcap_policy_build(p, no_env, PATH, text, len, program, err, errlen);
}

static void check_message(const char *err, size_t errlen)
{
	CHECK(memchr(err, '\0', errlen) != NULL);
	CHECK(err[0] != '\0');
	CHECK(strchr(err, '\n') == NULL);
	CHECK(strncmp(err, PATH ":", strlen(PATH ":")) == 0);
}

/* A source on success: the default, or a line of this file. */
static void check_source(const struct cumemcap_policy *p, const struct cumemcap_source *src,
			 unsigned lines)
{
	char buf[CUMEMCAP_PATH_MAX + 32];
	cumemcap_source_format(p, src, buf, sizeof(buf));
	CHECK(strchr(buf, '\n') == NULL);
	if (src->origin == CUMEMCAP_FROM_DEFAULT) {
		CHECK(strcmp(buf, "default") == 0);
		return;
	}
	/* The environment is empty: anything else came from the file. */
	CHECK(src->origin == CUMEMCAP_FROM_FILE);
	CHECK(src->line >= 1 && src->line <= lines);
	CHECK(strncmp(buf, PATH ":", strlen(PATH ":")) == 0);
}

struct selector_ctx {
	const struct cumemcap_policy *p;
	unsigned lines;
	size_t count;
};

static void on_selector(void *ctx, const struct cumemcap_selector *sel,
			const struct cumemcap_source *src)
{
	struct selector_ctx *c = ctx;
	char text[64], again[64];
	struct cumemcap_selector back;

	c->count++;
	CHECK(sel->kind == CUMEMCAP_SEL_ORDINAL || sel->kind == CUMEMCAP_SEL_UUID ||
	      sel->kind == CUMEMCAP_SEL_PCI);
	cumemcap_selector_format(sel, text, sizeof(text));
	CHECK(cumemcap_parse_selector(text, strlen(text), &back));
	CHECK(back.kind == sel->kind);
	cumemcap_selector_format(&back, again, sizeof(again));
	CHECK(strcmp(text, again) == 0);
	CHECK(src->origin == CUMEMCAP_FROM_FILE);
	check_source(c->p, src, c->lines);
}

static void check_policy(const struct cumemcap_policy *p, unsigned lines)
{
	for (int dev = 0; dev < GPUS; dev++) {
		unsigned char uuid[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
		char pci[32];
		struct cumemcap_source src;

		uuid[15] = (unsigned char)(dev + 1);
		snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + dev);
		memset(&src, 0xa5, sizeof(src));
		uint64_t limit = cumemcap_policy_limit(p, false, dev, uuid, pci, TOTAL, &src);
		if (limit == UINT64_MAX)
			CHECK(src.origin == CUMEMCAP_FROM_DEFAULT);
		else
			CHECK(limit >= 1 && limit <= TOTAL && src.origin == CUMEMCAP_FROM_FILE);
		check_source(p, &src, lines);
	}
	/* Process-wide settings: the default or a line of the file. */
	check_source(p, &p->growth_src, lines);
	check_source(p, &p->log_src, lines);
	check_source(p, &p->debug_src, lines);

	struct selector_ctx ctx = { p, lines, 0 };
	cumemcap_policy_selectors(p, on_selector, &ctx);
	CHECK(ctx.count <= 3 * CUMEMCAP_MAX_DEVICE_RULES + CUMEMCAP_MAX_DEVICE_SECTIONS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The text itself in a buffer of exactly its size (it need not be
	 * NUL-terminated), so ASan sees a read past its end. */
	char *text = malloc(size ? size : 1);
	char *err = malloc(ERR_LEN), *err2 = malloc(ERR_LEN), *short_err = malloc(SHORT_ERR_LEN);
	struct cumemcap_policy *p = malloc(sizeof(*p));
	CHECK(text && err && err2 && short_err && p);
	if (size)
		memcpy(text, data, size);

	unsigned lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += text[i] == '\n';

	bool ok = build(p, text, size, PROGRAM, err, ERR_LEN);
	if (ok) {
		check_policy(p, lines);
	} else {
		check_message(err, ERR_LEN);
		/* A short buffer: the same message, cut, never overrun. */
		CHECK(!build(p, text, size, PROGRAM, short_err, SHORT_ERR_LEN));
		CHECK(memchr(short_err, '\0', SHORT_ERR_LEN) != NULL);
		CHECK(strncmp(short_err, err, strlen(short_err)) == 0);
	}

	/* The first line of the input (at most CUMEMCAP_PROGRAM_MAX - 1 bytes,
	 * up to a NUL) as the program name: which [program] section matches
	 * changes, whether the file is valid does not. */
	char program[CUMEMCAP_PROGRAM_MAX];
	size_t n = 0;
	while (n < size && n < sizeof(program) - 1 && data[n] != '\n' && data[n] != '\0') {
		program[n] = (char)data[n];
		n++;
	}
	program[n] = '\0';
	bool ok2 = build(p, text, size, program, err2, ERR_LEN);
	CHECK(ok2 == ok);
	if (ok2) {
		CHECK(strcmp(p->program, program) == 0);
		check_policy(p, lines);
	} else {
		check_message(err2, ERR_LEN);
		CHECK(strcmp(err, err2) == 0);
	}

	free(p);
	free(short_err);
	free(err2);
	free(err);
	free(text);
	return 0;
}

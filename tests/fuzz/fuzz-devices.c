/* fuzz-devices: the device-limit list (CUMEMCAP_DEVICE_LIMITS, the file's
 * device_limits) parser (src/config/parse.c) and the setting built on it
 * (src/config/policy.c), under libFuzzer or fuzz-replay.
 *
 * The input up to its first NUL byte is the list. What must hold, whatever
 * the bytes (a violation is __builtin_trap()):
 *   - on failure the output is untouched and the message is one line, not
 *     empty; a message cut short by a small buffer is a prefix of the full
 *     one and the buffer is never overrun;
 *   - the variable agrees with the parser on values of the form every value
 *     must have (cumemcap_policy_plain_form), and its refusal names it;
 *   - on success there are 1..CUMEMCAP_MAX_DEVICE_RULES rules, each
 *     selector formats to text that parses back to the same selector, no
 *     two selectors are equal, and every GPU's limit (of a policy built
 *     from the variable) is none or within [0, total] of it. */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "config/parse.h"
#include "config/policy.h"

#define CHECK(cond)                       \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

#define TOTAL (16ull * 1024 * 1024 * 1024)
#define SHORT_ERR_LEN 23

static const char *value;

static const char *the_var(const char *name)
{
	return strcmp(name, "CUMEMCAP_DEVICE_LIMITS") == 0 ? value : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct cumemcap_device_rules *rules = malloc(sizeof(*rules)), *before = malloc(sizeof(*rules));
	struct cumemcap_policy *p = malloc(sizeof(*p));
	char *err = malloc(1024), *short_err = malloc(SHORT_ERR_LEN), perr[2048];
	CHECK(text && rules && before && p && err && short_err);
	memcpy(text, data, size);
	text[size] = '\0';
	memset(rules, 0xa5, sizeof(*rules));
	memcpy(before, rules, sizeof(*rules));

	bool ok = cumemcap_parse_device_rules(text, rules, err, 1024);
	if (!ok) {
		CHECK(memcmp(rules, before, sizeof(*rules)) == 0);
		CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
		memset(short_err, 0x5a, SHORT_ERR_LEN);
		CHECK(!cumemcap_parse_device_rules(text, rules, short_err, SHORT_ERR_LEN));
		CHECK(memchr(short_err, '\0', SHORT_ERR_LEN) != NULL);
		CHECK(strncmp(short_err, err, strlen(short_err)) == 0);
	} else {
		CHECK(rules->count >= 1 && rules->count <= CUMEMCAP_MAX_DEVICE_RULES);
		for (size_t i = 0; i < rules->count; i++) {
			const struct cumemcap_selector *sel = &rules->rule[i].selector;
			char a[64], b[64];
			struct cumemcap_selector back;
			cumemcap_selector_format(sel, a, sizeof(a));
			CHECK(cumemcap_parse_selector(a, strlen(a), &back));
			CHECK(back.kind == sel->kind);
			cumemcap_selector_format(&back, b, sizeof(b));
			CHECK(strcmp(a, b) == 0);
			for (size_t j = 0; j < i; j++) {
				char c[64];
				cumemcap_selector_format(&rules->rule[j].selector, c, sizeof(c));
				CHECK(rules->rule[j].selector.kind != sel->kind || strcmp(a, c) != 0);
			}
			CHECK(rules->rule[i].amount.kind == CUMEMCAP_AMOUNT_BYTES ||
			      rules->rule[i].amount.kind == CUMEMCAP_AMOUNT_PERCENT);
		}
	}

	value = text;
	memset(perr, 0x5a, sizeof(perr));
	bool pok = cumemcap_policy_build(p, the_var, "", "", 0, "train.py", perr, sizeof(perr));
	bool plain = cumemcap_policy_plain_form(text);
	CHECK(pok == (ok && plain));
	for (int dev = 0; pok && dev < 4; dev++) {
		unsigned char uuid[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
		char pci[32];
		struct cumemcap_source src;
		uuid[15] = (unsigned char)(dev + 1);
		snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + dev);
		uint64_t limit = cumemcap_policy_limit(p, false, dev, uuid, pci, TOTAL, &src);
		CHECK(src.origin == CUMEMCAP_FROM_DEFAULT ? limit == UINT64_MAX : limit <= TOTAL);
	}
	if (!pok) {
		CHECK(memchr(perr, '\0', sizeof(perr)) != NULL && strchr(perr, '\n') == NULL);
		/* Named, then the value: quoted "...", or as given when its
		 * own quotes are the fault. */
		CHECK(strncmp(perr, "CUMEMCAP_DEVICE_LIMITS=", 23) == 0);
		CHECK(perr[23] == '"' || (!plain && perr[23] == text[0]));
	}

	free(short_err);
	free(err);
	free(p);
	free(before);
	free(rules);
	free(text);
	return 0;
}

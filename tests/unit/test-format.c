/* Unit tests for src/log/format.c: the text the records and the stderr
 * summary are made of. */
#include "config.h"

#include <string.h>

#include "log/format.h"
#include "platform/msg.h"
#include "test-common.h"

/* A size in the records and the summary reads as cumemcap_fmt_size writes
 * it in the messages, up to the largest uint64_t (16 EiB less a byte). */
START_TEST(format_size_matches_messages)
{
	static const uint64_t sizes[] = {
		0,
		1023,
		1536,
		(uint64_t)3 << 29,
		((uint64_t)1 << 60) - 1,
		(uint64_t)1 << 60,
		((uint64_t)3 << 59) + 12345,
		UINT64_MAX,
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char buf[64], want[64];
		struct out o = { .p = buf, .cap = sizeof(buf) - 1, .flush_fd = -1 };
		out_size(&o, sizes[i]);
		buf[o.len] = '\0';
		cumemcap_fmt_size(sizes[i], want, sizeof(want));
		ck_assert_msg(!o.lost, "size %zu did not fit", i);
		ck_assert_str_eq(buf, want);
	}
}
END_TEST

/* A string in a record is valid UTF-8 whatever its bytes: a byte that
 * starts no valid sequence (a lone continuation, an overlong form, a
 * surrogate, a lead byte above F4) becomes \ufffd and the rest is kept. */
START_TEST(format_json_string_is_valid_utf8)
{
	static const struct {
		const char *in, *want;
	} rows[] = {
		{ "plain", "\"plain\"" },
		{ "caf\xc3\xa9", "\"caf\xc3\xa9\"" },
		{ "\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"" },
		{ "a\x80" "b", "\"a\\ufffdb\"" },
		{ "\xc0\xaf", "\"\\ufffd\\ufffd\"" },
		{ "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },
		{ "\xf5\x80\x80", "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xf7\xbf\xbf", "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xf8\x80\x80", "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xff", "\"\\ufffd\"" },
		{ NULL, NULL },
	};
	for (size_t i = 0; rows[i].in; i++) {
		char buf[128];
		struct out o = { .p = buf, .cap = sizeof(buf) - 1, .flush_fd = -1 };
		out_json(&o, rows[i].in);
		buf[o.len] = '\0';
		ck_assert_msg(strcmp(buf, rows[i].want) == 0, "row %zu: %s", i, buf);
	}
}
END_TEST

TEST_SUITE(format)
{
	Suite *s = suite_create("format");
	ADD_TEST(s, format_size_matches_messages);
	ADD_TEST(s, format_json_string_is_valid_utf8);
	return s;
}

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

TEST_SUITE(format)
{
	Suite *s = suite_create("format");
	ADD_TEST(s, format_size_matches_messages);
	return s;
}

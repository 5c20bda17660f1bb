/* Unit tests for cumemcap report's own layers: the strict JSON reader
 * (src/tools/report/json.c: every accepted and rejected form, exact 64-bit
 * integers, string decoding, depth, the arena) and the text helpers
 * (src/tools/report/text.c: sizes, durations, quoting). Tables end in a sentinel
 * row (text == NULL). A seeded mutation run feeds the parser damaged
 * records (ASan/UBSan builds check every byte it touches). */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "text.h"

static struct report_json_arena arena;

static const struct report_json *parse(const char *text)
{
	report_json_reset(&arena);
	return report_json_parse(&arena, text, strlen(text));
}

/* ---- syntax ---------------------------------------------------------------- */

START_TEST(json_accepts_valid_text)
{
	static const char *const ok[] = {
		"{}", " {} ", "\t{\r\n}\n", "[]", "[1,2,3]", "{\"a\":{\"b\":[null,true,false]}}",
		"\"x\"", "0", "-0", "1.5e3", "1E-2", "-12.5e+7", "true", "false", "null",
		"{\"\":0}", "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "{ \"a\" : 1 , \"b\" : [ ] }",
		"123456789012345678901234567890", "1e400", NULL,
	};
	for (const char *const *t = ok; *t; t++)
		ck_assert_msg(parse(*t) != NULL, "rejected: %s", *t);
}
END_TEST

START_TEST(json_rejects_invalid_text)
{
	static const char *const bad[] = {
		"", " ", "{", "}", "{,}", "{\"a\":1,}", "[1,]", "[,1]", "[1 2]", "{\"a\" 1}",
		"{a:1}", "{'a':1}", "{\"a\":1 \"b\":2}", "01", "-01", "-", "1.", ".5", "1e", "1e+",
		"+1", "NaN", "Infinity", "-Infinity", "tru", "nul", "True", "\"abc", "\"\\x\"",
		"\"\\u12\"", "\"\\u12g4\"", "\"a\tb\"", "\"a\nb\"", "{} x", "{}{}", "/* c */ {}",
		"{\"a\":1}//", "[", "0x10", "1 2", "\"\\\"", "{\"a\":}", "{\"a\"}", "[1,,2]",
		"\xef\xbb\xbf{}", NULL,
	};
	for (const char *const *t = bad; *t; t++)
		ck_assert_msg(parse(*t) == NULL, "accepted: %s", *t);

	/* A NUL byte is not whitespace. */
	report_json_reset(&arena);
	ck_assert(report_json_parse(&arena, "{}\0", 3) == NULL);
	ck_assert(report_json_parse(&arena, "{\"a\":\0}", 7) == NULL);
	/* The length bounds the text: no read past it. */
	ck_assert(report_json_parse(&arena, "{\"a\":1}", 6) == NULL);
	ck_assert(report_json_parse(&arena, "\"ab", 2) == NULL);
}
END_TEST

START_TEST(json_depth_is_bounded)
{
	char text[2 * (REPORT_JSON_MAX_DEPTH + 2) + 1];

	for (int depth = REPORT_JSON_MAX_DEPTH; depth <= REPORT_JSON_MAX_DEPTH + 1; depth++) {
		memset(text, '[', (size_t)depth);
		memset(text + depth, ']', (size_t)depth);
		text[2 * depth] = '\0';
		if (depth <= REPORT_JSON_MAX_DEPTH)
			ck_assert_msg(parse(text) != NULL, "depth %d rejected", depth);
		else
			ck_assert_msg(parse(text) == NULL, "depth %d accepted", depth);
	}
}
END_TEST

/* ---- numbers ---------------------------------------------------------------- */

struct number_case {
	const char *text;
	bool is_u64;
	uint64_t u64;
	double num;
};

START_TEST(json_numbers_exact)
{
	static const struct number_case cases[] = {
		{ "0", true, 0, 0 },
		{ "1", true, 1, 1 },
		{ "9007199254740992", true, UINT64_C(9007199254740992), 9007199254740992.0 },
		{ "9007199254740993", true, UINT64_C(9007199254740993), 9007199254740992.0 },
		{ "18446744073709551615", true, UINT64_MAX, 18446744073709551616.0 },
		{ "18446744073709551616", false, 0, 18446744073709551616.0 },
		{ "99999999999999999999", false, 0, 1e20 },
		{ "-1", false, 0, -1 },
		{ "-0", false, 0, 0 },
		{ "1.0", false, 0, 1 },
		{ "1e3", false, 0, 1000 },
		{ "1700000000.125", false, 0, 1700000000.125 },
		{ NULL, false, 0, 0 },
	};
	for (const struct number_case *c = cases; c->text; c++) {
		const struct report_json *v = parse(c->text);
		ck_assert_msg(v && v->kind == REPORT_JSON_NUMBER, "%s", c->text);
		ck_assert_msg(v->is_u64 == c->is_u64, "%s: is_u64 %d", c->text, v->is_u64);
		if (c->is_u64)
			ck_assert_msg(v->u64 == c->u64, "%s: %" PRIu64, c->text, v->u64);
		ck_assert_msg(v->num == c->num, "%s: %.17g", c->text, v->num);
	}
}
END_TEST

/* ---- strings ---------------------------------------------------------------- */

struct string_case {
	const char *text;
	const char *decoded;
	size_t len;
};

START_TEST(json_strings_decoded)
{
	static const struct string_case cases[] = {
	    {"\"plain\"", "plain", 5},
	    {"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8},
	    {"\"\\u00e9\"", "\xc3\xa9", 2},
	    {"\"\\u20AC\"", "\xe2\x82\xac", 3},
	    {"\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4},
	    {"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9},
	    /* Taken as it comes: stray bytes and lone surrogates become U+FFFD. */
	    {"\"a\xff"
	     "b\"",
	     "a\xef\xbf\xbd"
	     "b",
	     5},
	    {"\"\xc0\xaf\"", "\xef\xbf\xbd\xef\xbf\xbd", 6},
	    {"\"\xed\xa0\x80\"", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 9},
	    {"\"\xf4\x90\x80\x80\"", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 12},
	    {"\"\\ud800\"", "\xef\xbf\xbd", 3},
	    {"\"\\udc00x\"", "\xef\xbf\xbdx", 4},
	    {"\"\\ud800\\u0041\"",
	     "\xef\xbf\xbd"
	     "A",
	     4},
	    {"\"a\\u0000b\"", "a", 3},
	    {NULL, NULL, 0},
	};
	for (const struct string_case *c = cases; c->text; c++) {
		const struct report_json *v = parse(c->text);
		ck_assert_msg(v && v->kind == REPORT_JSON_STRING, "%s", c->text);
		ck_assert_msg(v->len == c->len, "%s: len %zu", c->text, v->len);
		ck_assert_msg(memcmp(v->str, c->decoded, strlen(c->decoded)) == 0, "%s", c->text);
		ck_assert(v->str[v->len] == '\0');
	}
}
END_TEST

/* ---- objects ---------------------------------------------------------------- */

START_TEST(json_object_members)
{
	const struct report_json *o = parse("{\"a\":1,\"b\":[1,\"x\",{}],\"a\":2,\"c\":null}");

	ck_assert(o && o->kind == REPORT_JSON_OBJECT);
	ck_assert_uint_eq(o->len, 4);
	ck_assert_uint_eq(report_json_get(o, "a")->u64, 2); /* the last of a repeated name */
	const struct report_json *b = report_json_get(o, "b");
	ck_assert(b && b->kind == REPORT_JSON_ARRAY && b->len == 3);
	ck_assert(b->child->kind == REPORT_JSON_NUMBER &&
		  b->child->next->kind == REPORT_JSON_STRING);
	ck_assert(b->child->next->next->kind == REPORT_JSON_OBJECT && !b->child->next->next->next);
	ck_assert(report_json_get(o, "c")->kind == REPORT_JSON_NULL);
	ck_assert(report_json_get(o, "d") == NULL);
	ck_assert(report_json_get(b, "a") == NULL); /* not an object */
	ck_assert(report_json_get(NULL, "a") == NULL);
}
END_TEST

/* A line far larger than one chunk, then small ones: the arena grows for it
 * and gives it back at the reset. */
START_TEST(json_arena_large_line)
{
	size_t n = 200000;
	char *text = malloc(n * 4 + 3);
	size_t len = 0;

	text[len++] = '[';
	for (size_t i = 0; i < n; i++) {
		memcpy(text + len, i ? ",\"\"" : "\"\"", i ? 3 : 2);
		len += i ? 3 : 2;
	}
	text[len++] = ']';
	report_json_reset(&arena);
	const struct report_json *v = report_json_parse(&arena, text, len);
	ck_assert(v && v->len == n);
	for (int i = 0; i < 10; i++)
		ck_assert(parse("{\"v\":1}") != NULL);
	free(text);
}
END_TEST

/* Damaged copies of a real record: the parser must never read out of
 * bounds, whatever it answers. A fixed xorshift seed: the same damage on
 * every run. */
START_TEST(json_mutations)
{
	static const char record[] =
	    "{\"v\":1,\"type\":\"sample\",\"t\":1700000005.5,\"pid\":4242,\"gpus\":[{\"gpu\":0,"
	    "\"live\":18446744073709551615,\"pooled\":0,\"reserved\":9007199254740993,"
	    "\"driver_used\":null,\"context_overhead\":null,\"name\":\"\\u00e9\\ud83d\\ude00\"}]}";
	const char alphabet[] = "{}[],:\"\\u0123456789.eE+-tfn \xff\xc3";
	uint64_t x = 0x9e3779b97f4a7c15u;
	char buf[sizeof(record)];

	for (int round = 0; round < 20000; round++) {
		memcpy(buf, record, sizeof(record));
		size_t len = sizeof(record) - 1;
		for (int k = 0; k < 1 + round % 4; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t at = (size_t)(x % len);
			switch ((x >> 32) % 3) {
			case 0: buf[at] = alphabet[(x >> 40) % (sizeof(alphabet) - 1)]; break;
			case 1: len = at; break; /* torn */
			default: memmove(buf + at, buf + at + 1, len - at - 1); len--; break;
			}
			if (len == 0)
				break;
		}
		/* An exact-size heap copy, so ASan sees any read past the end. */
		char *copy = malloc(len ? len : 1);
		memcpy(copy, buf, len);
		report_json_reset(&arena);
		const struct report_json *v = report_json_parse(&arena, copy, len);
		if (v && v->kind == REPORT_JSON_OBJECT)
			(void)report_json_get(v, "gpus");
		free(copy);
	}
}
END_TEST

/* ---- text ----------------------------------------------------------------------- */

struct size_case {
	uint64_t bytes;
	const char *text;
};

START_TEST(text_sizes)
{
	static const struct size_case cases[] = {
		{ 0, "0 B" },
		{ 1023, "1023 B" },
		{ 1024, "1.00 KiB" },
		{ 1536, "1.50 KiB" },
		{ 1048575, "1023.99 KiB" },
		{ UINT64_C(1610612736), "1.50 GiB" },
		{ UINT64_C(4294967295), "3.99 GiB" },
		{ UINT64_C(1) << 53, "8.00 PiB" },
		{ UINT64_C(1) << 60, "1.00 EiB" },
		{ (UINT64_C(1) << 60) + (UINT64_C(1) << 59), "1.50 EiB" },
		{ UINT64_MAX, "15.99 EiB" },
		{ 0, NULL },
	};
	char buf[32];
	for (const struct size_case *c = cases; c->text; c++)
		ck_assert_str_eq(report_fmt_size(c->bytes, buf, sizeof(buf)), c->text);
}
END_TEST

START_TEST(text_durations)
{
	static const struct {
		double s;
		const char *text;
	} cases[] = {
		{ 0, "0.0 s" }, { 12.25, "12.2 s" }, { 59.94, "59.9 s" }, { 59.95, "1m00s" },
		{ 65.2, "1m05s" }, { 3600, "1h00m00s" }, { 7384.6, "2h03m05s" }, { -1, "?" },
		{ 0, NULL },
	};
	char buf[32];
	for (size_t i = 0; cases[i].text; i++)
		ck_assert_str_eq(report_fmt_duration(cases[i].s, buf, sizeof(buf)), cases[i].text);
	ck_assert_str_eq(report_fmt_time(1700000000.9, buf, sizeof(buf)),
			 "2023-11-14 22:13:20 UTC");
	ck_assert_str_eq(report_fmt_time(-5, buf, sizeof(buf)), "?");
	ck_assert_str_eq(report_signal_name(9), "SIGKILL");
	ck_assert_str_eq(report_signal_name(11), "SIGSEGV");
	ck_assert(report_signal_name(0) == NULL && report_signal_name(1000) == NULL);
}
END_TEST

START_TEST(text_rfc3339)
{
	static const struct {
		const char *text;
		double t; /* < 0: rejected */
	} cases[] = {
		{ "2023-11-14T22:13:20Z", 1700000000 },
		{ "2023-11-14T22:13:20.250Z", 1700000000.25 },
		{ "2023-11-14t22:13:20z", 1700000000 },
		{ "2023-11-14T23:13:20+01:00", 1700000000 },
		{ "2023-11-14T21:43:20-00:30", 1700000000 },
		{ "2023-11-14 22:13:20", 1700000000 },
		{ "2023-11-14 22:13", 1699999980 },
		{ "2023-11-14", 1699920000 },
		{ "2024-02-29", 1709164800 },
		{ "2023-02-29", -1 },
		{ "2023-11-14T22:13Z", -1 },  /* RFC 3339 has its seconds */
		{ "2023-11-14T22:13:20", -1 }, /* and its zone */
		{ "2023-11-14 22:13:20Zx", -1 },
		{ "2023-13-01", -1 },
		{ "2023-11-14T24:00:00Z", -1 },
		{ "2023-11-14T22:13:20.Z", -1 },
		{ "1h", -1 },
		{ "", -1 },
	};
	char buf[48];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double t = -1;
		bool ok = report_parse_rfc3339(cases[i].text, &t);
		ck_assert_msg(ok == (cases[i].t >= 0), "%s", cases[i].text);
		if (ok)
			ck_assert_msg(t - cases[i].t < 1e-6 && cases[i].t - t < 1e-6, "%s: %f", cases[i].text, t);
	}
	ck_assert_str_eq(report_fmt_rfc3339(1700000000.1239, buf, sizeof(buf)),
			 "2023-11-14T22:13:20.123Z");
	ck_assert_str_eq(report_fmt_clock(1700000000.9, buf, sizeof(buf)), "22:13:20");
}
END_TEST

START_TEST(text_quoting)
{
	static const struct {
		const char *arg, *quoted;
	} cases[] = {
		{ "python3", "python3" },
		{ "--lr=0.1,x@y:z/%+", "--lr=0.1,x@y:z/%+" },
		{ "", "''" },
		{ "a b", "'a b'" },
		{ "it's", "'it'\"'\"'s'" },
		{ "a\nb\x1b", "'a\\x0ab\\x1b'" },
		{ "\xc3\xa9", "'\xc3\xa9'" },
		{ "$HOME", "'$HOME'" },
		{ NULL, NULL },
	};
	for (size_t i = 0; cases[i].arg; i++) {
		struct report_buf b = { 0 };
		report_buf_shell_arg(&b, cases[i].arg);
		char *s = report_buf_take(&b);
		ck_assert_str_eq(s, cases[i].quoted);
		free(s);
	}
	struct report_buf b = { 0 };
	report_buf_safe(&b, "a\tb\x7f" "c\\");
	char *s = report_buf_take(&b);
	ck_assert_str_eq(s, "a\\x09b\\x7fc\\");
	free(s);
	ck_assert_uint_eq(report_text_width("a\xc3\xa9\xe2\x82\xac"), 3);
}
END_TEST

static Suite *report_suite(void)
{
	Suite *s = suite_create("report");
	struct {
		const char *name;
		const TTest *test;
	} tests[] = {
		{ "json_accepts_valid_text", json_accepts_valid_text },
		{ "json_rejects_invalid_text", json_rejects_invalid_text },
		{ "json_depth_is_bounded", json_depth_is_bounded },
		{ "json_numbers_exact", json_numbers_exact },
		{ "json_strings_decoded", json_strings_decoded },
		{ "json_object_members", json_object_members },
		{ "json_arena_large_line", json_arena_large_line },
		{ "json_mutations", json_mutations },
		{ "text_sizes", text_sizes },
		{ "text_durations", text_durations },
		{ "text_rfc3339", text_rfc3339 },
		{ "text_quoting", text_quoting },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = tcase_create(tests[i].name);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(report_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	report_json_free(&arena);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

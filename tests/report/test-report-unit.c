/* Unit tests for cumemcap report's own layers: the reading of a log line
 * through json-c (src/tools/report/jsonline.c: what is and is not a line,
 * exact 64-bit integers, members) and the text helpers
 * (src/tools/report/text.c: sizes, durations, quoting, UTF-8). Tables end in
 * a sentinel row (text == NULL). A seeded mutation run feeds the reader
 * damaged records (ASan/UBSan builds check every byte it touches). */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonline.h"
#include "scale.h"
#include "sizing.h"
#include "text.h"
#include "wrap.h"

static struct json_tokener *tok;
static struct json_object *last;

/* The line's value, released at the next call. */
static struct json_object *parse_len(const char *text, size_t len)
{
	json_object_put(last);
	last = report_json_line(tok, text, len);
	return last;
}

static struct json_object *parse(const char *text)
{
	return parse_len(text, strlen(text));
}

/* ---- syntax ---------------------------------------------------------------- */

START_TEST(json_accepts_valid_text)
{
	static const char *const ok[] = {
		"{}", " {} ", "\t{\r\n}\n", "[]", "[1,2,3]", "{\"a\":{\"b\":[null,true,false]}}",
		"\"x\"", "[0]", "[-0]", "[1.5e3]", "[1E-2]", "[-12.5e+7]",
		"{\"\":0}", "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "{ \"a\" : 1 , \"b\" : [ ] }",
		"[1e400]", "{\"t\":1700000000.125}", NULL,
	};
	for (const char *const *t = ok; *t; t++)
		ck_assert_msg(parse(*t) != NULL, "rejected: %s", *t);
}
END_TEST

START_TEST(json_rejects_invalid_text)
{
	static const char *const bad[] = {
		"", " ", "{", "}", "{,}", "{\"a\":1,}", "[1,]", "[,1]", "[1 2]", "{\"a\" 1}",
		"{a:1}", "{\"a\":1 \"b\":2}", "01", "-01", "-", "1.", ".5", "1e", "1e+",
		"+1", "NaN", "Infinity", "-Infinity", "[NaN]", "{\"t\":NaN}", "{\"a\":[-Infinity]}",
		"tru", "nul", "True", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "{} x",
		"{}{}", "/* c */ {}", "{\"a\":1}//", "[", "0x10", "1 2", "\"\\\"", "{\"a\":}",
		"{\"a\"}", "[1,,2]", "\xef\xbb\xbf{}", NULL,
	};
	for (const char *const *t = bad; *t; t++)
		ck_assert_msg(parse(*t) == NULL, "accepted: %s", *t);

	/* A NUL byte is not whitespace. */
	ck_assert(parse_len("{}\0", 3) == NULL);
	ck_assert(parse_len("{\"a\":\0}", 7) == NULL);
	/* The length bounds the text: no read past it. */
	ck_assert(parse_len("{\"a\":1}", 6) == NULL);
	ck_assert(parse_len("\"ab", 2) == NULL);
}
END_TEST

START_TEST(json_depth_is_bounded)
{
	char text[2 * 40 + 1];

	for (int depth = 1; depth <= 40; depth++) {
		memset(text, '[', (size_t)depth);
		memset(text + depth, ']', (size_t)depth);
		text[2 * depth] = '\0';
		if (depth <= 32)
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
};

START_TEST(json_numbers_exact)
{
	static const struct number_case cases[] = {
		{ "0", true, 0 },
		{ "1", true, 1 },
		{ "9007199254740992", true, UINT64_C(9007199254740992) },
		{ "9007199254740993", true, UINT64_C(9007199254740993) },
		{ "9223372036854775808", true, UINT64_C(9223372036854775808) },
		{ "18446744073709551614", true, UINT64_MAX - 1 },
		{ "18446744073709551615", true, UINT64_MAX },
		{ "-1", false, 0 },
		{ "-9223372036854775808", false, 0 },
		{ "1.0", false, 0 },
		{ "1e3", false, 0 },
		{ "1700000000.125", false, 0 },
		{ NULL, false, 0 },
	};
	for (const struct number_case *c = cases; c->text; c++) {
		char line[64];
		snprintf(line, sizeof(line), "{\"n\":%s}", c->text);
		struct json_object *v = report_json_member(parse(line), "n");
		uint64_t got = 0;
		ck_assert_msg(v && report_json_is_number(v), "%s", c->text);
		ck_assert_msg(report_json_is_u64(v, &got) == c->is_u64, "%s: is_u64", c->text);
		if (c->is_u64)
			ck_assert_msg(got == c->u64, "%s: %" PRIu64, c->text, got);
	}
	ck_assert(!report_json_is_u64(report_json_member(parse("{\"n\":\"1\"}"), "n"), &(uint64_t){ 0 }));
	ck_assert(!report_json_is_u64(NULL, &(uint64_t){ 0 }));
}
END_TEST

/* ---- objects ---------------------------------------------------------------- */

START_TEST(json_object_members)
{
	struct json_object *o = parse("{\"a\":1,\"b\":[1,\"x\",{}],\"a\":2,\"c\":null}");
	uint64_t a = 0;

	ck_assert(o && json_object_is_type(o, json_type_object));
	ck_assert(report_json_is_u64(report_json_member(o, "a"), &a));
	ck_assert_uint_eq(a, 2); /* the last of a repeated name */
	struct json_object *b = report_json_member(o, "b");
	ck_assert_uint_eq(report_json_length(b), 3);
	ck_assert(report_json_is_number(report_json_element(b, 0)));
	ck_assert(report_json_is_string(report_json_element(b, 1)));
	ck_assert(json_object_is_type(report_json_element(b, 2), json_type_object));
	/* null and absent are both no value; only has_member tells them apart. */
	ck_assert(report_json_is_null(report_json_member(o, "c")));
	ck_assert(report_json_has_member(o, "c"));
	ck_assert(report_json_is_null(report_json_member(o, "d")));
	ck_assert(!report_json_has_member(o, "d"));
	ck_assert(report_json_member(b, "a") == NULL); /* not an object */
	ck_assert(report_json_member(NULL, "a") == NULL);
	ck_assert_uint_eq(report_json_length(o), 0); /* not an array */
}
END_TEST

/* Damaged copies of a real record: the reader must never read out of
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
		struct json_object *v = parse_len(copy, len);
		struct json_object *gpus = report_json_member(v, "gpus");
		for (size_t i = 0; i < report_json_length(gpus); i++)
			(void)report_json_member(report_json_element(gpus, i), "live");
		free(copy);
	}
}
END_TEST

/* ---- --suggest's sizes ---------------------------------------------------------- */

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

struct limit_case {
	uint64_t peak, limit;
};

START_TEST(suggest_limits)
{
	static const struct limit_case cases[] = {
		{ 0, 256 * MIB },                         /* the margin alone */
		{ 1, 512 * MIB },                         /* 256 MiB + 1, up to the next step */
		{ 256 * MIB, 512 * MIB },
		{ 3535798272, 3840 * MIB },               /* 3.29 GiB + a tenth = 3.62 GiB */
		{ 4 * GIB, 4608 * MIB },                  /* 4.4 GiB: steps of 512 MiB past 4 GiB */
		{ 10 * GIB, 11 * GIB },                   /* a tenth, 1 GiB, exactly on a step */
		{ 15 * GIB, 17 * GIB },                   /* 16.5 GiB: steps of 1 GiB past 16 GiB */
		{ 70 * GIB, 80 * GIB },                   /* 77 GiB: steps of 4 GiB past 64 GiB */
		{ UINT64_MAX, UINT64_MAX - (UINT64_MAX % (4 * GIB)) },
		{ 0, 0 },
	};
	for (const struct limit_case *c = cases; c->limit; c++)
		ck_assert_msg(report_suggest_limit(c->peak) == c->limit, "%" PRIu64 ": %" PRIu64,
			      c->peak, report_suggest_limit(c->peak));
	ck_assert_uint_eq(report_suggest_margin(GIB), 256 * MIB);
	ck_assert_uint_eq(report_suggest_margin(10 * GIB), GIB);
	ck_assert_uint_eq(report_suggest_margin(UINT64_MAX), UINT64_MAX / 10);
}
END_TEST

struct limit_text {
	uint64_t bytes;
	const char *text;
};

START_TEST(suggest_limit_text)
{
	static const struct limit_text cases[] = {
		{ 5 * GIB, "5GiB" },           { 4608 * MIB, "4.5GiB" },   { 4352 * MIB, "4.25GiB" },
		{ 1280 * MIB, "1.25GiB" },    { 1792 * MIB, "1.75GiB" },  { 768 * MIB, "768MiB" },
		{ 256 * MIB, "256MiB" },      { GIB, "1GiB" },             { 1536 * MIB, "1.5GiB" },
		{ 3, "3" },                   { GIB + 1, "1073741825" },   { 0, NULL },
	};
	char buf[48];
	for (const struct limit_text *c = cases; c->text; c++)
		ck_assert_str_eq(report_fmt_limit(c->bytes, buf, sizeof(buf)), c->text);
}
END_TEST

/* ---- the plot's titles and scales ------------------------------------------------ */

START_TEST(wrap_between_clauses)
{
	struct report_wrapped w;

	/* The demo's title: the GPU's clause stays whole. */
	report_wrap(&w, "cumemcap-demo-workload, pid 4242 on HOST, GPU 0 (GPU-fa4ec0da-0000-4000-"
			"8000-000000000000, nvidia-smi 0), limit 4.00 GiB", 100);
	ck_assert_uint_eq(w.n, 2);
	ck_assert_str_eq(w.lines[0], "cumemcap-demo-workload, pid 4242 on HOST,");
	ck_assert_str_eq(w.lines[1], "GPU 0 (GPU-fa4ec0da-0000-4000-8000-000000000000, "
				     "nvidia-smi 0), limit 4.00 GiB");
	report_wrapped_free(&w);
	/* A clause longer than a line: word by word until the rest of it fits
	 * a line; a word longer than a line: cut. */
	report_wrap(&w, "aaaa bbbb cccc, dddddddddddd", 10);
	ck_assert_uint_eq(w.n, 4);
	ck_assert_str_eq(w.lines[0], "aaaa");
	ck_assert_str_eq(w.lines[1], "bbbb cccc,");
	ck_assert_str_eq(w.lines[2], "dddddddddd");
	ck_assert_str_eq(w.lines[3], "dd");
	report_wrapped_free(&w);
	/* Code points, not bytes. */
	report_wrap(&w, "\xc3\xa9\xc3\xa9\xc3\xa9, x", 4);
	ck_assert_uint_eq(w.n, 2);
	ck_assert_str_eq(w.lines[0], "\xc3\xa9\xc3\xa9\xc3\xa9,");
	report_wrapped_free(&w);
	report_wrap(&w, "", 10);
	ck_assert_uint_eq(w.n, 1);
	ck_assert_str_eq(w.lines[0], "");
	report_wrapped_free(&w);
}
END_TEST

START_TEST(scales)
{
	char label[48];
	struct report_yscale y = report_y_scale(4.16 * GIB);

	ck_assert(y.ticks <= REPORT_MAX_TICKS && y.top >= 4.16 * GIB);
	ck_assert_uint_eq(y.ticks, 5);
	report_y_label(&y, 1, label, sizeof(label));
	ck_assert_str_eq(label, "1 GiB");
	report_y_label(&y, 0, label, sizeof(label));
	ck_assert_str_eq(label, "0");
	y = report_y_scale(900.0 * MIB);
	report_y_label(&y, 1, label, sizeof(label));
	ck_assert_str_eq(label, "128 MiB");
	struct report_xscale x = report_x_scale(16.8);
	ck_assert(x.step == 2 && x.ticks == 9 && x.span == 18);
	x = report_x_scale(0.25);
	ck_assert(x.decimals == 2 || x.decimals == 1);
	ck_assert(x.span >= 0.25 && x.ticks <= 10);
}
END_TEST

/* Strings a log holds are kept as UTF-8: a byte that starts no well-formed
 * sequence becomes U+FFFD, the rest stays. */
struct utf8_case {
	const char *in, *out;
};

START_TEST(text_utf8)
{
	static const struct utf8_case cases[] = {
		{ "plain", "plain" },
		{ "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" },
		{ "a\xff" "b", "a\xef\xbf\xbd" "b" },
		{ "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },             /* overlong */
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* a surrogate */
		{ "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd" },             /* cut at the end */
		{ "", "" },
		{ NULL, NULL },
	};
	for (const struct utf8_case *c = cases; c->in; c++) {
		char *got = report_xstrdup_utf8(c->in);
		ck_assert_str_eq(got, c->out);
		free(got);
	}
	/* What json-c decodes from escapes, then kept. */
	struct json_object *s = report_json_member(parse("{\"s\":\"\\u00e9\\ud83d\\ude00a\\u0000b\"}"), "s");
	char *got = report_xstrdup_utf8(json_object_get_string(s));
	ck_assert_str_eq(got, "\xc3\xa9\xf0\x9f\x98\x80" "a");
	free(got);
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
		{ "json_object_members", json_object_members },
		{ "json_mutations", json_mutations },
		{ "text_sizes", text_sizes },
		{ "text_durations", text_durations },
		{ "text_rfc3339", text_rfc3339 },
		{ "text_quoting", text_quoting },
		{ "text_utf8", text_utf8 },
		{ "suggest_limits", suggest_limits },
		{ "suggest_limit_text", suggest_limit_text },
		{ "wrap_between_clauses", wrap_between_clauses },
		{ "scales", scales },
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

	tok = json_tokener_new();
	if (!tok)
		return EXIT_FAILURE;

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	json_object_put(last);
	json_tokener_free(tok);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

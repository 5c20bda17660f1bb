/* Unit tests for src/config/parse.c: amounts, selectors, device rule lists and
 * limit resolution (through the policy, as the library resolves it). Tables
 * end in a sentinel row (text == NULL). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "platform/msg.h"
#include "config/parse.h"
#include "config/policy.h"
#include "test-common.h"

#define KiB UINT64_C(1024)
#define MiB (KiB * 1024)
#define GiB (MiB * 1024)
#define TiB (GiB * 1024)
#define PiB (TiB * 1024)

/* Fill pattern for outputs that a failed parse must leave alone. */
#define POISON 0xa5

static bool is_poisoned(const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		if (b[i] != POISON)
			return false;
	}
	return true;
}

/* ---- amounts ------------------------------------------------------------ */

struct amount_case {
	const char *text;
	enum cumemcap_amount_kind kind;
	uint64_t bytes;
	uint32_t permille;
};

static void check_amounts_accepted(const struct amount_case *cases)
{
	for (const struct amount_case *c = cases; c->text != NULL; c++) {
		struct cumemcap_amount a;

		memset(&a, POISON, sizeof(a));
		ck_assert_msg(cumemcap_parse_amount(c->text, &a), "\"%s\" rejected", c->text);
		ck_assert_msg(a.kind == c->kind, "\"%s\": kind %d, expected %d", c->text,
			      (int)a.kind, (int)c->kind);
		if (c->kind == CUMEMCAP_AMOUNT_BYTES)
			ck_assert_msg(a.bytes == c->bytes,
				      "\"%s\": %" PRIu64 " bytes, expected %" PRIu64, c->text,
				      a.bytes, c->bytes);
		else
			ck_assert_msg(a.permille == c->permille,
				      "\"%s\": %" PRIu32 " permille, expected %" PRIu32, c->text,
				      a.permille, c->permille);
	}
}

#define BYTES(t, n) { t, CUMEMCAP_AMOUNT_BYTES, n, 0 }
#define PERCENT(t, n) { t, CUMEMCAP_AMOUNT_PERCENT, 0, n }

/* Sizes in messages: cut, never rounded up, exact up to UINT64_MAX. */
START_TEST(msg_fmt_size)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
		{ 0, "0 B" },
		{ 1023, "1023 B" },
		{ 1024, "1 KiB" },
		{ 1536, "1.50 KiB" },
		{ 1024 * 1024 - 1, "1023.99 KiB" },
		{ 4ull << 30, "4 GiB" },
		{ (4ull << 30) + (300ull << 20), "4.29 GiB" },
		{ 1ull << 60, "1 EiB" },
		{ (1ull << 60) + (1ull << 59), "1.50 EiB" },
		{ UINT64_MAX, "15.99 EiB" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[32];
		ck_assert_str_eq(cumemcap_fmt_size(cases[i].bytes, buf, sizeof(buf)), cases[i].text);
	}
}
END_TEST

START_TEST(parse_amount_plain)
{
	static const struct amount_case cases[] = {
		BYTES("1", 1),
		BYTES("4096", 4096),
		BYTES("1073741824", GiB),
		BYTES("007", 7),
		BYTES("18446744073709551615", UINT64_MAX),
		{ NULL, 0, 0, 0 },
	};

	check_amounts_accepted(cases);
}
END_TEST

START_TEST(parse_amount_units)
{
	static const struct amount_case cases[] = {
		BYTES("1B", 1),
		BYTES("512b", 512),
		BYTES("18446744073709551615B", UINT64_MAX),
		/* binary, short and long spelling */
		BYTES("1K", KiB),
		BYTES("1KiB", KiB),
		BYTES("512M", 512 * MiB),
		BYTES("512MiB", 512 * MiB),
		BYTES("8G", 8 * GiB),
		BYTES("8GiB", 8 * GiB),
		BYTES("2T", 2 * TiB),
		BYTES("2TiB", 2 * TiB),
		BYTES("3P", 3 * PiB),
		BYTES("3PiB", 3 * PiB),
		BYTES("16383P", 16383 * PiB),
		/* decimal */
		BYTES("1KB", UINT64_C(1000)),
		BYTES("5MB", UINT64_C(5000000)),
		BYTES("8GB", UINT64_C(8000000000)),
		BYTES("2TB", UINT64_C(2000000000000)),
		BYTES("3PB", UINT64_C(3000000000000000)),
		/* case does not matter */
		BYTES("8g", 8 * GiB),
		BYTES("8gib", 8 * GiB),
		BYTES("8GIB", 8 * GiB),
		BYTES("8gIb", 8 * GiB),
		BYTES("8gb", UINT64_C(8000000000)),
		BYTES("8Gb", UINT64_C(8000000000)),
		BYTES("1k", KiB),
		BYTES("1kib", KiB),
		BYTES("1kb", UINT64_C(1000)),
		BYTES("1t", TiB),
		BYTES("1p", PiB),
		{ NULL, 0, 0, 0 },
	};

	check_amounts_accepted(cases);
}
END_TEST

START_TEST(parse_amount_fractions)
{
	static const struct amount_case cases[] = {
		BYTES("1.5GiB", UINT64_C(1610612736)),
		BYTES("1.5G", UINT64_C(1610612736)),
		BYTES("0.5K", 512),
		BYTES("0.1KiB", 102), /* 102.4, truncated */
		BYTES("2.25M", UINT64_C(2359296)),
		BYTES("0.3G", UINT64_C(322122547)), /* 322122547.2 */
		BYTES("1.1P", UINT64_C(1238489897526886)),
		BYTES("1.5B", 1),
		BYTES("0.001GB", UINT64_C(1000000)),
		/* a double would give one byte less for these */
		BYTES("8.2GB", UINT64_C(8200000000)),
		BYTES("4.35TB", UINT64_C(4350000000000)),
		BYTES("1.000K", KiB),
		/* digits past what a double or a u64 can hold still count */
		BYTES("0.99999999999999999999999K", 1023),
		BYTES("1.00000000000000000000001K", KiB),
		BYTES("16383.99999999999999999999P", UINT64_MAX),
		BYTES("18446744073709551615.9B", UINT64_MAX),
		{ NULL, 0, 0, 0 },
	};

	check_amounts_accepted(cases);
}
END_TEST

START_TEST(parse_amount_percent)
{
	static const struct amount_case cases[] = {
		PERCENT("75%", 75000),
		PERCENT("12.5%", 12500),
		PERCENT("1.25%", 1250),
		PERCENT("33.333%", 33333),
		PERCENT("0.001%", 1),
		PERCENT("0.01%", 10),
		PERCENT("50.0%", 50000),
		PERCENT("100%", 100000),
		PERCENT("100.000%", 100000),
		PERCENT("99.999%", 99999),
		PERCENT("1%", 1000),
		{ NULL, 0, 0, 0 },
	};

	check_amounts_accepted(cases);
}
END_TEST

START_TEST(parse_amount_rejected)
{
	static const char *const cases[] = {
		"",
		"banana",
		"-1G",
		"-1",
		"+1G",
		"+1",
		" 1G",
		"1G ",
		"1 G",
		"\t1G",
		"1G\n",
		"12XB",
		"1Gi",
		"1GiBB",
		"1iB",
		"1EiB",
		"16EiB",
		"1E",
		"150%",
		"100.001%",
		"100.0001%",
		"101%",
		"0",
		"00",
		"0B",
		"0G",
		"0%",
		"0.000%",
		"0.0G",
		"0.5B",    /* truncates to zero bytes */
		"0.0001K", /* truncates to zero bytes */
		"0.0005%", /* finer than 0.001% */
		"12.3456%",
		"1.5",     /* a plain number counts bytes */
		"1.0",
		"1e9",
		"1E9",
		"0x10",
		"0X10G",
		"1..5G",
		"1.G",
		".5G",
		"1.5.5G",
		"1,5G",
		"G",
		"GiB",
		"%",
		"%50",
		"50%%",
		"50 %",
		"5%G",
		"1G%",
		/* overflow */
		"18446744073709551616",
		"99999999999999999999999",
		"18446744073709551616B",
		"20000000000G",
		"16384P",
		"16384PiB",
		"18446744.073709551616TB", /* whole part fits, fraction tips it over */
		"99999999999999999999%",
		"4294967396%",
		NULL,
	};

	for (const char *const *c = cases; *c != NULL; c++) {
		struct cumemcap_amount a;

		memset(&a, POISON, sizeof(a));
		ck_assert_msg(!cumemcap_parse_amount(*c, &a), "\"%s\" accepted", *c);
		ck_assert_msg(is_poisoned(&a, sizeof(a)), "\"%s\": output written on failure", *c);
	}

	struct cumemcap_amount a;

	memset(&a, POISON, sizeof(a));
	ck_assert(!cumemcap_parse_amount(NULL, &a));
	ck_assert(is_poisoned(&a, sizeof(a)));
}
END_TEST

START_TEST(parse_amount_forms)
{
	const char *forms = cumemcap_amount_forms;

	ck_assert(strlen(forms) > 0);
	ck_assert_ptr_null(strchr(forms, '\n'));
	/* the examples it gives must themselves parse */
	static const char *const examples[] = { "1073741824", "8GiB", "512M", "1.5G", "75%", NULL };

	for (const char *const *e = examples; *e != NULL; e++) {
		struct cumemcap_amount a;

		ck_assert_msg(strstr(forms, *e) != NULL, "forms do not mention %s", *e);
		ck_assert_msg(cumemcap_parse_amount(*e, &a), "example %s rejected", *e);
	}
}
END_TEST

/* ---- selectors ---------------------------------------------------------- */

#define UUID_TEXT "GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f"
static const unsigned char uuid_bytes[16] = {
	0x8e, 0x6b, 0xd7, 0xc8, 0x95, 0xe4, 0x2e, 0x0f,
	0xc1, 0xd9, 0x6e, 0x2a, 0x0b, 0x1c, 0x4d, 0x5f,
};
#define OTHER_UUID_TEXT "GPU-00000000-0000-0000-0000-000000000001"
static const unsigned char other_uuid_bytes[16] = { [15] = 1 };

static bool parse_sel(const char *text, struct cumemcap_selector *out)
{
	return cumemcap_parse_selector(text, strlen(text), out);
}

START_TEST(parse_selector_ordinal)
{
	static const struct {
		const char *text;
		uint32_t ordinal;
	} cases[] = {
		{ "0", 0 },
		{ "3", 3 },
		{ "10", 10 },
		{ "999", 999 },
		{ "1023", 1023 },
		{ NULL, 0 },
	};

	for (size_t i = 0; cases[i].text != NULL; i++) {
		struct cumemcap_selector s;

		memset(&s, POISON, sizeof(s));
		ck_assert_msg(parse_sel(cases[i].text, &s), "\"%s\" rejected", cases[i].text);
		ck_assert_int_eq(s.kind, CUMEMCAP_SEL_ORDINAL);
		ck_assert_uint_eq(s.ordinal, cases[i].ordinal);
	}

	/* only len bytes are read: the rest of a rule list is not part of it */
	struct cumemcap_selector s;

	ck_assert(cumemcap_parse_selector("12345", 2, &s));
	ck_assert_int_eq(s.kind, CUMEMCAP_SEL_ORDINAL);
	ck_assert_uint_eq(s.ordinal, 12);
	ck_assert(cumemcap_parse_selector("7=4GiB", 1, &s));
	ck_assert_uint_eq(s.ordinal, 7);
}
END_TEST

START_TEST(parse_selector_uuid)
{
	static const char *const spellings[] = {
		UUID_TEXT,
		"GPU-8E6BD7C8-95E4-2E0F-C1D9-6E2A0B1C4D5F",
		"gpu-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f",
		NULL,
	};

	for (const char *const *t = spellings; *t != NULL; t++) {
		struct cumemcap_selector s;

		memset(&s, POISON, sizeof(s));
		ck_assert_msg(parse_sel(*t, &s), "\"%s\" rejected", *t);
		ck_assert_int_eq(s.kind, CUMEMCAP_SEL_UUID);
		ck_assert_mem_eq(s.uuid, uuid_bytes, 16);
	}

	struct cumemcap_selector s;

	ck_assert(parse_sel(OTHER_UUID_TEXT, &s));
	ck_assert_mem_eq(s.uuid, other_uuid_bytes, 16);
}
END_TEST

START_TEST(parse_selector_pci)
{
	static const struct {
		const char *text;
		uint32_t domain, bus, device, function;
	} cases[] = {
		{ "0000:3b:00.0", 0, 0x3b, 0, 0 },
		{ "00000000:3B:00.0", 0, 0x3b, 0, 0 },
		{ "3b:00.0", 0, 0x3b, 0, 0 },
		{ "3B:0.0", 0, 0x3b, 0, 0 },
		{ "1:2:3.4", 1, 2, 3, 4 },
		{ "0001:81:1f.7", 1, 0x81, 0x1f, 7 },
		{ "ffffffff:ff:1f.7", 0xffffffff, 0xff, 0x1f, 7 },
		{ "a:0:0.0", 0xa, 0, 0, 0 },
		{ NULL, 0, 0, 0, 0 },
	};

	for (size_t i = 0; cases[i].text != NULL; i++) {
		struct cumemcap_selector s;

		memset(&s, POISON, sizeof(s));
		ck_assert_msg(parse_sel(cases[i].text, &s), "\"%s\" rejected", cases[i].text);
		ck_assert_int_eq(s.kind, CUMEMCAP_SEL_PCI);
		ck_assert_msg(s.pci_domain == cases[i].domain && s.pci_bus == cases[i].bus &&
				      s.pci_device == cases[i].device &&
				      s.pci_function == cases[i].function,
			      "\"%s\": got %x:%x:%x.%x", cases[i].text, s.pci_domain, s.pci_bus,
			      s.pci_device, s.pci_function);
	}
}
END_TEST

START_TEST(parse_selector_rejected)
{
	static const char *const cases[] = {
		"",
		"foo",
		"-1",
		"+1",
		"1024",
		"10000",
		"01",
		"00",
		" 1",
		"1 ",
		"1.5",
		"0x1",
		"GPU-123",
		"GPU-",
		"GPU-zzzzzzzz-95e4-2e0f-c1d9-6e2a0b1c4d5f",
		"GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5",   /* one digit short */
		"GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f0", /* one digit long */
		"GPU-8e6bd7c-895e4-2e0f-c1d9-6e2a0b1c4d5f",  /* dash misplaced */
		"GPU-8e6bd7c8095e4-2e0f-c1d9-6e2a0b1c4d5f",  /* dash missing */
		"GPU 8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f",
		"8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f",
		"MIG-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f",
		"MIG-GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f/1/0",
		"0000:3b:00",
		"3b:00",
		"3b:00.8",
		"3b:20.0",
		"3b:00.00",
		"3b:00.",
		"3b:.0",
		":3b:00.0",
		"3b::00.0",
		"0000:3b:00:0.0",
		"0000:3b:00.0.0",
		"3b.00:0",
		"0000:03b:00.0",
		"000000000:3b:00.0", /* domain of 9 digits */
		"g0:00.0",
		"3b:0g.0",
		"3b:00.g",
		"-3b:00.0",
		"0000:3b:00.0 ",
		NULL,
	};

	for (const char *const *c = cases; *c != NULL; c++) {
		struct cumemcap_selector s;

		memset(&s, POISON, sizeof(s));
		ck_assert_msg(!parse_sel(*c, &s), "\"%s\" accepted", *c);
		ck_assert_msg(is_poisoned(&s, sizeof(s)), "\"%s\": output written on failure", *c);
	}

	struct cumemcap_selector s;

	memset(&s, POISON, sizeof(s));
	ck_assert(!cumemcap_parse_selector("1", 0, &s));
	ck_assert(!cumemcap_parse_selector(NULL, 3, &s));
	/* a NUL inside the given length is not part of any selector */
	ck_assert(!cumemcap_parse_selector("1\0", 2, &s));
	ck_assert(is_poisoned(&s, sizeof(s)));
}
END_TEST

START_TEST(parse_selector_format)
{
	static const struct {
		const char *text;
		const char *formatted;
	} cases[] = {
		{ "0", "0" },
		{ "1023", "1023" },
		{ UUID_TEXT, UUID_TEXT },
		{ "GPU-8E6BD7C8-95E4-2E0F-C1D9-6E2A0B1C4D5F", UUID_TEXT },
		{ "0000:3b:00.0", "0000:3b:00.0" },
		{ "00000000:3B:00.0", "0000:3b:00.0" },
		{ "3b:00.0", "0000:3b:00.0" },
		{ "1:2:3.4", "0001:02:03.4" },
		{ "12345678:ff:1f.7", "12345678:ff:1f.7" },
		{ NULL, NULL },
	};

	for (size_t i = 0; cases[i].text != NULL; i++) {
		struct cumemcap_selector s, again;
		char buf[64];

		ck_assert(parse_sel(cases[i].text, &s));
		cumemcap_selector_format(&s, buf, sizeof(buf));
		ck_assert_str_eq(buf, cases[i].formatted);
		/* what we print, we read back as the same GPU */
		ck_assert(parse_sel(buf, &again));
		ck_assert_mem_eq(&again, &s, sizeof(s));
	}

	/* a short buffer is cut, not overrun */
	struct cumemcap_selector s;
	char small[8];

	memset(small, 'x', sizeof(small));
	ck_assert(parse_sel(UUID_TEXT, &s));
	cumemcap_selector_format(&s, small, 5);
	ck_assert_str_eq(small, "GPU-");
	ck_assert_int_eq(small[5], 'x');
}
END_TEST

START_TEST(parse_selector_matches)
{
	static const struct {
		const char *selector;
		int ordinal;
		const unsigned char *uuid;
		const char *pci_bus_id;
		bool matches;
	} cases[] = {
		{ "0", 0, uuid_bytes, "0000:3b:00.0", true },
		{ "0", 1, uuid_bytes, "0000:3b:00.0", false },
		{ "3", 3, NULL, NULL, true },
		{ "0", -1, uuid_bytes, "0000:3b:00.0", false },
		{ UUID_TEXT, 5, uuid_bytes, "0000:3b:00.0", true },
		{ UUID_TEXT, 5, other_uuid_bytes, "0000:3b:00.0", false },
		{ UUID_TEXT, 5, NULL, "0000:3b:00.0", false },
		{ OTHER_UUID_TEXT, 0, other_uuid_bytes, NULL, true },
		/* PCI ids compare as numbers, however either side spells them */
		{ "0000:3b:00.0", 0, uuid_bytes, "0000:3b:00.0", true },
		{ "0000:3b:00.0", 0, uuid_bytes, "00000000:3B:00.0", true },
		{ "3b:00.0", 0, uuid_bytes, "0000:3b:00.0", true },
		{ "3b:00.0", 0, uuid_bytes, "00000000:3B:00.0", true },
		{ "00000000:3B:00.0", 0, uuid_bytes, "3b:00.0", true },
		{ "3b:00.0", 0, uuid_bytes, "0000:3b:00.1", false },
		{ "3b:00.0", 0, uuid_bytes, "0000:3b:01.0", false },
		{ "3b:00.0", 0, uuid_bytes, "0000:3c:00.0", false },
		{ "3b:00.0", 0, uuid_bytes, "0001:3b:00.0", false },
		{ "3b:00.0", 0, uuid_bytes, NULL, false },
		{ "3b:00.0", 0, uuid_bytes, "", false },
		{ "3b:00.0", 0, uuid_bytes, "garbage", false },
		{ NULL, 0, NULL, NULL, false },
	};

	for (size_t i = 0; cases[i].selector != NULL; i++) {
		struct cumemcap_selector s;

		ck_assert(parse_sel(cases[i].selector, &s));
		ck_assert_msg(cumemcap_selector_matches(&s, cases[i].ordinal, cases[i].uuid,
							cases[i].pci_bus_id) == cases[i].matches,
			      "row %zu: \"%s\" vs ordinal %d, pci \"%s\": expected %s", i,
			      cases[i].selector, cases[i].ordinal,
			      cases[i].pci_bus_id ? cases[i].pci_bus_id : "(null)",
			      cases[i].matches ? "match" : "no match");
	}
}
END_TEST

/* ---- device rule lists -------------------------------------------------- */

START_TEST(parse_rules_good)
{
	struct cumemcap_device_rules r;
	char err[512] = "untouched";

	ck_assert(cumemcap_parse_device_rules("0=4GiB," UUID_TEXT "=12GiB,0000:3b:00.0=50%", &r,
					      err, sizeof(err)));
	ck_assert_uint_eq(r.count, 3);
	ck_assert_int_eq(r.rule[0].selector.kind, CUMEMCAP_SEL_ORDINAL);
	ck_assert_uint_eq(r.rule[0].selector.ordinal, 0);
	ck_assert_int_eq(r.rule[0].amount.kind, CUMEMCAP_AMOUNT_BYTES);
	ck_assert_uint_eq(r.rule[0].amount.bytes, 4 * GiB);
	ck_assert_int_eq(r.rule[1].selector.kind, CUMEMCAP_SEL_UUID);
	ck_assert_mem_eq(r.rule[1].selector.uuid, uuid_bytes, 16);
	ck_assert_uint_eq(r.rule[1].amount.bytes, 12 * GiB);
	ck_assert_int_eq(r.rule[2].selector.kind, CUMEMCAP_SEL_PCI);
	ck_assert_uint_eq(r.rule[2].selector.pci_bus, 0x3b);
	ck_assert_int_eq(r.rule[2].amount.kind, CUMEMCAP_AMOUNT_PERCENT);
	ck_assert_uint_eq(r.rule[2].amount.permille, 50000);

	ck_assert(cumemcap_parse_device_rules("7=1", &r, NULL, 0));
	ck_assert_uint_eq(r.count, 1);
	ck_assert_uint_eq(r.rule[0].selector.ordinal, 7);
	ck_assert_uint_eq(r.rule[0].amount.bytes, 1);

	/* the same GPU by different kinds of selector is not a duplicate:
	 * the first that matches wins at resolve time */
	ck_assert(cumemcap_parse_device_rules("0=1G,3b:00.0=2G," UUID_TEXT "=3G,1=4G", &r, NULL, 0));
	ck_assert_uint_eq(r.count, 4);

	/* exactly the maximum */
	char list[1024];
	size_t pos = 0;

	for (int i = 0; i < CUMEMCAP_MAX_DEVICE_RULES; i++)
		pos += (size_t)snprintf(list + pos, sizeof(list) - pos, "%s%d=%dM", i ? "," : "", i,
					i + 1);
	ck_assert(cumemcap_parse_device_rules(list, &r, NULL, 0));
	ck_assert_uint_eq(r.count, CUMEMCAP_MAX_DEVICE_RULES);
	ck_assert_uint_eq(r.rule[63].selector.ordinal, 63);
	ck_assert_uint_eq(r.rule[63].amount.bytes, 64 * MiB);
}
END_TEST

START_TEST(parse_rules_errors)
{
	static const struct {
		const char *text;
		const char *error; /* the message starts with this */
	} cases[] = {
		{ "", "entry 1 \"\": empty entry" },
		{ ",0=4G", "entry 1 \"\": empty entry" },
		{ "0=4G,,1=2G", "entry 2 \"\": empty entry" },
		{ "0=4G,", "entry 2 \"\": empty entry" },
		{ "0:4G", "entry 1 \"0:4G\": no '='" },
		{ "0=4G,1", "entry 2 \"1\": no '='" },
		{ "foo=4GiB", "entry 1 \"foo=4GiB\": \"foo\" is not a GPU selector; accepted: " },
		{ "0=4GiB,foo=4GiB", "entry 2 \"foo=4GiB\": \"foo\" is not a GPU selector; accepted: " },
		{ "=4G", "entry 1 \"=4G\": \"\" is not a GPU selector" },
		{ " 0=4G", "entry 1 \" 0=4G\": \" 0\" is not a GPU selector" },
		{ "0=4G, 1=2G", "entry 2 \" 1=2G\": \" 1\" is not a GPU selector" },
		{ "MIG-1=4G", "entry 1 \"MIG-1=4G\": \"MIG-1\" is not a GPU selector" },
		{ "0=banana", "entry 1 \"0=banana\": \"banana\" is not a size; accepted: " },
		{ "0=", "entry 1 \"0=\": \"\" is not a size" },
		{ "0=4G=5", "entry 1 \"0=4G=5\": \"4G=5\" is not a size" },
		{ "0=4G,1=150%", "entry 2 \"1=150%\": \"150%\" is not a size" },
		{ "0=4G,0=2G", "entry 2 \"0=2G\": \"0\" names the same GPU as entry 1" },
		{ "0000:3b:00.0=1G,1=1G,3b:00.0=2G",
		  "entry 3 \"3b:00.0=2G\": \"3b:00.0\" names the same GPU as entry 1" },
		{ UUID_TEXT "=1G,GPU-8E6BD7C8-95E4-2E0F-C1D9-6E2A0B1C4D5F=2G",
		  "entry 2 \"GPU-8E6BD7C8-95E4-2E0F-C1D9-6E2A0B1C4D5F=2G\": "
		  "\"GPU-8E6BD7C8-95E4-2E0F-C1D9-6E2A0B1C4D5F\" names the same GPU as entry 1" },
		/* control characters are shown escaped: the message stays one line */
		{ "0=4G\n", "entry 1 \"0=4G\\x0a\": \"4G\\x0a\" is not a size" },
		{ "0=4\"G", "entry 1 \"0=4\\x22G\": \"4\\x22G\" is not a size" },
		{ NULL, NULL },
	};

	for (size_t i = 0; cases[i].text != NULL; i++) {
		struct cumemcap_device_rules r;
		char err[1024];

		memset(&r, POISON, sizeof(r));
		memset(err, 'x', sizeof(err));
		ck_assert_msg(!cumemcap_parse_device_rules(cases[i].text, &r, err, sizeof(err)),
			      "\"%s\" accepted", cases[i].text);
		ck_assert_msg(is_poisoned(&r, sizeof(r)), "\"%s\": output written on failure",
			      cases[i].text);
		ck_assert_msg(memchr(err, '\0', sizeof(err)) != NULL, "unterminated");
		ck_assert_msg(strncmp(err, cases[i].error, strlen(cases[i].error)) == 0,
			      "\"%s\": error is '%s', expected it to start '%s'", cases[i].text, err,
			      cases[i].error);
		ck_assert_msg(strchr(err, '\n') == NULL, "\"%s\": error is not one line: '%s'",
			      cases[i].text, err);
	}
}
END_TEST

START_TEST(parse_rules_error_lists_forms)
{
	struct cumemcap_device_rules r;
	char err[1024];

	ck_assert(!cumemcap_parse_device_rules("0=4G,foo=1G", &r, err, sizeof(err)));
	ck_assert_msg(strstr(err, cumemcap_selector_forms) != NULL, "'%s'", err);
	ck_assert(!cumemcap_parse_device_rules("0=4G,1=1X", &r, err, sizeof(err)));
	ck_assert_msg(strstr(err, cumemcap_amount_forms) != NULL, "'%s'", err);
	ck_assert_ptr_null(strchr(cumemcap_selector_forms, '\n'));
}
END_TEST

START_TEST(parse_rules_too_many)
{
	struct cumemcap_device_rules r;
	char list[1024], err[256];
	size_t pos = 0;

	for (int i = 0; i <= CUMEMCAP_MAX_DEVICE_RULES; i++)
		pos += (size_t)snprintf(list + pos, sizeof(list) - pos, "%s%d=1G", i ? "," : "", i);
	memset(&r, POISON, sizeof(r));
	ck_assert(!cumemcap_parse_device_rules(list, &r, err, sizeof(err)));
	ck_assert(is_poisoned(&r, sizeof(r)));
	ck_assert_str_eq(err, "entry 65 \"64=1G\": too many entries, at most 64");
}
END_TEST

START_TEST(parse_rules_error_buffer)
{
	struct cumemcap_device_rules r;
	char err[16];

	/* no buffer, or a short one: still fails, never overruns */
	memset(&r, POISON, sizeof(r));
	ck_assert(!cumemcap_parse_device_rules("foo=1G", &r, NULL, 0));
	ck_assert(!cumemcap_parse_device_rules("foo=1G", &r, NULL, 100));
	ck_assert(is_poisoned(&r, sizeof(r)));

	memset(err, 'x', sizeof(err));
	ck_assert(!cumemcap_parse_device_rules("foo=1G", &r, err, 10));
	ck_assert_str_eq(err, "entry 1 \"");
	ck_assert_int_eq(err[10], 'x');

	memset(err, 'x', sizeof(err));
	ck_assert(!cumemcap_parse_device_rules("foo=1G", &r, err, 1));
	ck_assert_int_eq(err[0], '\0');
	ck_assert_int_eq(err[1], 'x');

	/* NULL text fails with a message */
	ck_assert(!cumemcap_parse_device_rules(NULL, &r, err, sizeof(err)));
	ck_assert(strlen(err) > 0);
	ck_assert(is_poisoned(&r, sizeof(r)));

	/* a long entry is cut in the message, and the message still ends */
	char longentry[300], big[512];

	memset(longentry, '9', sizeof(longentry));
	memcpy(longentry, "0=", 2);
	longentry[sizeof(longentry) - 2] = 'X';
	longentry[sizeof(longentry) - 1] = '\0';
	ck_assert(!cumemcap_parse_device_rules(longentry, &r, big, sizeof(big)));
	ck_assert_msg(strstr(big, "...\"") != NULL, "'%s'", big);
	ck_assert_msg(strstr(big, "is not a size") != NULL, "'%s'", big);
}
END_TEST

/* ---- resolution --------------------------------------------------------- */

/* CUMEMCAP_LIMIT and CUMEMCAP_DEVICE_LIMITS, as a policy resolves them for
 * one GPU. */
static const char *limit_value, *rules_value;

static const char *limit_get(const char *name)
{
	if (strcmp(name, "CUMEMCAP_LIMIT") == 0)
		return limit_value;
	return strcmp(name, "CUMEMCAP_DEVICE_LIMITS") == 0 ? rules_value : NULL;
}

/* The limit for one GPU; *from_list says whether an entry of the list
 * gave it. */
static uint64_t resolve(const char *limit, const char *rules, int ordinal, const unsigned char *uuid,
			const char *pci, uint64_t total, bool *from_list)
{
	static struct cumemcap_policy p;
	struct cumemcap_source src;
	char err[512];

	limit_value = limit;
	rules_value = rules;
	ck_assert_msg(cumemcap_policy_build(&p, limit_get, "", "", 0, "", err, sizeof(err)), "%s", err);
	uint64_t got = cumemcap_policy_limit(&p, false, ordinal, uuid, pci, total, &src);
	*from_list = src.origin == CUMEMCAP_FROM_ENV && strcmp(src.variable, "CUMEMCAP_DEVICE_LIMITS") == 0;
	return got;
}

#define PCI_ID "0000:3b:00.0"

START_TEST(policy_limit_by_device)
{
	static const struct {
		const char *global; /* "-": no global limit */
		const char *rules;  /* "-": no device rules */
		int ordinal;
		const unsigned char *uuid;
		uint64_t total;
		uint64_t expected;
		int matched; /* the list's entry that applies, -1: none */
	} cases[] = {
		/* nothing configured */
		{ "-", "-", 0, uuid_bytes, 16 * GiB, UINT64_MAX, -1 },
		{ "-", "1=4GiB", 0, uuid_bytes, 16 * GiB, UINT64_MAX, -1 },
		/* global only */
		{ "8GiB", "-", 0, uuid_bytes, 16 * GiB, 8 * GiB, -1 },
		{ "8GiB", "1=4GiB", 0, uuid_bytes, 16 * GiB, 8 * GiB, -1 },
		/* a rule beats the global amount, by each kind of selector */
		{ "8GiB", "0=4GiB", 0, uuid_bytes, 16 * GiB, 4 * GiB, 0 },
		{ "2GiB", "0=4GiB", 0, uuid_bytes, 16 * GiB, 4 * GiB, 0 },
		{ "8GiB", "1=1G," UUID_TEXT "=12GiB", 0, uuid_bytes, 16 * GiB, 12 * GiB, 1 },
		{ "8GiB", "1=1G,3b:00.0=3GiB", 0, uuid_bytes, 16 * GiB, 3 * GiB, 1 },
		{ "-", "0=4GiB", 0, uuid_bytes, 16 * GiB, 4 * GiB, 0 },
		/* first matching rule wins */
		{ "8GiB", UUID_TEXT "=2GiB,0=4GiB", 0, uuid_bytes, 16 * GiB, 2 * GiB, 0 },
		{ "8GiB", "0=4GiB," UUID_TEXT "=2GiB", 0, uuid_bytes, 16 * GiB, 4 * GiB, 0 },
		{ "8GiB", "5=1G,00000000:3B:00.0=5GiB,0=4GiB", 0, uuid_bytes, 16 * GiB, 5 * GiB, 1 },
		{ "8GiB", "0=4GiB," UUID_TEXT "=2GiB", 1, uuid_bytes, 16 * GiB, 2 * GiB, 1 },
		{ "8GiB", "0=4GiB," UUID_TEXT "=2GiB", 1, other_uuid_bytes, 16 * GiB, 8 * GiB, -1 },
		/* percent of total, rounded down */
		{ "50%", "-", 0, uuid_bytes, 16 * GiB, 8 * GiB, -1 },
		{ "50%", "-", 0, uuid_bytes, 199999, 99999, -1 },
		{ "33.333%", "-", 0, uuid_bytes, 1000, 333, -1 },
		{ "12.5%", "-", 0, uuid_bytes, 80 * GiB, 10 * GiB, -1 },
		{ "99.999%", "-", 0, uuid_bytes, UINT64_MAX, UINT64_C(18446559606268814519), -1 },
		{ "100%", "-", 0, uuid_bytes, UINT64_MAX, UINT64_MAX, -1 },
		{ "100%", "-", 0, uuid_bytes, 12345, 12345, -1 },
		{ "8GiB", "0=25%", 0, uuid_bytes, 40 * GiB, 10 * GiB, 0 },
		/* a share that rounds to nothing is still one byte, unless there is nothing */
		{ "0.001%", "-", 0, uuid_bytes, 10, 1, -1 },
		{ "50%", "-", 0, uuid_bytes, 1, 1, -1 },
		{ "50%", "-", 0, uuid_bytes, 0, 0, -1 },
		/* never above total */
		{ "32GiB", "-", 0, uuid_bytes, 16 * GiB, 16 * GiB, -1 },
		{ "8GiB", "0=1P", 0, uuid_bytes, 16 * GiB, 16 * GiB, 0 },
		{ "1", "-", 0, uuid_bytes, 0, 0, -1 },
		{ NULL, NULL, 0, NULL, 0, 0, 0 },
	};

	for (size_t i = 0; cases[i].global != NULL; i++) {
		bool from_list;
		uint64_t got = resolve(strcmp(cases[i].global, "-") ? cases[i].global : NULL,
				       strcmp(cases[i].rules, "-") ? cases[i].rules : NULL, cases[i].ordinal,
				       cases[i].uuid, PCI_ID, cases[i].total, &from_list);

		ck_assert_msg(got == cases[i].expected,
			      "row %zu (%s / %s, total %" PRIu64 "): %" PRIu64
			      ", expected %" PRIu64,
			      i, cases[i].global, cases[i].rules, cases[i].total, got,
			      cases[i].expected);
		ck_assert_msg(from_list == (cases[i].matched >= 0), "row %zu: from the list %d, expected %d", i,
			      from_list, cases[i].matched >= 0);
	}
}
END_TEST

START_TEST(policy_limit_by_device_null_args)
{
	bool from_list;

	ck_assert_uint_eq(resolve(NULL, NULL, 0, NULL, NULL, 4 * GiB, &from_list), UINT64_MAX);
	ck_assert(!from_list);
	ck_assert_uint_eq(resolve("1GiB", NULL, 0, NULL, NULL, 4 * GiB, &from_list), GiB);
	ck_assert(!from_list);
	ck_assert_uint_eq(resolve(NULL, "0=2GiB", 0, NULL, NULL, 4 * GiB, &from_list), 2 * GiB);
	ck_assert(from_list);
	ck_assert_uint_eq(resolve(NULL, "0=2GiB", 1, NULL, NULL, 4 * GiB, &from_list), UINT64_MAX);
	ck_assert(!from_list);
}
END_TEST

TEST_SUITE(parse)
{
	Suite *s = suite_create("parse");

	ADD_TEST(s, msg_fmt_size);
	ADD_TEST(s, parse_amount_plain);
	ADD_TEST(s, parse_amount_units);
	ADD_TEST(s, parse_amount_fractions);
	ADD_TEST(s, parse_amount_percent);
	ADD_TEST(s, parse_amount_rejected);
	ADD_TEST(s, parse_amount_forms);
	ADD_TEST(s, parse_selector_ordinal);
	ADD_TEST(s, parse_selector_uuid);
	ADD_TEST(s, parse_selector_pci);
	ADD_TEST(s, parse_selector_rejected);
	ADD_TEST(s, parse_selector_format);
	ADD_TEST(s, parse_selector_matches);
	ADD_TEST(s, parse_rules_good);
	ADD_TEST(s, parse_rules_errors);
	ADD_TEST(s, parse_rules_error_lists_forms);
	ADD_TEST(s, parse_rules_too_many);
	ADD_TEST(s, parse_rules_error_buffer);
	ADD_TEST(s, policy_limit_by_device);
	ADD_TEST(s, policy_limit_by_device_null_args);

	return s;
}

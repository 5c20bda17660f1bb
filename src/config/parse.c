/* parse: see parse.h, which says how it is thread-safe. Digit by digit, so
 * never by the locale (no strtod, no strcasecmp), and fractions are exact. */
#include "config.h"

#include "config/parse.h"

#include <stdio.h>
#include <string.h>

#include "config/cfgfile.h"

const char cumemcap_amount_forms[] =
	"bytes (1073741824), a number with a unit K/M/G/T/P or KiB/MiB/GiB/TiB/PiB "
	"(powers of 1024) or KB/MB/GB/TB/PB (powers of 1000) or B, such as 8GiB, "
	"512M or 1.5G, or a share of the GPU such as 75% or 12.5% in (0,100]";

const char cumemcap_selector_forms[] =
	"a device ordinal 0-1023 such as 0 or 3, a GPU UUID such as "
	"GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f, or a PCI bus id "
	"[domain:]bus:device.function in hex such as 0000:3b:00.0 or 3b:00.0";

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static int hex_value(char c)
{
	static const char digits[] = "0123456789abcdef";
	const char *d = c ? strchr(digits, lower(c)) : NULL;
	return d ? (int)(d - digits) : -1;
}

/* Whether text[0..len) is the lower-case `lit`, ignoring ASCII case. */
static bool equals_nocase(const char *text, size_t len, const char *lit)
{
	if (len != strlen(lit))
		return false;
	for (size_t i = 0; i < len; i++)
		if (lower(text[i]) != lit[i])
			return false;
	return true;
}

/* ---- amounts ------------------------------------------------------------ */

/* The 3 decimals of a percentage are exactly the permille field's steps. */
#define PERMILLE_MAX UINT32_C(100000)

/* A unit's multiplier: B; K, M, G, T, P alone or with iB (powers of 1024)
 * or with B (powers of 1000); 0 for no unit. */
static uint64_t unit_multiplier(const char *s, size_t n)
{
	static const char prefixes[] = "kmgtp";
	const char *at = n ? memchr(prefixes, lower(s[0]), sizeof(prefixes) - 1) : NULL;
	if (equals_nocase(s, n, "b"))
		return 1;
	if (!at)
		return 0;
	uint64_t base = 0;
	if (n == 1 || equals_nocase(s + 1, n - 1, "ib"))
		base = 1024;
	else if (equals_nocase(s + 1, n - 1, "b"))
		base = 1000;
	uint64_t mult = base;
	for (const char *p = prefixes; p < at; p++)
		mult *= base;
	return mult;
}

/* floor(0.<digits> * mult), exact for any mult <= UINT64_MAX / 10: Horner
 * from the last digit, the carry into digit i being floor(the digits after
 * i, times mult); flooring early is exact as d * mult is an integer. */
static uint64_t fraction_times(const char *digits, size_t n, uint64_t mult)
{
	uint64_t carry = 0;
	while (n-- > 0)
		carry = ((uint64_t)(digits[n] - '0') * mult + carry) / 10;
	return carry;
}

/* "1" or "1.25" at the start of text[0..len): the whole part (false past
 * UINT64_MAX), the fraction's digits, and in *i where they end. */
static bool decimal(const char *text, size_t len, size_t *i, uint64_t *whole, const char **frac,
		    size_t *frac_len)
{
	*whole = 0;
	*frac = NULL;
	*frac_len = 0;
	if (text == NULL || len == 0 || !is_digit(text[0]))
		return false; /* empty, sign, blank, ".5" */
	for (*i = 0; *i < len && is_digit(text[*i]); ++*i)
		if (__builtin_mul_overflow(*whole, 10, whole) ||
		    __builtin_add_overflow(*whole, (uint64_t)(text[*i] - '0'), whole))
			return false;
	if (*i < len && text[*i] == '.') {
		*frac = &text[++*i];
		while (*i < len && is_digit(text[*i]))
			++*i;
		*frac_len = (size_t)(&text[*i] - *frac);
	}
	return *frac == NULL || *frac_len > 0; /* not "1.G", "1..5G" */
}

static bool parse_amount_n(const char *text, size_t len, struct cumemcap_amount *out)
{
	size_t i, frac_len;
	uint64_t whole, mult = 1, bytes;
	const char *frac;
	if (!decimal(text, len, &i, &whole, &frac, &frac_len))
		return false;
	const char *suffix = &text[i];
	size_t suffix_len = len - i;
	if (suffix_len == 1 && suffix[0] == '%') {
		/* Finer than 0.001% is not representable. */
		if (frac_len > 3 || whole > PERMILLE_MAX / 1000)
			return false;
		uint64_t permille = whole * 1000 + fraction_times(frac, frac_len, 1000);
		if (permille == 0 || permille > PERMILLE_MAX)
			return false;
		*out = (struct cumemcap_amount){ .kind = CUMEMCAP_AMOUNT_PERCENT,
						 .permille = (uint32_t)permille };
		return true;
	}
	if (suffix_len > 0)
		mult = unit_multiplier(suffix, suffix_len);
	else if (frac != NULL)
		return false; /* a plain number counts bytes: no fractions */
	if (mult == 0 || __builtin_mul_overflow(whole, mult, &bytes) ||
	    __builtin_add_overflow(bytes, fraction_times(frac, frac_len, mult), &bytes) ||
	    bytes == 0)
		return false;
	*out = (struct cumemcap_amount){ .kind = CUMEMCAP_AMOUNT_BYTES, .bytes = bytes };
	return true;
}

bool cumemcap_parse_amount(const char *text, struct cumemcap_amount *out)
{
	return text != NULL && parse_amount_n(text, strlen(text), out);
}

/* ---- selectors ---------------------------------------------------------- */

static bool parse_ordinal(const char *text, size_t len, uint32_t *out)
{
	size_t i, n;
	uint64_t v;
	const char *frac;
	/* One spelling per ordinal: "0", "7", "1023"; no "007". */
	if (len > 4 || (text[0] == '0' && len > 1) || !decimal(text, len, &i, &v, &frac, &n) || i != len || frac ||
	    v > 1023)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* "GPU-" and 8-4-4-4-12 hex digits: the dashes stand at 12, 17, 22, 27. */
static bool parse_uuid(const char *text, size_t len, unsigned char out[16])
{
	unsigned char bytes[16];
	if (len != 4 + 32 + 4 || !equals_nocase(text, 4, "gpu-"))
		return false;
	for (size_t i = 4, n = 0; i < len; i += 2) {
		if ((i == 12 || i == 17 || i == 22 || i == 27) && text[i++] != '-')
			return false;
		int hi = hex_value(text[i]), lo = hex_value(text[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		bytes[n++] = (unsigned char)(hi << 4 | lo);
	}
	memcpy(out, bytes, sizeof(bytes));
	return true;
}

/* [b, e): 1..max_digits hex digits, value <= max. */
static bool hex_field(const char *b, const char *e, size_t max_digits, uint32_t max, uint32_t *out)
{
	uint32_t v = 0;
	if (e <= b || (size_t)(e - b) > max_digits)
		return false;
	for (; b < e; b++) {
		int h = hex_value(*b);
		if (h < 0)
			return false;
		v = v << 4 | (uint32_t)h;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

/* [DOMAIN:]BUS:DEVICE.FUNCTION, in hex, into sel (a domain left out: as is). */
static bool parse_pci(const char *text, size_t len, struct cumemcap_selector *sel)
{
	const char *end = text + len, *first = memchr(text, ':', len), *last = first;
	const char *dot = memchr(text, '.', len);
	for (const char *c = text; c < end; c++)
		if (*c == ':')
			last = c;
	if (!first || !dot || dot < last)
		return false;
	return (first == last || hex_field(text, first, 8, UINT32_MAX, &sel->pci_domain)) &&
	       hex_field(first == last ? text : first + 1, last, 2, 0xff, &sel->pci_bus) &&
	       hex_field(last + 1, dot, 2, 0x1f, &sel->pci_device) &&
	       hex_field(dot + 1, end, 1, 7, &sel->pci_function);
}

bool cumemcap_parse_selector(const char *text, size_t len, struct cumemcap_selector *out)
{
	struct cumemcap_selector sel = { 0 };
	if (text == NULL || len == 0)
		return false;
	if (parse_ordinal(text, len, &sel.ordinal))
		sel.kind = CUMEMCAP_SEL_ORDINAL;
	else if (parse_uuid(text, len, sel.uuid))
		sel.kind = CUMEMCAP_SEL_UUID;
	else if (parse_pci(text, len, &sel))
		sel.kind = CUMEMCAP_SEL_PCI;
	else
		return false;
	*out = sel;
	return true;
}

bool cumemcap_selector_matches(const struct cumemcap_selector *sel, int ordinal,
			       const unsigned char uuid[16], const char *pci_bus_id)
{
	struct cumemcap_selector bus;
	switch (sel->kind) {
	case CUMEMCAP_SEL_ORDINAL:
		return ordinal >= 0 && (uint32_t)ordinal == sel->ordinal;
	case CUMEMCAP_SEL_UUID:
		return uuid != NULL && memcmp(uuid, sel->uuid, sizeof(sel->uuid)) == 0;
	case CUMEMCAP_SEL_PCI:
		return pci_bus_id != NULL && cumemcap_parse_selector(pci_bus_id, strlen(pci_bus_id), &bus) &&
		       cumemcap_selector_equal(sel, &bus);
	}
	return false;
}

void cumemcap_selector_format(const struct cumemcap_selector *sel, char *buf, size_t len)
{
	const unsigned char *u = sel->uuid;
	switch (sel->kind) {
	case CUMEMCAP_SEL_ORDINAL:
		snprintf(buf, len, "%u", (unsigned)sel->ordinal);
		return;
	case CUMEMCAP_SEL_UUID:
		snprintf(buf, len,
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
			 u[12], u[13], u[14], u[15]);
		return;
	case CUMEMCAP_SEL_PCI:
		snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)sel->pci_domain,
			 (unsigned)sel->pci_bus, (unsigned)sel->pci_device,
			 (unsigned)sel->pci_function);
		return;
	}
	snprintf(buf, len, "?");
}

bool cumemcap_selector_equal(const struct cumemcap_selector *a, const struct cumemcap_selector *b)
{
	/* cumemcap_parse_selector zeroes the fields a kind does not use. */
	return memcmp(a, b, sizeof(*a)) == 0;
}
_Static_assert(sizeof(struct cumemcap_selector) == 40, "a selector has no padding for memcmp to read");

/* ---- device rule lists -------------------------------------------------- */

#define QUOTED_MAX (80 * 4 + 6)

/* text[0..len) quoted for a message, cut after 80 bytes with "...". */
static const char *quoted(char *dst, const char *text, size_t len)
{
	char cut[81], q[QUOTED_MAX];
	snprintf(cut, sizeof(cut), "%.*s", (int)(len < 80 ? len : 80), text);
	snprintf(dst, QUOTED_MAX, "\"%s%s\"", cumemcap_config_quote(q, sizeof(q), cut), len > 80 ? "..." : "");
	return dst;
}

bool cumemcap_parse_device_rules(const char *text, struct cumemcap_device_rules *out,
				 char *err, size_t errlen)
{
	struct cumemcap_device_rules rules;
	const char *p = text;
	char q[QUOTED_MAX], why[1024] = "";

	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", text == NULL ? "no value" : "");
	if (text == NULL)
		return false;
	rules.count = 0;

	for (size_t index = 1;; index++) {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		struct cumemcap_device_rule *rule = &rules.rule[rules.count];
		size_t sel_len = eq ? (size_t)(eq - p) : 0;

		if (rules.count == CUMEMCAP_MAX_DEVICE_RULES)
			snprintf(why, sizeof(why), "too many entries, at most %d", CUMEMCAP_MAX_DEVICE_RULES);
		else if (len == 0)
			snprintf(why, sizeof(why), "empty entry; expected SELECTOR=SIZE such as 0=4GiB");
		else if (eq == NULL)
			snprintf(why, sizeof(why), "no '='; expected SELECTOR=SIZE such as 0=4GiB");
		else if (!cumemcap_parse_selector(p, sel_len, &rule->selector))
			snprintf(why, sizeof(why), "%s is not a GPU selector; accepted: %s", quoted(q, p, sel_len),
				 cumemcap_selector_forms);
		else if (!parse_amount_n(eq + 1, len - sel_len - 1, &rule->amount))
			snprintf(why, sizeof(why), "%s is not a size; accepted: %s",
				 quoted(q, eq + 1, len - sel_len - 1), cumemcap_amount_forms);
		for (size_t k = 0; !why[0] && k < rules.count; k++)
			if (cumemcap_selector_equal(&rules.rule[k].selector, &rule->selector))
				snprintf(why, sizeof(why), "%s names the same GPU as entry %zu",
					 quoted(q, p, sel_len), k + 1);
		if (why[0]) {
			if (err != NULL && errlen > 0)
				snprintf(err, errlen, "entry %zu %s: %s", index, quoted(q, p, len), why);
			return false;
		}
		rules.count++;

		if (end == NULL)
			break;
		p = end + 1;
	}

	*out = rules;
	return true;
}

/* ---- resolution --------------------------------------------------------- */

uint64_t cumemcap_amount_bytes(const struct cumemcap_amount *a, uint64_t total)
{
	uint64_t limit = a->bytes;
	if (a->kind == CUMEMCAP_AMOUNT_PERCENT) {
		/* floor(total * permille / 100000) without overflow: total is
		 * q * 100000 + r, and q * permille <= total. */
		limit = total / PERMILLE_MAX * a->permille + total % PERMILLE_MAX * a->permille / PERMILLE_MAX;
		if (limit == 0 && total > 0)
			limit = 1;
	}
	return limit < total ? limit : total;
}

bool cumemcap_parse_seconds(const char *text, uint32_t min_ms, uint32_t max_ms, uint32_t *out_ms)
{
	size_t i, n, len = strlen(text);
	uint64_t whole, ms;
	const char *frac;
	if (!decimal(text, len, &i, &whole, &frac, &n) || i != len || n > 3 || whole > UINT32_MAX)
		return false;
	ms = whole * 1000 + fraction_times(frac, n, 1000);
	if (ms < min_ms || ms > max_ms)
		return false;
	*out_ms = (uint32_t)ms;
	return true;
}

bool cumemcap_parse_template(const char *text, size_t max, char *err, size_t errlen)
{
	size_t n = strlen(text);
	if (n == 0 || n >= max) {
		snprintf(err, errlen, " is not a path; expected 1 to %zu characters", max - 1);
		return false;
	}
	for (const char *s = text; *s; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f) {
			snprintf(err, errlen, " contains a control character");
			return false;
		}
		if (*s != '%')
			continue;
		s++;
		if (!*s || !strchr("phnu%", *s)) {
			snprintf(err, errlen,
				 " has an unknown %%-escape; accepted: %%p (pid), %%h (host), %%n (program), %%u (uid), %%%%");
			return false;
		}
	}
	return true;
}

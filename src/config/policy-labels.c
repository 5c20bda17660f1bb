/* policy-labels: CUMEMCAP_LABELS (file key `labels`), extra Prometheus
 * labels for the metrics file: its parser, which the table of settings
 * names, and a walk over its pairs.
 *
 * The value is kept as the text given (checked here once, so the metrics
 * writer only walks it): `k=v[,k=v...]`, each key a Prometheus label name
 * ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", not one of the labels
 * cumemcap sets itself, no key twice), each value 1 or more bytes of UTF-8
 * without ',' or control characters (the writer escapes '\' and '"').
 *
 * Thread safety: pure functions on a policy the caller owns
 * while it is being built, or on a built (immutable) policy; no state. */
#include "config/policy.h"
#include "config/settings.h"

#include <stdio.h>
#include <string.h>

/* The labels the metrics writer sets itself (src/log/metrics.c). */
const char *const cumemcap_reserved_labels[] = { "pid",  "program", "host",      "node",      "pod",
						 "namespace", "container", "gpu", "cuda_device", "uuid",
						 "UUID", "group", NULL };

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

/* Bytes of a valid UTF-8 sequence at s (0: not one). */
static size_t utf8_at(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
	if (!len || len > n || (len > 1 && s[0] >= 0xf8))
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) || (s[0] == 0xf0 && s[1] < 0x90) ||
	    (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return len;
}

bool cumemcap_labels_next(const char **cursor, const char **key, size_t *klen, const char **value, size_t *vlen)
{
	const char *s = *cursor;
	if (!*s)
		return false;
	const char *eq = s, *end;
	while (*eq && *eq != '=' && *eq != ',')
		eq++;
	end = eq;
	while (*end && *end != ',')
		end++;
	*key = s;
	*klen = (size_t)(eq - s);
	*value = *eq == '=' ? eq + 1 : end;
	*vlen = (size_t)(end - *value);
	*cursor = *end ? end + 1 : end;
	return true;
}

#define ACCEPTED                                                                                          \
	"; accepted: NAME=VALUE[,NAME=VALUE...] (at most %d pairs, %d bytes in all), NAME a Prometheus "      \
	"label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with \"__\", none twice, none of the labels "     \
	"cumemcap sets: pid, program, host, node, pod, namespace, container, gpu, cuda_device, uuid, UUID, " \
	"group), VALUE 1 or more characters without ',' or control characters; empty: no extra labels"

bool cumemcap_policy_parse_labels(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	size_t total = strlen(value);
	char what[160] = "";
	unsigned pairs = 0;
	if (total >= sizeof(p->labels))
		snprintf(what, sizeof(what), " is %zu bytes long", total);
	else if (total && value[total - 1] == ',')
		snprintf(what, sizeof(what), ": an empty pair at the end");
	const char *cur = value, *k, *v;
	size_t kn, vn;
	while (!what[0] && *value && cumemcap_labels_next(&cur, &k, &kn, &v, &vn)) {
		int kshow = kn > 64 ? 64 : (int)kn;
		if (++pairs > CUMEMCAP_LABELS_COUNT_MAX) {
			snprintf(what, sizeof(what), ": more than %d labels", CUMEMCAP_LABELS_COUNT_MAX);
			break;
		}
		if (v == k + kn) { /* no '=' */
			snprintf(what, sizeof(what), ": \"%.*s\" is not NAME=VALUE", kshow, k);
			break;
		}
		bool ok = kn > 0;
		for (size_t i = 0; ok && i < kn; i++)
			ok = name_char(k[i], i == 0);
		if (!ok) {
			snprintf(what, sizeof(what), ": \"%.*s\" is not a label name", kshow, k);
			break;
		}
		if (kn >= 2 && k[0] == '_' && k[1] == '_') {
			snprintf(what, sizeof(what), ": \"%.*s\" starts with \"__\" (reserved by Prometheus)", kshow, k);
			break;
		}
		for (const char *const *r = cumemcap_reserved_labels; *r; r++)
			if (strlen(*r) == kn && memcmp(*r, k, kn) == 0)
				snprintf(what, sizeof(what), ": \"%s\" is a label cumemcap sets itself", *r);
		const char *c2 = value, *k2, *v2;
		size_t kn2, vn2;
		while (!what[0] && c2 != cur && cumemcap_labels_next(&c2, &k2, &kn2, &v2, &vn2) && k2 != k)
			if (kn2 == kn && memcmp(k2, k, kn) == 0)
				snprintf(what, sizeof(what), ": \"%.*s\" is given twice", kshow, k);
		if (!what[0] && vn == 0)
			snprintf(what, sizeof(what), ": \"%.*s\" has an empty value", kshow, k);
		for (size_t i = 0, n; !what[0] && i < vn; i += n) {
			const unsigned char *u = (const unsigned char *)v + i;
			n = utf8_at(u, vn - i);
			if (!n || *u < 0x20 || *u == 0x7f)
				snprintf(what, sizeof(what), ": the value of \"%.*s\" has %s", kshow, k,
					 n ? "a control character" : "a byte that is not UTF-8");
		}
	}
	if (what[0]) {
		snprintf(why, len, "%s" ACCEPTED, what, CUMEMCAP_LABELS_COUNT_MAX, CUMEMCAP_LABELS_MAX - 1);
		return false;
	}
	memcpy(p->labels, value, total + 1);
	return true;
}

const char *cumemcap_policy_labels(const struct cumemcap_policy *p, struct cumemcap_source *src)
{
	if (src)
		*src = p->labels_src;
	return p->labels;
}

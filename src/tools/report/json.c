/* json: the strict JSON reader behind cumemcap report (see json.h).
 *
 * A recursive-descent parser over one line, depth-bounded, building a tree
 * of nodes in a bump arena. Single-threaded; the arena belongs to its
 * caller. */
#include "config.h"

#include "json.h"

#include <stdlib.h>
#include <string.h>

/* ---- arena ---------------------------------------------------------------- */

#define CHUNK_MIN (64 * 1024)

struct report_json_chunk {
	struct report_json_chunk *next;
	size_t size, used;
	_Alignas(max_align_t) unsigned char data[];
};

static void *arena_alloc(struct report_json_arena *a, size_t size)
{
	const size_t align = _Alignof(max_align_t);

	size = (size + align - 1) & ~(align - 1);
	struct report_json_chunk *c = a->chunks;
	if (!c || c->size - c->used < size) {
		size_t want = size > CHUNK_MIN ? size : CHUNK_MIN;
		c = malloc(sizeof(*c) + want);
		if (!c)
			return NULL;
		c->size = want;
		c->used = 0;
		c->next = a->chunks;
		a->chunks = c;
	}
	void *p = c->data + c->used;
	c->used += size;
	return p;
}

void report_json_reset(struct report_json_arena *a)
{
	struct report_json_chunk *keep = NULL;

	/* Keep the smallest chunk (the usual size) for the next line. */
	for (struct report_json_chunk *c = a->chunks, *next; c; c = next) {
		next = c->next;
		if (!keep && c->size == CHUNK_MIN) {
			keep = c;
			continue;
		}
		free(c);
	}
	if (keep) {
		keep->used = 0;
		keep->next = NULL;
	}
	a->chunks = keep;
}

void report_json_free(struct report_json_arena *a)
{
	for (struct report_json_chunk *c = a->chunks, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	a->chunks = NULL;
}

/* ---- parser ---------------------------------------------------------------- */

struct parser {
	struct report_json_arena *arena;
	const unsigned char *p, *end;
};

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static struct report_json *new_node(struct parser *ps, enum report_json_kind kind)
{
	struct report_json *n = arena_alloc(ps->arena, sizeof(*n));
	if (n) {
		memset(n, 0, sizeof(*n));
		n->kind = kind;
	}
	return n;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static struct report_json *parse_number(struct parser *ps)
{
	const unsigned char *start = ps->p;
	bool negative = false, integer = true;

	if (ps->p < ps->end && *ps->p == '-') {
		negative = true;
		ps->p++;
	}
	if (ps->p >= ps->end || !is_digit(*ps->p))
		return NULL;
	if (*ps->p == '0') {
		ps->p++;
		if (ps->p < ps->end && is_digit(*ps->p))
			return NULL; /* leading zero */
	} else {
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	}
	if (ps->p < ps->end && *ps->p == '.') {
		integer = false;
		ps->p++;
		if (ps->p >= ps->end || !is_digit(*ps->p))
			return NULL;
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		integer = false;
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (ps->p >= ps->end || !is_digit(*ps->p))
			return NULL;
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	}

	struct report_json *n = new_node(ps, REPORT_JSON_NUMBER);
	size_t len = (size_t)(ps->p - start);
	char *copy = arena_alloc(ps->arena, len + 1);
	if (!n || !copy)
		return NULL;
	memcpy(copy, start, len);
	copy[len] = '\0';
	n->num = strtod(copy, NULL); /* the grammar above is a subset of strtod's */

	if (integer && !negative) {
		uint64_t v = 0;
		bool fits = true;
		for (const char *d = copy; *d; d++) {
			unsigned digit = (unsigned)(*d - '0');
			if (v > (UINT64_MAX - digit) / 10) {
				fits = false;
				break;
			}
			v = v * 10 + digit;
		}
		n->is_u64 = fits;
		n->u64 = fits ? v : 0;
	}
	return n;
}

static int hex4(const unsigned char *p)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		int c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

static char *put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | (cp >> 6));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | (cp >> 12));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | (cp >> 18));
		*o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	return o;
}

#define REPLACEMENT 0xfffd

/* The length of the well-formed UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
	size_t avail = (size_t)(end - p);
	unsigned char c = p[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return avail >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (avail < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
			return 0;
		if (c == 0xe0 && p[1] < 0xa0)
			return 0; /* overlong */
		if (c == 0xed && p[1] >= 0xa0)
			return 0; /* a surrogate */
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (avail < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
		    (p[3] & 0xc0) != 0x80)
			return 0;
		if (c == 0xf0 && p[1] < 0x90)
			return 0; /* overlong */
		if (c == 0xf4 && p[1] >= 0x90)
			return 0; /* past U+10FFFF */
		return 4;
	}
	return 0;
}

/* A string, ps->p at its opening quote. Decoded into the arena; `len_out`
 * gets its length. */
static const char *parse_string(struct parser *ps, size_t *len_out)
{
	const unsigned char *s = ++ps->p, *q = s;

	/* Find the closing quote; check for raw control characters. */
	while (q < ps->end && *q != '"') {
		if (*q < 0x20)
			return NULL;
		if (*q == '\\') {
			if (q + 1 >= ps->end)
				return NULL;
			q++;
		}
		q++;
	}
	if (q >= ps->end)
		return NULL;

	/* Each input byte gives at most 3 output bytes (a stray byte -> U+FFFD). */
	char *out = arena_alloc(ps->arena, (size_t)(q - s) * 3 + 1), *o = out;
	if (!out)
		return NULL;
	const unsigned char *p = s;
	while (p < q) {
		if (*p != '\\') {
			size_t n = utf8_seq(p, q);
			if (n == 0) {
				o = put_utf8(o, REPLACEMENT);
				p++;
			} else {
				memcpy(o, p, n);
				o += n;
				p += n;
			}
			continue;
		}
		p++;
		switch (*p++) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			if (q - p < 4)
				return NULL;
			int hi = hex4(p);
			if (hi < 0)
				return NULL;
			p += 4;
			uint32_t cp = (uint32_t)hi;
			if (hi >= 0xd800 && hi <= 0xdbff) {
				int lo = -1;
				if (q - p >= 6 && p[0] == '\\' && p[1] == 'u')
					lo = hex4(p + 2);
				if (lo >= 0xdc00 && lo <= 0xdfff) {
					cp = 0x10000 + (((uint32_t)hi - 0xd800) << 10) +
					     ((uint32_t)lo - 0xdc00);
					p += 6;
				} else {
					cp = REPLACEMENT; /* a lone high surrogate */
				}
			} else if (hi >= 0xdc00 && hi <= 0xdfff) {
				cp = REPLACEMENT; /* a lone low surrogate */
			}
			o = put_utf8(o, cp);
			break;
		}
		default:
			return NULL;
		}
	}
	*o = '\0';
	*len_out = (size_t)(o - out);
	ps->p = q + 1;
	return out;
}

static struct report_json *parse_value(struct parser *ps, int depth);

static struct report_json *parse_container(struct parser *ps, int depth, bool object)
{
	struct report_json *n = new_node(ps, object ? REPORT_JSON_OBJECT : REPORT_JSON_ARRAY);
	struct report_json **tail;
	const unsigned char close = object ? '}' : ']';

	if (!n || depth >= REPORT_JSON_MAX_DEPTH)
		return NULL;
	tail = &n->child;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return n;
	}
	for (;;) {
		const char *key = NULL;
		size_t key_len;
		if (object) {
			if (ps->p >= ps->end || *ps->p != '"')
				return NULL;
			key = parse_string(ps, &key_len);
			if (!key)
				return NULL;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':')
				return NULL;
			ps->p++;
		}
		struct report_json *item = parse_value(ps, depth + 1);
		if (!item)
			return NULL;
		item->key = key;
		*tail = item;
		tail = &item->next;
		n->len++;
		skip_ws(ps);
		if (ps->p >= ps->end)
			return NULL;
		if (*ps->p == close) {
			ps->p++;
			return n;
		}
		if (*ps->p != ',')
			return NULL;
		ps->p++;
		skip_ws(ps);
	}
}

static struct report_json *parse_value(struct parser *ps, int depth)
{
	struct report_json *n = NULL;

	skip_ws(ps);
	if (ps->p >= ps->end)
		return NULL;
	switch (*ps->p) {
	case '{':
		return parse_container(ps, depth, true);
	case '[':
		return parse_container(ps, depth, false);
	case '"': {
		size_t len;
		const char *s = parse_string(ps, &len);
		if (s && (n = new_node(ps, REPORT_JSON_STRING))) {
			n->str = s;
			n->len = len;
		}
		return n;
	}
	case 't':
		return literal(ps, "true") ? new_node(ps, REPORT_JSON_TRUE) : NULL;
	case 'f':
		return literal(ps, "false") ? new_node(ps, REPORT_JSON_FALSE) : NULL;
	case 'n':
		return literal(ps, "null") ? new_node(ps, REPORT_JSON_NULL) : NULL;
	default:
		return parse_number(ps);
	}
}

const struct report_json *report_json_parse(struct report_json_arena *arena,
						const char *text, size_t len)
{
	struct parser ps = {
		.arena = arena,
		.p = (const unsigned char *)text,
		.end = (const unsigned char *)text + len,
	};
	struct report_json *root = parse_value(&ps, 0);

	if (!root)
		return NULL;
	skip_ws(&ps);
	return ps.p == ps.end ? root : NULL;
}

const struct report_json *report_json_get(const struct report_json *obj, const char *key)
{
	const struct report_json *found = NULL;

	if (!obj || obj->kind != REPORT_JSON_OBJECT)
		return NULL;
	for (const struct report_json *m = obj->child; m; m = m->next) {
		if (strcmp(m->key, key) == 0)
			found = m;
	}
	return found;
}

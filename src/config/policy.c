/* policy: building the policy, and what a built one says about one GPU (see
 * policy.h, which says how it is thread-safe). */
#include "config.h"
#include "config/policy.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfgfile.h"
#include "config/settings.h"
#include "platform/msg.h"

/* "limit, device_limits, ..." for the keys allowed where `scope` says. */
static const char *key_list(char *buf, size_t len, unsigned scope)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < cumemcap_setting_count && o < len; i++)
		if (cumemcap_settings[i].scope & scope)
			o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", cumemcap_settings[i].key);
	return buf;
}

/* User text quoted for a one-line message. */
#define QUOTED(buf, s) cumemcap_config_quote(buf, sizeof(buf), s)

/* Why a value is not of a plain form; name and sep: "CUMEMCAP_LIMIT" "=", "limit" " = ". */
static __attribute__((noinline, cold)) bool bad_form(const char *name, const char *sep, const char *value,
						     bool in_file, char *err, size_t errlen)
{
	char q[256];
	size_t n = strlen(value);
	if (n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n - 1] == value[0]) {
		char inner[256];
		snprintf(inner, sizeof(inner), "%.*s", (int)(n - 2), value + 1);
		snprintf(err, errlen, "%s%s%c%s%c: quotes are not part of the syntax; accepted without them: %s%s%s", name, sep,
			 value[0], cumemcap_config_quote(q, sizeof(q), inner), value[0], name, sep, q);
		return false;
	}
	snprintf(err, errlen, "%s%s\"%s\": a value cannot contain '#'; accepted: a value without one%s", name, sep,
		 cumemcap_config_quote(q, sizeof(q), value), in_file ? " (for a comment, put a blank before the '#')" : "");
	return false;
}

bool cumemcap_policy_plain_form(const char *value)
{
	size_t n = strlen(value);
	return !strchr(value, '#') && !(n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n - 1] == value[0]);
}

/* ---- one value from one source -------------------------------------------- */

/* A policy being built, where the file's reading is, and a scratch policy. */
struct building {
	struct cumemcap_policy *p;
	struct cumemcap_policy *scratch;      /* allocated when first needed */
	unsigned where;                       /* CUMEMCAP_IN_GLOBAL, _PROGRAM or _DEVICE */
	enum cumemcap_rank rank;              /* of this section's entries */
	unsigned seen[CUMEMCAP_SETTINGS_MAX]; /* each key's line in this section, 0: not yet */
};

/* Setting s given `value` by `from` (of rank CUMEMCAP_RANKS: a [program]
 * section that does not match). Limit rules are kept from every source, a
 * value unless a source read before it (or the file's, but for the matching
 * [program] section) gave it; what is not kept goes to scratch. */
static bool take(struct building *b, const struct cumemcap_setting *s, const char *value,
		 struct cumemcap_source from, char *err, size_t errlen)
{
	struct cumemcap_source *now = s->src_off ? (void *)((char *)b->p + s->src_off) : NULL;
	bool newest = now && from.rank != CUMEMCAP_RANKS &&
		      (now->origin == CUMEMCAP_FROM_DEFAULT ||
		       (now->origin == CUMEMCAP_FROM_FILE && from.rank == CUMEMCAP_RANK_PROGRAM));
	bool keep = s->rules ? from.rank != CUMEMCAP_RANKS : newest;
	if (!keep && !b->scratch && !(b->scratch = calloc(1, sizeof(*b->scratch)))) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	struct cumemcap_policy *to = keep ? b->p : b->scratch;
	size_t first = to->rule_count;
	if (!s->parse(to, value, err, errlen)) {
		char q[256];
		bool env = from.origin == CUMEMCAP_FROM_ENV;
		cumemcap_config_prefix(err, errlen, "%s%s\"%s\"", env ? s->variable : s->key, env ? "=" : " = ",
				       QUOTED(q, value));
		return false;
	}
	for (size_t i = first; i < to->rule_count; i++)
		to->rules[i].src = from;
	if (!keep)
		to->rule_count = 0;
	if (newest)
		*now = from;
	return true;
}

static bool read_env(struct building *b, cumemcap_getenv_fn get, char *err, size_t errlen)
{
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const struct cumemcap_setting *s = &cumemcap_settings[i];
		const char *value = get(s->variable);
		struct cumemcap_source from = { .origin = CUMEMCAP_FROM_ENV, .rank = CUMEMCAP_RANK_ENV,
						.variable = s->variable };
		if (!value)
			continue;
		if (!cumemcap_policy_plain_form(value))
			return bad_form(s->variable, "=", value, false, err, errlen);
		if (!take(b, s, value, from, err, errlen))
			return false;
	}
	return true;
}

/* ---- the file --------------------------------------------------------------- */

/* "unknown WHAT \"WORD\"", and the closest of `words` or else what is accepted. */
static bool unknown(const char *what, const char *word, const char *const *words, const char *accepted,
		    char *err, size_t errlen)
{
	char q[128];
	const char *hint = cumemcap_config_suggest(word, words);
	if (hint)
		snprintf(err, errlen, "unknown %s \"%s\" (did you mean \"%s\"?)", what, QUOTED(q, word), hint);
	else
		snprintf(err, errlen, "unknown %s \"%s\"; accepted: %s", what, QUOTED(q, word), accepted);
	return false;
}

static bool on_section(void *ctx, const char *kind, const char *arg, unsigned line, char *err,
		       size_t errlen)
{
	struct building *st = ctx;
	struct cumemcap_policy *p = st->p;
	char q[256];
	memset(st->seen, 0, sizeof(st->seen));
	if (strcmp(kind, "device") == 0) {
		struct cumemcap_selector sel;
		if (!cumemcap_parse_selector(arg, strlen(arg), &sel)) {
			snprintf(err, errlen, "[device %s]: \"%s\" is not a GPU selector; accepted: %s",
				 QUOTED(q, arg), q, cumemcap_selector_forms);
			return false;
		}
		for (size_t i = 0; i < p->device_section_count; i++)
			if (cumemcap_selector_equal(&p->device_sections[i].selector, &sel)) {
				snprintf(err, errlen, "[device %s] repeats the section at line %u", QUOTED(q, arg),
					 p->device_sections[i].line);
				return false;
			}
		if (p->device_section_count == CUMEMCAP_MAX_DEVICE_SECTIONS) {
			snprintf(err, errlen, "more than %d [device] sections", CUMEMCAP_MAX_DEVICE_SECTIONS);
			return false;
		}
		st->where = CUMEMCAP_IN_DEVICE;
		st->rank = CUMEMCAP_RANK_DEVICE;
		p->device_sections[p->device_section_count++] = (struct cumemcap_device_section){ sel, line };
		return true;
	}
	if (strcmp(kind, "program") == 0) {
		if (arg[0] == '\0' || strlen(arg) >= CUMEMCAP_PROGRAM_MAX || strchr(arg, '/')) {
			snprintf(err, errlen,
				 "[program %s]: expected a glob of at most %d characters matched against the program's name (no '/'), such as [program train*.py]",
				 QUOTED(q, arg), CUMEMCAP_PROGRAM_MAX - 1);
			return false;
		}
		st->where = CUMEMCAP_IN_PROGRAM;
		p->program_section_count++;
		/* The first match applies, later ones are only checked. A process
		 * without a name matches none, not even [program *]. */
		st->rank = CUMEMCAP_RANKS;
		if (p->program_section_line == 0 && p->program[0] && fnmatch(arg, p->program, 0) == 0) {
			p->program_section_line = line;
			st->rank = CUMEMCAP_RANK_PROGRAM;
		}
		return true;
	}
	static const char *const kinds[] = { "device", "program", NULL };
	return unknown("section kind", kind, kinds, "[device SELECTOR], [program GLOB]", err, errlen);
}

static bool on_entry(void *ctx, const char *key, const char *value, unsigned line, char *err,
		     size_t errlen)
{
	struct building *st = ctx;
	struct cumemcap_policy *p = st->p;
	const struct cumemcap_setting *s = NULL;
	const char *keys[CUMEMCAP_SETTINGS_MAX + 1] = { NULL };
	char list[512];
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		keys[i] = cumemcap_settings[i].key;
		if (strcmp(keys[i], key) == 0)
			s = &cumemcap_settings[i];
	}
	if (!s)
		return unknown("key", key, keys, key_list(list, sizeof(list), ~CUMEMCAP_IN_ENV), err, errlen);
	if (!(s->scope & st->where)) {
		snprintf(err, errlen, "\"%s\" cannot stand in %s; accepted there: %s", key,
			 st->where == CUMEMCAP_IN_DEVICE ? "a [device] section"
			 : st->where == CUMEMCAP_IN_PROGRAM ? "a [program] section" : "the global part",
			 key_list(list, sizeof(list), st->where));
		return false;
	}
	if (!cumemcap_policy_plain_form(value))
		return bad_form(key, " = ", value, true, err, errlen);
	unsigned *seen = &st->seen[s - cumemcap_settings];
	if (*seen) {
		snprintf(err, errlen, "duplicate key \"%s\" in this section (first at line %u)", key, *seen);
		return false;
	}
	*seen = line;
	struct cumemcap_source from = { .origin = CUMEMCAP_FROM_FILE, .rank = st->rank, .line = line };
	if (!take(st, s, value, from, err, errlen))
		return false;
	/* Only limit stands in a [device] section: the section's GPU is its. */
	if (st->where == CUMEMCAP_IN_DEVICE)
		p->rules[p->rule_count - 1].selector = p->device_sections[p->device_section_count - 1].selector;
	return true;
}

/* After every source: a group limit needs a group, unless a higher source set
 * the group empty (CUMEMCAP_GROUP= over a file's), turning it off, limit and all. */
static bool check_group(const struct cumemcap_policy *p, char *err, size_t errlen)
{
	const struct cumemcap_source *src = &p->group_limit_src;
	if (src->origin == CUMEMCAP_FROM_DEFAULT || p->group[0] ||
	    (p->group_src.origin != CUMEMCAP_FROM_DEFAULT && p->group_src.rank < src->rank))
		return true;
	if (src->origin == CUMEMCAP_FROM_ENV)
		snprintf(err, errlen,
			 "CUMEMCAP_GROUP_LIMIT=\"%s\": needs a group; accepted: with CUMEMCAP_GROUP "
			 "(the group's name) set, here or in the configuration file", p->group_limit_text);
	else
		snprintf(err, errlen,
			 "%s:%u: group_limit = \"%s\": needs a group; accepted: with a group key "
			 "(the group's name) in this section or the global part, or CUMEMCAP_GROUP",
			 p->config_path, src->line, p->group_limit_text);
	return false;
}

/* As cumemcap_policy_build, into an all-zero p (half-built on failure). */
/* `text`: the file's, parsed in place (cumemcap_config_parse writes into
 * it); NULL: read from `path`. */
static bool build(struct cumemcap_policy *p, cumemcap_getenv_fn get, const char *path, char *text,
		  size_t len, const char *program, char *err, size_t errlen)
{
	char why[256], *own = NULL;
	if (!text && path && path[0]) {
		if (!cumemcap_config_read(path, &own, &len, err, errlen)) {
			/* Say which variable named the file when one did. */
			const char *named = get("CUMEMCAP_CONFIG");
			if (named && strcmp(named, path) == 0)
				cumemcap_config_prefix(err, errlen, "CUMEMCAP_CONFIG=\"%s\": ", named);
			return false;
		}
		text = own;
	}
	cumemcap_copy(p->program, sizeof(p->program), program ? program : "");
	/* Every setting's default_value (an empty one is the zeroed policy's). */
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const struct cumemcap_setting *s = &cumemcap_settings[i];
		if (s->default_value && s->default_value[0] && !s->parse(p, s->default_value, why, sizeof(why)))
			cumemcap_fatal("the default of %s%s", s->key, why); /* a bug in the table */
	}
	struct building b = { .p = p, .where = CUMEMCAP_IN_GLOBAL, .rank = CUMEMCAP_RANK_GLOBAL };
	bool ok = read_env(&b, get, err, errlen);
	if (ok && path && path[0]) {
		cumemcap_copy(p->config_path, sizeof(p->config_path), path);
		ok = cumemcap_config_parse(path, text, len, on_section, on_entry, &b, err, errlen);
	}
	free(b.scratch);
	free(own);
	if (!ok || !check_group(p, err, errlen))
		return false;
	if (p->growth == CUMEMCAP_GROWTH_PREALLOCATE && p->pool == CUMEMCAP_POOL_OFF) {
		char g[CUMEMCAP_PATH_MAX + 16], o[CUMEMCAP_PATH_MAX + 16];
		cumemcap_source_format(p, &p->growth_src, g, sizeof(g));
		cumemcap_source_format(p, &p->pool_src, o, sizeof(o));
		snprintf(err, errlen,
			 "%s: growth \"preallocate\" serves from the arenas, but %s turns them off; "
			 "accepted: pool on or nopack with preallocate, or growth ondemand", g, o);
		return false;
	}
	return true;
}

static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

static bool build_process(struct cumemcap_policy *p, cumemcap_getenv_fn get, bool secure,
			  const char *default_path, uid_t owner, const char *program, char *err, size_t errlen,
			  char *note, size_t notelen)
{
	if (!secure) {
		char path[CUMEMCAP_PATH_MAX];
		return cumemcap_policy_config_path(get, default_path, path, sizeof(path), err, errlen) &&
		       build(p, get, path, NULL, 0, program, err, errlen);
	}
	/* Secure execution: the caller chose the environment, so only a file
	 * root alone can change counts. `note` is written only here. */
	char *text = NULL;
	size_t len = 0;
	int r = default_path && default_path[0]
			? cumemcap_config_read_trusted(default_path, owner, &text, &len, note, notelen)
			: 0;
	if (r < 0) {
		size_t n = strlen(note);
		snprintf(note + n, notelen - n, "; under secure execution no limits apply");
	}
	bool ok = build(p, no_env, r == 1 ? default_path : "", text, len, program, err, errlen);
	free(text);
	if (!ok) {
		/* Only the trusted file can be wrong: its path and line, not its text. */
		size_t n = strlen(default_path);
		unsigned line = 0;
		if (strncmp(err, default_path, n) == 0 && err[n] == ':')
			line = (unsigned)strtoul(err + n + 1, NULL, 10);
		snprintf(err, errlen,
			 "%s:%u: not a valid setting (under secure execution the line is not shown; "
			 "check the file with cumemcap --check-config)", default_path, line);
		return false;
	}
	p->secure = true;
	/* No log the caller could name or place: only one the file asks for. */
	if (p->log_src.origin == CUMEMCAP_FROM_DEFAULT)
		p->log = CUMEMCAP_LOG_OFF;
	return true;
}

/* The public builds' zeroed copy p (NULL: out of memory), kept on success. */
static bool kept(struct cumemcap_policy *out, struct cumemcap_policy *p, bool ok, char *err, size_t errlen)
{
	if (!p)
		snprintf(err, errlen, "out of memory");
	else if (ok)
		*out = *p;
	free(p);
	return p && ok;
}

bool cumemcap_policy_build(struct cumemcap_policy *out, cumemcap_getenv_fn get, const char *path,
			   const char *text, size_t len, const char *program, char *err, size_t errlen)
{
	char *copy = text ? malloc(len + 1) : NULL; /* the caller's text stays as it is */
	struct cumemcap_policy *p = !text || copy ? calloc(1, sizeof(*p)) : NULL;
	bool ok = p && build(p, get, path, text ? memcpy(copy, text, len) : NULL, len, program, err, errlen);
	free(copy);
	return kept(out, p, ok, err, errlen);
}

bool cumemcap_policy_build_process(struct cumemcap_policy *out, cumemcap_getenv_fn get, bool secure,
				   const char *default_path, uid_t owner, const char *program,
				   char *err, size_t errlen, char *note, size_t notelen)
{
	if (notelen)
		note[0] = '\0';
	struct cumemcap_policy *p = calloc(1, sizeof(*p));
	return kept(out, p,
		    p && build_process(p, get, secure, default_path, owner, program, err, errlen, note, notelen),
		    err, errlen);
}

bool cumemcap_policy_config_path(cumemcap_getenv_fn get, const char *fallback, char *out, size_t len,
				 char *err, size_t errlen)
{
	const char *named = get("CUMEMCAP_CONFIG");
	const char *path = named ? named : "";
	struct stat st;
	/* Anything at the default's path counts, a dangling link included:
	 * a process must not silently run without the limits it holds. */
	if (!named && fallback && lstat(fallback, &st) == 0)
		path = fallback;
	if (strlen(path) >= len) {
		char q[256];
		if (named)
			snprintf(err, errlen, "CUMEMCAP_CONFIG=\"%s...\": the path is longer than %zu bytes; "
				 "accepted: a path of at most %zu bytes", QUOTED(q, path), len - 1, len - 1);
		else
			snprintf(err, errlen, "%s: the path is longer than %zu bytes", QUOTED(q, path), len - 1);
		if (len)
			out[0] = '\0';
		return false;
	}
	memcpy(out, path, strlen(path) + 1);
	return true;
}

void cumemcap_source_format(const struct cumemcap_policy *p, const struct cumemcap_source *src,
			    char *buf, size_t len)
{
	if (src->origin == CUMEMCAP_FROM_ENV)
		cumemcap_copy(buf, len, src->variable);
	else if (src->origin == CUMEMCAP_FROM_FILE)
		snprintf(buf, len, "%s:%u", p->config_path, src->line);
	else
		snprintf(buf, len, "default");
}

/* ---- one GPU's limits ----------------------------------------------------------- */

/* Of two matching rules the lower order applies, on a tie the earlier. */
static unsigned order(const struct cumemcap_rule *r)
{
	return 2 * r->src.rank + (r->selector.kind == 0);
}

uint64_t cumemcap_policy_limit(const struct cumemcap_policy *p, bool group, int ordinal,
			       const unsigned char uuid[16], const char *pci, uint64_t total,
			       struct cumemcap_source *src)
{
	const struct cumemcap_rule *best = NULL;
	for (size_t i = 0; i < p->rule_count && (!group || p->group[0]); i++) {
		const struct cumemcap_rule *r = &p->rules[i];
		if (r->group == group && (!best || order(r) < order(best)) &&
		    (r->selector.kind == 0 || cumemcap_selector_matches(&r->selector, ordinal, uuid, pci)))
			best = r;
	}
	if (src)
		*src = best ? best->src : (struct cumemcap_source){ 0 };
	return best ? cumemcap_amount_bytes(&best->amount, total) : UINT64_MAX;
}

void cumemcap_policy_selectors(const struct cumemcap_policy *p,
			       void (*fn)(void *ctx, const struct cumemcap_selector *sel,
					  const struct cumemcap_source *src),
			       void *ctx)
{
	/* The lists by source, the group's while there is one, then the sections. */
	for (int group = 0; group < 2 && (!group || p->group[0]); group++)
		for (enum cumemcap_rank rank = 0; rank < CUMEMCAP_RANKS; rank++)
			for (size_t i = 0; rank != CUMEMCAP_RANK_DEVICE && i < p->rule_count; i++) {
				const struct cumemcap_rule *r = &p->rules[i];
				if (r->group == group && r->src.rank == rank && r->selector.kind != 0)
					fn(ctx, &r->selector, &r->src);
			}
	for (size_t i = 0; i < p->device_section_count; i++) {
		struct cumemcap_source s = { .origin = CUMEMCAP_FROM_FILE, .line = p->device_sections[i].line };
		fn(ctx, &p->device_sections[i].selector, &s);
	}
}

bool cumemcap_policy_any_limit(const struct cumemcap_policy *p)
{
	if (p->group[0])
		return true;
	for (size_t i = 0; i < p->rule_count; i++)
		if (!p->rules[i].group)
			return true;
	return false;
}

/* ---- the program's name ------------------------------------------------------ */

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* python, python3, python3.11, pypy3, perl, perl5.36, ruby3.1, node, nodejs,
 * bash, sh, dash, zsh, Rscript, julia, lua5.4, php8.2. */
static bool is_interpreter(const char *name)
{
	static const char exact[][8] = { "python", "perl", "node", "nodejs", "bash", "sh", "dash", "zsh", "Rscript", "julia" };
	static const char name_and_more[][8] = { "pypy", "perl5", "ruby", "lua", "php" };
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strcmp(name, exact[i]) == 0)
			return true;
	for (size_t i = 0; i < sizeof(name_and_more) / sizeof(name_and_more[0]); i++)
		if (strncmp(name, name_and_more[i], strlen(name_and_more[i])) == 0)
			return true;
	return strncmp(name, "python", 6) == 0 && name[6] >= '0' && name[6] <= '9';
}

void cumemcap_program_name(int argc, char *const *argv, char *out, size_t len)
{
	if (len == 0)
		return;
	out[0] = '\0';
	if (argc < 1 || !argv || !argv[0])
		return;
	const char *name = base_name(argv[0]);
	if (is_interpreter(name)) {
		for (int i = 1; i < argc && argv[i]; i++) {
			const char *a = argv[i];
			if (strcmp(a, "-m") == 0 && i + 1 < argc && argv[i + 1]) {
				name = argv[i + 1];
				break;
			}
			if (strcmp(a, "-c") == 0 || strcmp(a, "-e") == 0 || strcmp(a, "-") == 0 || strcmp(a, "--") == 0)
				break; /* inline code or stdin: the interpreter's own name */
			if (a[0] == '-') {
				/* Options that take a separate value (python -W/-X). */
				if ((strcmp(a, "-W") == 0 || strcmp(a, "-X") == 0) && i + 1 < argc)
					i++;
				continue;
			}
			name = base_name(a);
			break;
		}
	}
	cumemcap_copy(out, len, name);
}

/* ---- the process's policy ---------------------------------------------------- */

static struct cumemcap_policy the_policy;
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;
static _Atomic bool policy_ready; /* the fast path once built */
/* What the constructor saw (cumemcap_policy_start). */
static struct {
	int argc;
	char *const *argv;
	bool bare;                          /* nothing configured at start */
	char program[CUMEMCAP_PROGRAM_MAX]; /* the name: at start when bare, else by policy_init */
} start;

extern char **environ;

bool cumemcap_policy_start(int argc, char *const *argv)
{
	start.argc = argc;
	start.argv = argv;
	/* Bare: no secure execution, no CUMEMCAP_ variable and nothing at the
	 * default path (cumemcap_policy_config_path's test). */
	bool bare = getauxval(AT_SECURE) == 0;
	for (char **e = environ; bare && e && *e; e++)
		bare = strncmp(*e, "CUMEMCAP_", 9) != 0;
	struct stat st;
	if (!bare || lstat(CUMEMCAP_DEFAULT_CONFIG, &st) == 0) {
		cumemcap_policy();
		return true;
	}
	/* Built at first use as it would be now: variables and files made
	 * later do not count, a rewritten argv (setproctitle) neither. */
	cumemcap_program_name(argc, argv, start.program, sizeof(start.program));
	start.bare = true;
	return false;
}

const char *cumemcap_getenv(const char *name)
{
	return getenv(name);
}

/* argv when the constructor did not get it: /proc/self/cmdline. */
static void program_from_proc(char *out, size_t len)
{
	char buf[4096];
	char *argv[64];
	int argc = 0;
	out[0] = '\0';
	FILE *f = fopen("/proc/self/cmdline", "re");
	if (!f)
		return;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (size_t i = 0; i < n && argc < 63; i += strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	cumemcap_program_name(argc, argv, out, len);
}

/* Under secure execution the caller chose argv (`exec -a`): the name is that
 * of /proc/self/exe, which the caller cannot point elsewhere (protected
 * hardlinks; no setuid scripts), or "" (no [program] section applies). */
static void program_from_exe(char *out, size_t len)
{
	char path[CUMEMCAP_PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	out[0] = '\0';
	if (n <= 0 || (size_t)n >= sizeof(path) - 1)
		return;
	path[n] = '\0';
	cumemcap_copy(out, len, base_name(path));
}

static void policy_init(void)
{
	static char err[2048];                     /* written only on failure */
	static char note[CUMEMCAP_PATH_MAX + 256]; /* only under secure execution */
	/* AT_SECURE: setuid, setgid or file capabilities, as ld.so sees it. */
	bool secure = !start.bare && getauxval(AT_SECURE) != 0;
	if (secure)
		program_from_exe(start.program, sizeof(start.program));
	else if (!start.bare && start.argv)
		cumemcap_program_name(start.argc, start.argv, start.program, sizeof(start.program));
	else if (!start.bare)
		program_from_proc(start.program, sizeof(start.program));
	/* In place: the_policy is zero (.bss); a failure ends the process. */
	if (!build_process(&the_policy, start.bare ? no_env : cumemcap_getenv, secure,
			   start.bare ? NULL : CUMEMCAP_DEFAULT_CONFIG, 0, start.program, err, sizeof(err), note,
			   sizeof(note)))
		cumemcap_fatal("%s", err);
	if (note[0])
		cumemcap_msg("%s", note);
	/* Name each unknown CUMEMCAP_ variable (not under secure execution,
	 * where the environment does not count); the program runs on. */
	for (char **e = environ; !secure && !start.bare && e && *e; e++) {
		char line[256];
		if (cumemcap_variable_unknown_line(*e, line, sizeof(line)))
			cumemcap_msg("%s", line);
	}
	atomic_store_explicit(&policy_ready, true, memory_order_release);
}

const struct cumemcap_policy *cumemcap_policy(void)
{
	/* Asked on every pooled alloc and free: one load once built. */
	if (!atomic_load_explicit(&policy_ready, memory_order_acquire))
		pthread_once(&policy_once, policy_init);
	return &the_policy;
}

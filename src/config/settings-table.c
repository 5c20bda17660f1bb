/* settings-table: the table of settings, their parsers and the functions that
 * write a value back, and the CUMEMCAP_ variables that are no setting. Thread
 * safety: the table is constant; a parser touches only its caller's buffers. */
#include "config.h"
#include "config/settings.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfgfile.h"
#include "config/parse.h"
#include "config/policy.h"
#include "platform/msg.h"
#include "platform/userdb.h"

/* ---- the limit rules ---------------------------------------------------------- */

static bool parse_limit(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	struct cumemcap_amount a;
	if (cumemcap_parse_amount(value, &a)) {
		p->rules[p->rule_count++] = (struct cumemcap_rule){ .amount = a }; /* every GPU */
		return true;
	}
	snprintf(why, len, " is not a valid limit; accepted: %s", cumemcap_amount_forms);
	return false;
}

/* SEL=AMOUNT[,...] into rules; why says which entry is wrong. */
static bool parse_devices(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	struct cumemcap_device_rules rules;
	char reason[512];
	if (!cumemcap_parse_device_rules(value, &rules, reason, sizeof(reason))) {
		snprintf(why, len, ": %s", reason);
		return false;
	}
	for (size_t i = 0; i < rules.count; i++)
		p->rules[p->rule_count++] =
			(struct cumemcap_rule){ .selector = rules.rule[i].selector, .amount = rules.rule[i].amount };
	return true;
}

static bool parse_group_limit(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	size_t first = p->rule_count;
	/* A list names GPUs (SEL=AMOUNT); one amount has no '='. */
	if (strchr(value, '=')) {
		if (!parse_devices(p, value, why, len))
			return false;
	} else if (!parse_limit(p, value, why, len)) {
		snprintf(why, len,
			 " is not a valid group limit; accepted: one amount for every GPU, %s; "
			 "or per GPU SEL=AMOUNT[,SEL=AMOUNT...] with SEL an ordinal, GPU-<uuid> or PCI bus id",
			 cumemcap_amount_forms);
		return false;
	}
	for (size_t i = first; i < p->rule_count; i++)
		p->rules[i].group = true;
	/* The environment is read first: the file's text does not replace its. */
	if (p->group_limit_src.origin != CUMEMCAP_FROM_ENV)
		cumemcap_config_quote(p->group_limit_text, sizeof(p->group_limit_text), value);
	return true;
}

/* ---- words ------------------------------------------------------------------- */

/* The index of value in words (NULL-terminated), or -1 and why it is not. */
static int word_of(const char *value, const char *const *words, const char *accepted, char *why,
		   size_t len)
{
	for (int i = 0; words[i]; i++)
		if (strcmp(value, words[i]) == 0)
			return i;
	snprintf(why, len, " is not supported; accepted: %s", accepted);
	return -1;
}

/* By enum value. */
static const char *const count_names[] = { "footprint", "allocations", NULL };
static const char *const pool_names[] = { "auto", "on", "nopack", "off", NULL };
static const char *const release_names[] = { "idle", "never", "immediate", NULL };

/* A parser fn for a setting that is one of `words`, kept by index in p->field. */
#define WORD_SETTING(fn, field, type, words, accepted)                                             \
	static bool fn(struct cumemcap_policy *p, const char *value, char *why, size_t len)        \
	{                                                                                          \
		int i = word_of(value, words, accepted, why, len);                                 \
		if (i >= 0)                                                                        \
			p->field = (type)i;                                                        \
		return i >= 0;                                                                     \
	}

WORD_SETTING(parse_count, count, enum cumemcap_count, count_names,
	     "footprint (allocations and the driver's overhead), allocations")
WORD_SETTING(parse_pool, pool, enum cumemcap_pool_mode, pool_names,
	     "auto (pooled where a limit or a group applies), on, nopack (no shared segments), off")
WORD_SETTING(parse_hints, framework_hints, bool, ((const char *const[]){ "off", "on", NULL }), "on, off")
WORD_SETTING(parse_debug, debug_doors, bool, ((const char *const[]){ "off", "doors", NULL }), "doors, off")

const char *cumemcap_policy_count_name(enum cumemcap_count c)
{
	return count_names[c];
}

const char *cumemcap_policy_pool_name(enum cumemcap_pool_mode m)
{
	return pool_names[m];
}

/* ---- sizes, durations and paths ---------------------------------------------- */

static bool parse_growth(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	struct cumemcap_amount a = { .kind = CUMEMCAP_AMOUNT_NONE };
	if (strncmp(value, "preallocate:", 12) == 0 && !cumemcap_parse_amount(value + 12, &a)) {
		snprintf(why, len, ": the size after \"preallocate:\" is not valid; accepted: %s",
			 cumemcap_amount_forms);
		return false;
	}
	if (a.kind == CUMEMCAP_AMOUNT_NONE && strcmp(value, "ondemand") != 0 &&
	    strcmp(value, "preallocate") != 0) {
		snprintf(why, len,
			 " is not supported; accepted: ondemand, preallocate (the whole limit), preallocate:SIZE");
		return false;
	}
	p->growth = value[0] == 'o' ? CUMEMCAP_GROWTH_ONDEMAND : CUMEMCAP_GROWTH_PREALLOCATE;
	p->prealloc = a;
	return true;
}

void cumemcap_policy_format_growth(const struct cumemcap_policy *p, char *buf, size_t len)
{
	if (p->growth == CUMEMCAP_GROWTH_ONDEMAND)
		snprintf(buf, len, "ondemand");
	else if (p->prealloc.kind == CUMEMCAP_AMOUNT_BYTES)
		snprintf(buf, len, "preallocate:%llu", (unsigned long long)p->prealloc.bytes);
	else if (p->prealloc.kind == CUMEMCAP_AMOUNT_PERCENT)
		snprintf(buf, len, "preallocate:%u.%03u%%", p->prealloc.permille / 1000,
			 p->prealloc.permille % 1000);
	else
		snprintf(buf, len, "preallocate");
}

static bool parse_estimate(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	struct cumemcap_amount a = { .kind = CUMEMCAP_AMOUNT_BYTES, .bytes = 0 };
	if (strcmp(value, "0") == 0 || (cumemcap_parse_amount(value, &a) && a.kind == CUMEMCAP_AMOUNT_BYTES)) {
		p->overhead_estimate = a.bytes;
		return true;
	}
	snprintf(why, len, " is not a valid size; accepted: 0, or a size per context such as 512MiB (no %%)");
	return false;
}

static bool parse_release(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	/* idle:SECONDS first: a default that parses writes no message (no printf at start) */
	if (strncmp(value, "idle:", 5) == 0 && cumemcap_parse_seconds(value + 5, 1, 86400000u, &p->release_idle_ms)) {
		p->release = CUMEMCAP_RELEASE_IDLE;
		return true;
	}
	/* never or immediate; "idle" alone is not a value */
	int i = word_of(value, release_names + 1, "never, immediate, idle:SECONDS (0.001 to 86400, e.g. idle:30)",
			why, len);
	if (i < 0)
		return false;
	p->release = (enum cumemcap_release)(i + 1);
	p->release_idle_ms = 0;
	return true;
}

/* "WORD:SECONDS", with three decimals or (trim) as few as it needs. */
static void format_seconds(char *buf, size_t len, const char *word, uint32_t ms, bool trim)
{
	char frac[8];
	int n = snprintf(frac, sizeof(frac), ".%03u", ms % 1000);
	while (trim && n > 0 && (frac[n - 1] == '0' || frac[n - 1] == '.'))
		frac[--n] = '\0';
	snprintf(buf, len, "%s:%u%s", word, ms / 1000, frac);
}

void cumemcap_policy_format_release(const struct cumemcap_policy *p, char *buf, size_t len)
{
	if (p->release == CUMEMCAP_RELEASE_IDLE)
		format_seconds(buf, len, "idle", p->release_idle_ms, false);
	else
		snprintf(buf, len, "%s", release_names[p->release]);
}

static bool parse_interval(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (cumemcap_parse_seconds(value, 100, 86400000u, &p->log_interval_ms))
		return true;
	snprintf(why, len, " is not supported; accepted: seconds from 0.1 to 86400 (e.g. 5, 0.5)");
	return false;
}

static bool parse_on_limit(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	uint32_t ms = 0;
	if (strcmp(value, "fail") == 0 ||
	    (strncmp(value, "wait:", 5) == 0 && cumemcap_parse_seconds(value + 5, 1, 86400000u, &ms))) {
		p->wait_ms = ms;
		return true;
	}
	snprintf(why, len,
		 " is not supported; accepted: fail, wait:SECONDS (0.001 to 86400, e.g. wait:30 or wait:0.5)");
	return false;
}

void cumemcap_policy_format_on_limit(const struct cumemcap_policy *p, char *buf, size_t len)
{
	if (p->wait_ms)
		format_seconds(buf, len, "wait", p->wait_ms, true);
	else
		snprintf(buf, len, "fail");
}

/* A path template into dst (size bytes), or why not and what is `accepted`. */
static bool parse_path(const char *value, char *dst, size_t size, const char *accepted, char *why,
		       size_t len)
{
	if (!cumemcap_parse_template(value, size, why, len)) {
		size_t n = strlen(why);
		snprintf(why + n, len - n, "; accepted: %s", accepted);
		return false;
	}
	cumemcap_copy(dst, size, value);
	return true;
}

static bool parse_log(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (strcmp(value, "stderr") == 0 || strcmp(value, "off") == 0) {
		p->log = value[0] == 's' ? CUMEMCAP_LOG_STDERR : CUMEMCAP_LOG_OFF;
		p->log_path[0] = '\0';
		return true;
	}
	if (!parse_path(value, p->log_path, sizeof(p->log_path), "stderr, off, or a path template", why, len))
		return false;
	p->log = CUMEMCAP_LOG_FILE;
	return true;
}

static bool parse_metrics(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (strcmp(value, "off") == 0) {
		p->metrics_path[0] = '\0';
		return true;
	}
	return parse_path(value, p->metrics_path, sizeof(p->metrics_path), "off, or a path template", why, len);
}

/* ---- the group ------------------------------------------------------------------ */

/* Letters, digits and '_': a label name's, and with '.' and '-' a group's. */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

static bool parse_group(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	size_t n = strlen(value);
	if (n > CUMEMCAP_GROUP_NAME_MAX || value[0] == '.' || value[0] == '-' ||
	    strspn(value, NAME_CHARS ".-") != n) {
		snprintf(why, len,
			 " is not a group name; accepted: 1 to %d letters, digits, '.', '_' or '-', "
			 "not starting with '.' or '-' (empty: no group)", CUMEMCAP_GROUP_NAME_MAX);
		return false;
	}
	memcpy(p->group, value, n + 1);
	return true;
}

static bool parse_group_dir(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	size_t n = strlen(value);
	const char *wrong = NULL;
	if (value[0] != '/')
		wrong = "is not an absolute path";
	else if (n >= CUMEMCAP_PATH_MAX)
		wrong = "is too long";
	for (size_t i = 0; !wrong && i < n; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			wrong = "contains a control character";
	if (wrong) {
		snprintf(why, len,
			 " %s; accepted: an absolute directory path (starting with '/') of at most %d bytes "
			 "without control characters, such as %s", wrong, CUMEMCAP_PATH_MAX - 1,
			 CUMEMCAP_DEFAULT_GROUP_DIR);
		return false;
	}
	memcpy(p->group_dir, value, n + 1);
	return true;
}

/* The Unix group of gid:GROUP: a name in the group database, or a number. */
static bool group_id(const char *text, uint32_t *out)
{
	if (!text[0])
		return false;
	char *end;
	errno = 0;
	unsigned long v = strtoul(text, &end, 10);
	if (text[0] >= '0' && text[0] <= '9' && !*end && errno == 0 && v < UINT32_MAX) {
		*out = (uint32_t)v;
		return true;
	}
	return cumemcap_userdb_group_gid(text, out);
}

static bool parse_group_access(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	static const char accepted[] =
		"accepted: user (the state file is 0600, owned by the caller's uid), gid:GROUP (0660, shared "
		"with the members of the Unix group GROUP, a name or a number, such as gid:render)";
	uint32_t gid = 0;
	if (strcmp(value, "user") == 0 || (strncmp(value, "gid:", 4) == 0 && group_id(value + 4, &gid))) {
		p->group_gid = value[0] == 'g';
		p->group_gid_id = gid;
		return true;
	}
	if (strcmp(value, "gid") == 0)
		snprintf(why, len, " names no Unix group (any group of the caller's would let every user of a "
			 "group such as video share the book); %s", accepted);
	else if (strncmp(value, "gid:", 4) == 0)
		snprintf(why, len, " names no Unix group on this system; %s", accepted);
	else
		snprintf(why, len, " is not supported; %s", accepted);
	return false;
}

const char *cumemcap_policy_group_access_name(bool gid)
{
	return gid ? "gid" : "user";
}

/* ---- labels ---------------------------------------------------------------------- */

/* CUMEMCAP_LABELS is kept as given, checked here once (ACCEPTED says how)
 * so the metrics writer only walks it; the writer escapes '\' and '"'. */

/* The labels the metrics writer sets itself (src/log/metrics.c). */
static const char *const reserved_labels[] = { "pid",  "program", "host",      "node",      "pod",
						 "namespace", "container", "gpu", "cuda_device", "uuid",
						 "UUID", "group", NULL };

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

#define LABELS_COUNT_MAX 32

#define ACCEPTED                                                                                          \
	"; accepted: NAME=VALUE[,NAME=VALUE...] (at most %d pairs, %d bytes in all), NAME a Prometheus "      \
	"label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with \"__\", none twice, none of the labels "     \
	"cumemcap sets: pid, program, host, node, pod, namespace, container, gpu, cuda_device, uuid, UUID, " \
	"group), VALUE 1 or more characters without ',' or control characters; empty: no extra labels"

static bool parse_labels(struct cumemcap_policy *p, const char *value, char *why, size_t len)
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
		bool name = kn > 0 && !(k[0] >= '0' && k[0] <= '9') && strspn(k, NAME_CHARS) >= kn, twice = false;
		const char *const *r = reserved_labels;
		while (*r && !(strlen(*r) == kn && memcmp(*r, k, kn) == 0))
			r++;
		const char *c2 = value, *k2, *v2;
		size_t kn2, vn2;
		while (!twice && cumemcap_labels_next(&c2, &k2, &kn2, &v2, &vn2) && k2 != k)
			twice = kn2 == kn && memcmp(k2, k, kn) == 0;
		if (++pairs > LABELS_COUNT_MAX)
			snprintf(what, sizeof(what), ": more than %d labels", LABELS_COUNT_MAX);
		else if (v == k + kn) /* no '=' */
			snprintf(what, sizeof(what), ": \"%.*s\" is not NAME=VALUE", kshow, k);
		else if (!name)
			snprintf(what, sizeof(what), ": \"%.*s\" is not a label name", kshow, k);
		else if (kn >= 2 && k[0] == '_' && k[1] == '_')
			snprintf(what, sizeof(what), ": \"%.*s\" starts with \"__\" (reserved by Prometheus)", kshow, k);
		else if (*r)
			snprintf(what, sizeof(what), ": \"%s\" is a label cumemcap sets itself", *r);
		else if (twice)
			snprintf(what, sizeof(what), ": \"%.*s\" is given twice", kshow, k);
		else if (vn == 0)
			snprintf(what, sizeof(what), ": \"%.*s\" has an empty value", kshow, k);
		for (size_t i = 0, n; !what[0] && i < vn; i += n) {
			const unsigned char *u = (const unsigned char *)v + i;
			n = cumemcap_utf8_len(u, vn - i);
			if (!n || *u < 0x20 || *u == 0x7f)
				snprintf(what, sizeof(what), ": the value of \"%.*s\" has %s", kshow, k,
					 n ? "a control character" : "a byte that is not UTF-8");
		}
	}
	if (what[0]) {
		snprintf(why, len, "%s" ACCEPTED, what, LABELS_COUNT_MAX, CUMEMCAP_LABELS_MAX - 1);
		return false;
	}
	memcpy(p->labels, value, total + 1);
	return true;
}

/* ---- the table --------------------------------------------------------------------- */

/* A setting kept once in the policy, or a limit rule. */
#define IN_POLICY(parser, src) parser, false, offsetof(struct cumemcap_policy, src)
#define RULES(parser, src) parser, true, src

#define PROCESS_WIDE (CUMEMCAP_IN_ENV | CUMEMCAP_IN_GLOBAL | CUMEMCAP_IN_PROGRAM)

const struct cumemcap_setting cumemcap_settings[] = {
	{ "CUMEMCAP_LIMIT", "limit", PROCESS_WIDE | CUMEMCAP_IN_DEVICE,
	  RULES(parse_limit, 0),
	  "SIZE", "the limit on every GPU.",
	  "The most device memory a process may hold on each GPU: bytes (1073741824), a number with "
	  "K/M/G/T/P or KiB/MiB/GiB/TiB/PiB (powers of 1024) or KB/MB/GB/TB/PB (powers of 1000), "
	  "e.g. 8GiB, 512M, 1.5G; or a share of that GPU's memory, e.g. 75% (0-100].",
	  "none (no limit: the run only observes; calls pass through, still counted)", NULL, "90%" },
	{ "CUMEMCAP_DEVICE_LIMITS", "device_limits", PROCESS_WIDE,
	  RULES(parse_devices, 0),
	  "LIST", "per-GPU limits.",
	  "SEL=SIZE[,SEL=SIZE...], SEL being a device ordinal as the process sees it (after "
	  "CUDA_VISIBLE_DEVICES), a UUID (GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f, as nvidia-smi -L "
	  "prints it) or a PCI bus id (0000:3b:00.0); SIZE as for limit. Beats limit on the GPUs it "
	  "names; a selector that matches no GPU is reported once and skipped.",
	  "none", NULL, "0=20GiB,0000:3b:00.0=50%" },
	{ "CUMEMCAP_COUNT", "count", PROCESS_WIDE,
	  IN_POLICY(parse_count, count_src),
	  "footprint|allocations", "what a limit counts.",
	  "What a limit counts: footprint (the allocations and the driver's overhead for the process, "
	  "its contexts and modules, the figure nvidia-smi shows) or allocations (the allocations only).",
	  "footprint", "footprint", NULL },
	{ "CUMEMCAP_OVERHEAD_ESTIMATE", "overhead_estimate", PROCESS_WIDE,
	  IN_POLICY(parse_estimate, estimate_src),
	  "SIZE", "a context's overhead when NVML cannot tell it.",
	  "The overhead per context assumed when NVML cannot tell it (an estimate): a size such as "
	  "512MiB, or 0.",
	  "512MiB", "512MiB", NULL },
	{ "CUMEMCAP_GROWTH", "growth", PROCESS_WIDE,
	  IN_POLICY(parse_growth, growth_src),
	  "ondemand|preallocate[:SIZE]", "how memory is taken from the driver.",
	  "ondemand: take memory from the driver as requests need it; preallocate[:SIZE]: take SIZE "
	  "(default: what the limit leaves) at the first use of each GPU and serve from it.",
	  "ondemand", "ondemand", NULL },
	{ "CUMEMCAP_POOL", "pool", PROCESS_WIDE,
	  IN_POLICY(parse_pool, pool_src),
	  "auto|on|nopack|off", "whether cuMemAlloc is served from pooled segments.",
	  "auto: pooled on the GPUs a limit or a group applies to (every GPU under growth=preallocate), "
	  "every call goes to the driver elsewhere; on: serve cuMemAlloc from pooled segments on every "
	  "GPU; nopack: pooled, but every block its own segment (IPC export works for all); off: every "
	  "call goes to the driver (accounting only).",
	  "auto", "auto", NULL },
	{ "CUMEMCAP_RELEASE", "release", PROCESS_WIDE,
	  IN_POLICY(parse_release, release_src),
	  "idle:SECONDS|immediate|never", "when cached free segments go back to the driver.",
	  "When cached free segments go back to the driver: idle:SECONDS (0.001 to 86400) after they "
	  "fell free, immediate, or never. At the limit they are always released before a request is "
	  "refused.",
	  "idle:30", "idle:30", NULL },
	{ "CUMEMCAP_FRAMEWORK_HINTS", "framework_hints", PROCESS_WIDE,
	  IN_POLICY(parse_hints, hints_src),
	  "on|off", "let TensorFlow and JAX grow instead of preallocating.",
	  "on: when a limit applies to the process (its own or a group's) and growth is ondemand, set "
	  "TF_FORCE_GPU_ALLOW_GROWTH=true unless a TensorFlow memory variable is set, and "
	  "XLA_PYTHON_CLIENT_PREALLOCATE=false unless a JAX/XLA memory variable is set; nothing is set "
	  "without a limit (see docs/frameworks.md). off: set nothing.",
	  "on", "on", NULL },
	{ "CUMEMCAP_LOG", "log", PROCESS_WIDE,
	  IN_POLICY(parse_log, log_src),
	  "TARGET", "the footprint log: a path template, stderr or off.",
	  "Where the footprint log goes: a path template (%p pid, %h host, %n program, %u uid) for a "
	  "JSON Lines file per process; stderr: readable lines (refusals, an exit summary); off. "
	  "The default directory is under $TMPDIR when that is an absolute path (not for setuid "
	  "programs), else /tmp.",
	  "/tmp/cumemcap-%u/%n.%h.%p.jsonl", CUMEMCAP_DEFAULT_LOG, NULL },
	{ "CUMEMCAP_LOG_INTERVAL", "log_interval", PROCESS_WIDE,
	  IN_POLICY(parse_interval, interval_src),
	  "SECONDS", "seconds between footprint samples.",
	  "Seconds between footprint samples in the log and rewrites of the metrics file (0.1 to "
	  "86400).",
	  "5", "5", NULL },
	{ "CUMEMCAP_METRICS", "metrics", PROCESS_WIDE,
	  IN_POLICY(parse_metrics, metrics_src),
	  "TEMPLATE|off", "a Prometheus text file rewritten each interval.",
	  "A path template (as for log) for a Prometheus text file rewritten each interval, or off.",
	  "off", "off", NULL },
	{ "CUMEMCAP_LABELS", "labels", PROCESS_WIDE,
	  IN_POLICY(parse_labels, labels_src),
	  "NAME=VALUE[,...]", "extra labels on every metrics series.",
	  "NAME=VALUE[,NAME=VALUE...]: extra labels on every metrics series (Prometheus label names, "
	  "not starting with __ and not one cumemcap sets itself; at most 32 pairs, 1023 bytes), "
	  "besides pid, program, host and the pod labels taken from NODE_NAME, POD_NAME, "
	  "POD_NAMESPACE and CONTAINER_NAME.",
	  "none", "", "team=vision,job=resnet50" },
	{ "CUMEMCAP_DEBUG", "debug", PROCESS_WIDE,
	  IN_POLICY(parse_debug, debug_src),
	  "doors|off", "a line per dlsym/cuGetProcAddress answer.",
	  "doors: one stderr line per dlsym/cuGetProcAddress answer (what was asked, whether the hook "
	  "or the driver's function was handed out); off.",
	  "off", "off", NULL },
	{ "CUMEMCAP_GROUP", "group", PROCESS_WIDE,
	  IN_POLICY(parse_group, group_src),
	  "NAME", "the group whose budget this process shares.",
	  "A group's name (1-64 of A-Z a-z 0-9 . _ -, not starting with . or -): processes with the "
	  "same name share one budget per physical GPU, besides each one's own limit; a request must "
	  "fit both. Empty: no group (an empty variable turns a file's group off).",
	  "none (no group)", "", "training" },
	{ "CUMEMCAP_GROUP_LIMIT", "group_limit", PROCESS_WIDE,
	  RULES(parse_group_limit, offsetof(struct cumemcap_policy, group_limit_src)),
	  "SIZE|LIST", "the group's budget on each GPU.",
	  "The group's budget per GPU, in the forms of limit and device_limits: one SIZE (or NN%) for "
	  "every GPU, or SEL=SIZE[,SEL=SIZE...]. Needs a group.",
	  "none given here (the group's shared state may hold one)", NULL, "60GiB" },
	{ "CUMEMCAP_GROUP_DIR", "group_dir", PROCESS_WIDE,
	  IN_POLICY(parse_group_dir, group_dir_src),
	  "DIR", "the directory of the group's shared state.",
	  "An absolute directory for the group's shared state and the node's registry of capped "
	  "processes.",
	  CUMEMCAP_DEFAULT_GROUP_DIR, CUMEMCAP_DEFAULT_GROUP_DIR, NULL },
	{ "CUMEMCAP_GROUP_ACCESS", "group_access", PROCESS_WIDE,
	  IN_POLICY(parse_group_access, group_access_src),
	  "user|gid:GROUP", "who may share the group's state.",
	  "user: the group's state file is 0600 and must be owned by the caller's uid; gid:GROUP: 0660, "
	  "its Unix group GROUP (a name or a number), made by and shared with GROUP's members only.",
	  "user", "user", NULL },
	{ "CUMEMCAP_ON_LIMIT", "on_limit", PROCESS_WIDE,
	  IN_POLICY(parse_on_limit, on_limit_src),
	  "fail|wait:SECONDS", "what a request over a limit does.",
	  "What a request over a limit (the process's or the group's) does: fail at once, or "
	  "wait:SECONDS (0.001 to 86400, e.g. wait:30, wait:0.5) for memory to be freed, then fail.",
	  "fail", "fail", NULL },
};

const size_t cumemcap_setting_count = sizeof(cumemcap_settings) / sizeof(cumemcap_settings[0]);
_Static_assert(sizeof(cumemcap_settings) / sizeof(cumemcap_settings[0]) <= CUMEMCAP_SETTINGS_MAX,
	       "CUMEMCAP_SETTINGS_MAX holds every setting");

/* The CUMEMCAP_ variables some part of cumemcap reads besides the settings. */
static const char other_variables[][CUMEMCAP_VARIABLE_MAX] = {
	"CUMEMCAP_CONFIG",        /* the configuration file: policy.c, the launcher */
	"CUMEMCAP_NAMED_UNKNOWN", /* the unknown variables the launcher has named */
	"CUMEMCAP_LAUNCHED",      /* the pid the launcher exec'd as: it says where its log went */
	/* the launcher's own programs (scripts/cumemcap.in) */
	"CUMEMCAP_LIBRARY", "CUMEMCAP_TOOL", "CUMEMCAP_REPORT", "CUMEMCAP_GROUP_TOOL",
	/* the node installer (deploy/kubernetes/install-node.sh) */
	"CUMEMCAP_IMAGE_TREE", "CUMEMCAP_NODE_OPT", "CUMEMCAP_NODE_ETC", "CUMEMCAP_CONFIGMAP",
	"CUMEMCAP_SHARED_DIRS", "CUMEMCAP_SHARED_MODE", "CUMEMCAP_SYNC_SECONDS", "CUMEMCAP_CHECK",
	"CUMEMCAP_INSTALL_ONCE",
	/* the project's scripts and tests (scripts/, tests/) */
	"CUMEMCAP_DEBS_BUILD", "CUMEMCAP_DEBS_SUITE", "CUMEMCAP_FRESH_NAMESPACE", "CUMEMCAP_SHIM",
	"CUMEMCAP_TEST_USERS_NAMESPACE", "CUMEMCAP_TEST_REQUIRE_PROGRAMS",
};

#define OTHER_VARIABLES (sizeof(other_variables) / sizeof(other_variables[0]))

/* The longest setting's variable that `name` ends in after a '_':
 * CUMEMCAP_GPU_LIMIT -> CUMEMCAP_LIMIT, CUMEMCAP_MAX_GROUP_LIMIT -> CUMEMCAP_GROUP_LIMIT. */
static const char *ending_in(const char *name)
{
	const char *best = NULL;
	size_t n = strlen(name), p = strlen("CUMEMCAP_");
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const char *tail = cumemcap_settings[i].variable + p;
		size_t t = strlen(tail);
		if (n > p + t && name[n - t - 1] == '_' && strcmp(name + n - t, tail) == 0 &&
		    (!best || strlen(best) < strlen(cumemcap_settings[i].variable)))
			best = cumemcap_settings[i].variable;
	}
	return best;
}

/* Whether entry ("NAME=VALUE") names the variable `name`: a known one, the
 * start's case, is told without calling libc (its pages stay untouched). */
static bool names(const char *entry, const char *name)
{
	size_t i = 0;
	while (name[i] && entry[i] == name[i])
		i++;
	return !name[i] && (entry[i] == '=' || entry[i] == '\0');
}

bool cumemcap_variable_unknown_line(const char *entry, char *line, size_t len)
{
	char name[96], q[128];
	const char *known[CUMEMCAP_SETTINGS_MAX + OTHER_VARIABLES + 1];
	size_t c = 0;
	if (strncmp(entry, "CUMEMCAP_", 9) != 0)
		return false;
	for (size_t i = 0; i < cumemcap_setting_count; i++)
		known[c++] = cumemcap_settings[i].variable;
	for (size_t i = 0; i < OTHER_VARIABLES; i++)
		known[c++] = other_variables[i];
	known[c] = NULL;
	for (size_t i = 0; i < c; i++)
		if (names(entry, known[i]))
			return false;
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(entry, "="), entry);
	const char *said = getenv("CUMEMCAP_NAMED_UNKNOWN");
	for (const char *w = said; w && *w; w += strspn(w, " ")) {
		size_t k = strcspn(w, " ");
		if (k == strlen(name) && strncmp(w, name, k) == 0)
			return false;
		w += k;
	}
	const char *hint = cumemcap_config_suggest(name, known);
	if (!hint)
		hint = ending_in(name);
	cumemcap_config_quote(q, sizeof(q), name);
	if (hint)
		snprintf(line, len, "unknown variable %s, ignored (did you mean %s?)", q, hint);
	else
		snprintf(line, len, "unknown variable %s, ignored (cumemcap --help lists the variables)", q);
	return true;
}

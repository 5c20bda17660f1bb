/* tool: cumemcap-config, what the launcher's --check-config and
 * --print-config run, and where its generated parts come from.
 *
 *   cumemcap-config --check-config [FILE]
 *       Validate FILE (default: the file the shim would read, from
 *       CUMEMCAP_CONFIG or the built-in default path). Exit 0 when valid,
 *       1 with the error line when not, 2 when there is no file to check.
 *
 *   cumemcap-config --print-config [--json] [--given MAP] [--] [PROGRAM [ARGS...]]
 *       The rules that would apply to PROGRAM on each GPU of this machine,
 *       from the environment and the configuration file, where each value
 *       came from, and which framework hints would be set. Opens the CUDA
 *       driver itself to list the GPUs; a machine without one gets the
 *       process-wide rules only. Exit 0, or 1 when a setting is wrong.
 *
 *   cumemcap-config --check-env [--given MAP] [--] PROGRAM [ARGS...]
 *       Build the rules PROGRAM would get, as the shim would, and exit 0,
 *       or 125 with one line. An unknown CUMEMCAP_ variable gets a line on
 *       stderr (as from --print-config too) and its name on stdout. MAP ("CUMEMCAP_LIMIT=--limit ...") names the
 *       variables the launcher set from its options: the line then names
 *       the option the user typed, not the variable.
 *
 *   cumemcap-config --flag OPTION
 *       The launcher's options for the settings: prints "VARIABLE ARG" for
 *       OPTION (--limit: "CUMEMCAP_LIMIT SIZE"); exit 125 with one line for
 *       an option there is not.
 *
 *   cumemcap-config --print-help options|variables
 *   cumemcap-config --print-example conf|env
 *   cumemcap-config --print-reference
 *       Generated from the table of settings (config-doc.c).
 *
 * Not part of the shim: a plain program linked with the policy layer, so
 * it applies exactly the rules the shim would.
 *
 * Thread safety: single-threaded; it starts no thread, and its policy and
 * GPU list are its own statics, built and read by main's thread only. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "platform/cuda-api.h" /* cuda.h as the shim declares it, for state/ledger.h */
#include "platform/msg.h"
#include "config/cfgfile.h"
#include "config/hints.h"
#include "config/policy.h"
#include "config/settings.h"
#include "driver/nvml.h"
#include "state/ledger.h"
#include "tools/config-doc.h"
#include "tools/json-out.h"

#define EXIT_SETTING 125 /* the launcher's status for a wrong setting or option */

static const char *env_get(const char *name)
{
	return getenv(name);
}

static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

/* ---- messages that name the option the user typed ---------------------- */

static const char *given_map = ""; /* "CUMEMCAP_LIMIT=--limit CUMEMCAP_LOG=--log" */

static bool name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* msg with every variable the launcher set from an option replaced by that
 * option: `CUMEMCAP_LIMIT="12XB"` becomes `--limit "12XB"`, a lone
 * CUMEMCAP_LIMIT becomes --limit. */
static void name_options(const char *msg, char *out, size_t len)
{
	size_t o = 0;
	for (const char *p = msg; *p && o + 1 < len;) {
		bool done = false;
		if (name_char(*p) && (p == msg || !name_char(p[-1]))) {
			for (const char *m = given_map; *m && !done;) {
				while (*m == ' ')
					m++;
				size_t vn = strcspn(m, "="), en = strcspn(m, " ");
				if (en > vn && strncmp(p, m, vn) == 0 && !name_char(p[vn])) {
					bool quoted = p[vn] == '=' && p[vn + 1] == '"';
					o += (size_t)snprintf(out + o, len - o, "%.*s%s", (int)(en - vn - 1), m + vn + 1,
							      quoted ? " " : "");
					p += vn + (quoted ? 1 : 0);
					done = true;
				}
				m += en;
			}
		}
		if (!done && o + 1 < len)
			out[o++] = *p++;
		if (o >= len)
			o = len - 1;
	}
	out[o < len ? o : len - 1] = '\0';
}

/* ---- --check-config ------------------------------------------------------- */

static int check_config(const char *file)
{
	char path[CUMEMCAP_PATH_MAX];
	if (file) {
		if (strlen(file) >= sizeof(path)) {
			fprintf(stderr, "cumemcap: %.200s...: the path is longer than %zu bytes\n", file,
				sizeof(path) - 1);
			return 1;
		}
		snprintf(path, sizeof(path), "%s", file);
		struct stat st;
		if (lstat(path, &st) != 0 && errno == ENOENT) {
			char q[512];
			fprintf(stderr, "cumemcap: %s: cannot open: no such file\n",
				cumemcap_config_quote(q, sizeof(q), path));
			return 2;
		}
	} else {
		char err[2048];
		if (!cumemcap_policy_config_path(env_get, CUMEMCAP_DEFAULT_CONFIG, path, sizeof(path), err,
						 sizeof(err))) {
			fprintf(stderr, "cumemcap: %s\n", err);
			return 1;
		}
		if (!path[0]) {
			const char *named = getenv("CUMEMCAP_CONFIG");
			if (named)
				fprintf(stderr, "cumemcap: no configuration file to check (CUMEMCAP_CONFIG is "
						"empty: no file)\n");
			else
				fprintf(stderr, "cumemcap: no configuration file to check (CUMEMCAP_CONFIG is "
						"not set and %s does not exist)\n", CUMEMCAP_DEFAULT_CONFIG);
			return 2;
		}
	}
	static struct cumemcap_policy p;
	char err[2048];
	/* The file alone: the environment is not the file's fault. */
	if (!cumemcap_policy_build(&p, no_env, path, NULL, 0, "", err, sizeof(err))) {
		fprintf(stderr, "cumemcap: %s\n", err);
		return 1;
	}
	printf("%s: valid (%zu [device] section%s, %zu [program] section%s)\n", path, p.device_section_count,
	       p.device_section_count == 1 ? "" : "s", p.program_section_count,
	       p.program_section_count == 1 ? "" : "s");
	return 0;
}

/* ---- --check-env --------------------------------------------------------- */

static bool build(struct cumemcap_policy *p, int argc, char **argv, char *path, char *err, size_t errlen)
{
	char program[CUMEMCAP_PROGRAM_MAX];
	cumemcap_program_name(argc, argv, program, sizeof(program));
	return cumemcap_policy_config_path(env_get, CUMEMCAP_DEFAULT_CONFIG, path, CUMEMCAP_PATH_MAX, err, errlen) &&
	       cumemcap_policy_build(p, env_get, path, NULL, 0, program, err, errlen);
}

static void report(const char *err)
{
	char named[4096];
	name_options(err, named, sizeof(named));
	fprintf(stderr, "cumemcap: %s\n", named);
}

extern char **environ;

/* One line on stderr per CUMEMCAP_ variable cumemcap does not know, as the
 * shim says it; `names`: their names on stdout too, one line, for the
 * launcher's CUMEMCAP_NAMED_UNKNOWN. */
static void name_unknown(bool names)
{
	const char *sep = "";
	for (char **e = environ; e && *e; e++) {
		char line[256];
		if (!cumemcap_variable_unknown_line(*e, line, sizeof(line)))
			continue;
		fprintf(stderr, "cumemcap: %s\n", line);
		if (names) {
			printf("%s%.*s", sep, (int)strcspn(*e, "="), *e);
			sep = " ";
		}
	}
	if (names && sep[0])
		printf("\n");
}

static int check_env(int argc, char **argv)
{
	static struct cumemcap_policy p;
	char path[CUMEMCAP_PATH_MAX], err[2048];
	name_unknown(true);
	if (!build(&p, argc, argv, path, err, sizeof(err))) {
		report(err);
		return EXIT_SETTING;
	}
	return 0;
}

/* ---- --print-config --------------------------------------------------------- */

struct gpu {
	int ordinal;
	size_t total;
	unsigned char uuid[16];
	char pci[32];
	char name[128];
};

#define MAX_GPUS 64

/* List the GPUs through the driver, as the program would see them. */
static int list_gpus(struct gpu *g, int max, char *why, size_t len)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "no CUDA driver (libcuda.so.1) here");
		return -1;
	}
	CUresult (*init)(unsigned int) = (CUresult (*)(unsigned int))dlsym(h, "cuInit");
	CUresult (*count)(int *) = (CUresult (*)(int *))dlsym(h, "cuDeviceGetCount");
	CUresult (*total)(size_t *, CUdevice) = (CUresult (*)(size_t *, CUdevice))dlsym(h, "cuDeviceTotalMem_v2");
	CUresult (*uuid)(CUuuid *, CUdevice) = (CUresult (*)(CUuuid *, CUdevice))dlsym(h, "cuDeviceGetUuid");
	CUresult (*pci)(char *, int, CUdevice) = (CUresult (*)(char *, int, CUdevice))dlsym(h, "cuDeviceGetPCIBusId");
	CUresult (*name)(char *, int, CUdevice) = (CUresult (*)(char *, int, CUdevice))dlsym(h, "cuDeviceGetName");
	int n = 0;
	if (!init || !count || !total || !uuid || !pci || !name || init(0) != CUDA_SUCCESS ||
	    count(&n) != CUDA_SUCCESS) {
		snprintf(why, len, "the CUDA driver reports no usable GPU");
		return -1;
	}
	if (n > max)
		n = max;
	for (int i = 0; i < n; i++) {
		CUuuid u;
		memset(&g[i], 0, sizeof(g[i]));
		g[i].ordinal = i;
		if (total(&g[i].total, i) != CUDA_SUCCESS || uuid(&u, i) != CUDA_SUCCESS ||
		    pci(g[i].pci, (int)sizeof(g[i].pci), i) != CUDA_SUCCESS ||
		    name(g[i].name, (int)sizeof(g[i].name), i) != CUDA_SUCCESS) {
			snprintf(why, len, "the CUDA driver could not describe GPU %d", i);
			return -1;
		}
		memcpy(g[i].uuid, u.bytes, sizeof(g[i].uuid));
	}
	return n;
}

/* One process-wide setting as --print-config shows it: the file's key, the
 * text form's label and value, the value as the setting would take it. */
struct row {
	const char *key, *label;
	char text[CUMEMCAP_PATH_MAX + 16];
	char value[CUMEMCAP_PATH_MAX + 16];
	char source[CUMEMCAP_PATH_MAX + 16];
};

#define MAX_ROWS 24

static struct row *add_row(struct row *rows, size_t *n, const char *key, const char *label,
			   const struct cumemcap_policy *p, const struct cumemcap_source *src, const char *value)
{
	struct row *r = &rows[(*n)++];
	r->key = key;
	r->label = label;
	snprintf(r->value, sizeof(r->value), "%s", value);
	snprintf(r->text, sizeof(r->text), "%s", value);
	cumemcap_source_format(p, src, r->source, sizeof(r->source));
	return r;
}

static size_t collect(const struct cumemcap_policy *p, struct row *rows)
{
	size_t n = 0;
	char v[64];
	add_row(rows, &n, "count", "count", p, &p->count_src, cumemcap_policy_count_name(p->count));
	snprintf(v, sizeof(v), "%llu", (unsigned long long)p->overhead_estimate);
	struct row *r = add_row(rows, &n, "overhead_estimate", "overhead estimate", p, &p->estimate_src, v);
	cumemcap_fmt_size(p->overhead_estimate, r->text, sizeof(r->text));
	cumemcap_policy_format_growth(p, v, sizeof(v));
	add_row(rows, &n, "growth", "growth", p, &p->growth_src, v);
	add_row(rows, &n, "pool", "pool", p, &p->pool_src, cumemcap_policy_pool_name(p->pool));
	cumemcap_policy_format_release(p, v, sizeof(v));
	add_row(rows, &n, "release", "release", p, &p->release_src, v);
	add_row(rows, &n, "framework_hints", "framework hints", p, &p->hints_src, p->framework_hints ? "on" : "off");
	add_row(rows, &n, "log", "log", p, &p->log_src,
		p->log == CUMEMCAP_LOG_STDERR ? "stderr" : p->log == CUMEMCAP_LOG_OFF ? "off" : p->log_path);
	snprintf(v, sizeof(v), "%u.%03u", p->log_interval_ms / 1000, p->log_interval_ms % 1000);
	r = add_row(rows, &n, "log_interval", "log interval", p, &p->interval_src, v);
	snprintf(r->text, sizeof(r->text), "%s s", v);
	add_row(rows, &n, "metrics", "metrics", p, &p->metrics_src, p->metrics_path[0] ? p->metrics_path : "off");
	add_row(rows, &n, "debug", "debug", p, &p->debug_src, p->debug_doors ? "doors" : "off");
	r = add_row(rows, &n, "group", "group", p, &p->group_src, p->group);
	if (!p->group[0])
		snprintf(r->text, sizeof(r->text), "none");
	add_row(rows, &n, "group_dir", "group dir", p, &p->group_dir_src, p->group_dir);
	add_row(rows, &n, "group_access", "group access", p, &p->group_access_src,
		cumemcap_policy_group_access_name(p->group_gid));
	cumemcap_policy_format_on_limit(p, v, sizeof(v));
	add_row(rows, &n, "on_limit", "on_limit", p, &p->on_limit_src, v);
	return n;
}

static void print_hints_text(const struct cumemcap_hints *h)
{
	static const char *const why[] = {
		[CUMEMCAP_HINTS_OFF] = "framework_hints is off",
		[CUMEMCAP_HINTS_NO_LIMIT] = "no limit applies (observe only)",
		[CUMEMCAP_HINTS_PREALLOC] = "growth is preallocate",
	};
	if (h->state != CUMEMCAP_HINTS_APPLY) {
		printf(": none set, %s\n", why[h->state]);
		return;
	}
	const char *sep = ": ";
	for (size_t i = 0; i < h->count; i++) {
		if (h->hint[i].user)
			printf("%s%s left alone (%s is set)", sep, h->hint[i].framework, h->hint[i].user);
		else
			printf("%ssets %s=%s", sep, h->hint[i].variable, h->hint[i].value);
		sep = "; ";
	}
	printf("\n");
}

static int print_config(int argc, char **argv, bool json)
{
	static struct cumemcap_policy p;
	static struct row rows[MAX_ROWS];
	static struct gpu gpus[MAX_GPUS];
	char path[CUMEMCAP_PATH_MAX], err[2048], where[CUMEMCAP_PATH_MAX + 16];
	name_unknown(false);
	if (!build(&p, argc, argv, path, err, sizeof(err))) {
		report(err);
		return 1;
	}
	size_t nrows = collect(&p, rows);
	struct cumemcap_hints hints;
	cumemcap_hints_plan(&p, env_get, &hints);
	char why[256];
	int n = list_gpus(gpus, MAX_GPUS, why, sizeof(why));
	enum cumemcap_overhead_source expected =
		cumemcap_overhead_expected(cumemcap_nvml_available(), cumemcap_nvml_host_pids());

	if (json) {
		printf("{\"program\":");
		cumemcap_json_put_str(stdout, argc ? p.program : NULL);
		printf(",\"config\":");
		cumemcap_json_put_str(stdout, path[0] ? path : NULL);
		if (p.program_section_line)
			printf(",\"program_section_line\":%u", p.program_section_line);
		else
			printf(",\"program_section_line\":null");
		printf(",\"overhead_source\":\"%s\",\"settings\":{", cumemcap_overhead_source_name(expected));
		for (size_t i = 0; i < nrows; i++) {
			printf("%s", i ? "," : "");
			cumemcap_json_put_str(stdout, rows[i].key);
			printf(":{\"value\":");
			cumemcap_json_put_str(stdout, rows[i].value);
			printf(",\"source\":");
			cumemcap_json_put_str(stdout, rows[i].source);
			printf("}");
		}
		printf("},\"framework_hints\":{\"state\":\"%s\",\"hints\":[", cumemcap_hints_state_name(hints.state));
		for (size_t i = 0; i < hints.count; i++) {
			printf("%s{\"framework\":", i ? "," : "");
			cumemcap_json_put_str(stdout, hints.hint[i].framework);
			printf(",\"variable\":");
			cumemcap_json_put_str(stdout, hints.hint[i].variable);
			printf(",\"value\":");
			cumemcap_json_put_str(stdout, hints.hint[i].value);
			printf(",\"set\":%s,\"user\":", hints.hint[i].user ? "false" : "true");
			cumemcap_json_put_str(stdout, hints.hint[i].user);
			printf("}");
		}
		printf("]},\"gpus\":");
		if (n < 0) {
			printf("null,\"gpus_error\":");
			cumemcap_json_put_str(stdout, why);
		} else {
			printf("[");
		}
	} else {
		printf("program:        %s\n", argc ? p.program : "(none given: cumemcap --print-config -- PROGRAM ARGS)");
		printf("configuration:  %s", path[0] ? path : "none");
		if (p.program_section_line)
			printf(" ([program] section at line %u applies)", p.program_section_line);
		printf("\n");
		for (size_t i = 0; i < nrows; i++) {
			const struct row *r = &rows[i];
			char label[32];
			if (strncmp(r->key, "group_", 6) == 0 && !p.group[0])
				continue; /* dir and access matter with a group only */
			if (strcmp(r->key, "overhead_estimate") == 0) {
				printf("overhead:       %-10s (", cumemcap_overhead_source_name(expected));
				if (expected == CUMEMCAP_OVERHEAD_nvml)
					printf("NVML lists this process's pids; the estimate, %s (%s), only if it does not)\n",
					       r->text, r->source);
				else if (expected == CUMEMCAP_OVERHEAD_delta)
					printf("NVML is here but this PID namespace is not the host's: the GPU's used "
					       "memory before and after the first context)\n");
				else
					printf("no NVML: %s per context (%s))\n", r->text, r->source);
				continue;
			}
			snprintf(label, sizeof(label), "%s:", r->label);
			printf("%-15s %-10s (%s)", label, r->text, r->source);
			if (strcmp(r->key, "framework_hints") == 0)
				print_hints_text(&hints);
			else
				printf("\n");
		}
		if (n < 0)
			printf("GPUs:           %s; limits are decided per GPU when the program first uses one\n", why);
	}
	for (int i = 0; i < n; i++) {
		struct cumemcap_source src, gsrc = { 0 };
		char uuid[64], total[32], limit[32], glimit[32], gwhere[CUMEMCAP_PATH_MAX + 16];
		struct cumemcap_selector s = { .kind = CUMEMCAP_SEL_UUID };
		memcpy(s.uuid, gpus[i].uuid, sizeof(s.uuid));
		cumemcap_selector_format(&s, uuid, sizeof(uuid));
		uint64_t l = cumemcap_policy_limit(&p, false, i, gpus[i].uuid, gpus[i].pci,
						   gpus[i].total, &src);
		cumemcap_source_format(&p, &src, where, sizeof(where));
		uint64_t g = UINT64_MAX;
		if (p.group[0]) {
			g = cumemcap_policy_limit(&p, true, i, gpus[i].uuid, gpus[i].pci,
						  gpus[i].total, &gsrc);
			cumemcap_source_format(&p, &gsrc, gwhere, sizeof(gwhere));
		}
		if (json) {
			printf("%s{\"gpu\":%d,\"name\":", i ? "," : "", i);
			cumemcap_json_put_str(stdout, gpus[i].name);
			printf(",\"uuid\":");
			cumemcap_json_put_str(stdout, uuid);
			printf(",\"pci\":");
			cumemcap_json_put_str(stdout, gpus[i].pci);
			printf(",\"total\":%zu,\"limit\":", gpus[i].total);
			if (l == UINT64_MAX)
				printf("null");
			else
				printf("%llu", (unsigned long long)l);
			printf(",\"limit_source\":");
			cumemcap_json_put_str(stdout, where);
			printf(",\"group_limit\":");
			if (g == UINT64_MAX)
				printf("null");
			else
				printf("%llu", (unsigned long long)g);
			printf(",\"group_limit_source\":");
			cumemcap_json_put_str(stdout, p.group[0] ? gwhere : NULL);
			printf("}");
			continue;
		}
		printf("GPU %d:          %s %s %s, %s: limit %s (%s)", i, gpus[i].name, uuid, gpus[i].pci,
		       cumemcap_fmt_size(gpus[i].total, total, sizeof(total)),
		       l == UINT64_MAX ? "none" : cumemcap_fmt_size(l, limit, sizeof(limit)), where);
		if (p.group[0])
			printf(", group limit %s (%s)",
			       g == UINT64_MAX ? "none" : cumemcap_fmt_size(g, glimit, sizeof(glimit)), gwhere);
		printf("\n");
	}
	if (json)
		printf("%s}\n", n < 0 ? "" : "]");
	return 0;
}

/* ---- --flag --------------------------------------------------------------- */

static int flag(const char *option)
{
	const struct cumemcap_setting *s = cumemcap_setting_by_flag(option);
	if (s && (s->scope & CUMEMCAP_IN_ENV)) {
		printf("%s %s\n", s->variable, s->arg);
		return 0;
	}
	char name[128], q[128];
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(option, "="), option);
	static char flags[CUMEMCAP_SETTINGS_MAX + 8][64];
	const char *candidates[CUMEMCAP_SETTINGS_MAX + 8];
	size_t n = 0;
	for (size_t i = 0; i < cumemcap_setting_count; i++, n++) {
		cumemcap_setting_flag(&cumemcap_settings[i], flags[n], sizeof(flags[n]));
		candidates[n] = flags[n];
	}
	static const char *const own[] = { "--config", "--check-config", "--print-config", "--quiet", "--help",
					   "--version" };
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		candidates[n++] = own[i];
	candidates[n] = NULL;
	const char *hint = cumemcap_config_suggest(name, candidates);
	if (hint)
		fprintf(stderr, "cumemcap: unknown option \"%s\" (did you mean %s?); see cumemcap --help\n",
			cumemcap_config_quote(q, sizeof(q), name), hint);
	else
		fprintf(stderr, "cumemcap: unknown option \"%s\"; see cumemcap --help\n",
			cumemcap_config_quote(q, sizeof(q), name));
	return EXIT_SETTING;
}

/* ---- main ----------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "Usage: cumemcap-config --check-config [FILE]\n"
		   "       cumemcap-config --print-config [--json] [--given MAP] [--] [PROGRAM [ARGS...]]\n"
		   "       cumemcap-config --check-env [--given MAP] [--] PROGRAM [ARGS...]\n"
		   "       cumemcap-config --flag OPTION\n"
		   "       cumemcap-config --print-help options|variables\n"
		   "       cumemcap-config --print-example conf|env\n"
		   "       cumemcap-config --print-reference\n"
		   "       cumemcap-config --version\n"
		   "\n"
		   "The launcher's helper (see cumemcap --help); exit status 2 for a usage error.\n");
}

int main(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("cumemcap-config %s\n", CUMEMCAP_VERSION_STRING);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "--check-config") == 0 && argc <= 3)
		return check_config(argc == 3 ? argv[2] : NULL);
	if (argc == 3 && strcmp(argv[1], "--flag") == 0)
		return flag(argv[2]);
	if (argc == 3 && strcmp(argv[1], "--print-help") == 0) {
		int r = cumemcap_doc_help(stdout, argv[2]);
		if (r)
			usage(stderr);
		return r;
	}
	if (argc == 3 && strcmp(argv[1], "--print-example") == 0) {
		int r = cumemcap_doc_example(stdout, argv[2]);
		if (r)
			usage(stderr);
		return r;
	}
	if (argc == 2 && strcmp(argv[1], "--print-reference") == 0)
		return cumemcap_doc_reference(stdout);
	if (argc >= 2 && (strcmp(argv[1], "--print-config") == 0 || strcmp(argv[1], "--check-env") == 0)) {
		bool print = argv[1][2] == 'p', json = false;
		int i = 2;
		for (; i < argc; i++) {
			if (print && strcmp(argv[i], "--json") == 0) {
				json = true;
			} else if (strcmp(argv[i], "--given") == 0 && i + 1 < argc) {
				given_map = argv[++i];
			} else if (strcmp(argv[i], "--") == 0) {
				i++;
				break;
			} else if (argv[i][0] == '-') {
				fprintf(stderr, "cumemcap: %s: unknown option \"%s\"; accepted: %s\n", argv[1], argv[i],
					print ? "--json, then -- PROGRAM ARGS" : "-- PROGRAM ARGS");
				return 2;
			} else {
				break;
			}
		}
		if (print)
			return print_config(argc - i, argv + i, json);
		if (i >= argc) {
			usage(stderr);
			return 2;
		}
		return check_env(argc - i, argv + i);
	}
	usage(stderr);
	return 2;
}

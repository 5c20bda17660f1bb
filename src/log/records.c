/* log/records: see records.h. Which figures a record and the summary
 * carry, named and ordered, is the figure list's (state/figures.h), read
 * through the ledger's snapshot (cumemcap_ledger_read). */
#include "config.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/records.h"
#include "state/device.h"
#include "group/group.h"
#include "state/ledger.h"
#include "driver/nvml.h"
#include "config/hints.h"
#include "config/policy.h"

static char identity[2048]; /* ,"pid":...,"program":...,"host":... */
static size_t identity_len;
char log_host[256];
static _Atomic uint64_t peak_driver[CUMEMCAP_MAX_DEVICES]; /* the highest NVML figure + 1 (0: none) */
static _Atomic unsigned gpu_index[CUMEMCAP_MAX_DEVICES];   /* nvidia-smi's index + 1 (0: not known) */
static _Atomic int nvml_loads = -1; /* -1 until log_probe_nvml asked */

void log_identity(void)
{
	if (gethostname(log_host, sizeof(log_host) - 1) != 0) /* the last byte stays 0 */
		log_host[0] = '\0';
	struct out o = OUT(identity);
	out_key_u(&o, "pid", (uint64_t)getpid());
	out_key_json(&o, "program", cumemcap_policy()->program);
	out_key_json(&o, "host", log_host);
	identity_len = o.lost ? 0 : o.len;
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		atomic_store(&peak_driver[dev], 0);
}

void log_begin(struct out *o, const char *type)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	out_strs(o, "{\"v\":2,\"type\":\"", type, "\",\"t\":", NULL);
	out_ms(o, ms);
	out_key(o, "time");
	out_time(o, ms);
	if (identity_len)
		out_put(o, identity, identity_len);
	else
		out_key_u(o, "pid", (uint64_t)getpid());
}

static void learn_index(int dev, const unsigned char *uuid)
{
	unsigned index;
	if (!atomic_load(&gpu_index[dev]) && cumemcap_nvml_index(uuid, &index))
		atomic_store(&gpu_index[dev], index + 1);
}

void log_probe_nvml(void)
{
	if (atomic_load(&nvml_loads) < 0)
		atomic_store(&nvml_loads, cumemcap_nvml_available() ? 1 : 0);
	if (atomic_load(&nvml_loads) != 1)
		return;
	const struct cumemcap_device_info *all;
	int count = cumemcap_device_all(&all);
	for (int d = 0; d < count && d < CUMEMCAP_MAX_DEVICES; d++)
		learn_index(d, all[d].uuid);
}

int log_gpu_index(int dev)
{
	return dev >= 0 && dev < CUMEMCAP_MAX_DEVICES ? (int)atomic_load(&gpu_index[dev]) - 1 : -1;
}

void log_put_gpu(struct out *o, int dev, bool first)
{
	out_str(o, first ? "\"gpu\":" : ",\"gpu\":");
	out_u(o, (uint64_t)dev);
	const struct cumemcap_device_info *info = cumemcap_device_info(dev), *all;
	if (!info && dev >= 0 && dev < cumemcap_device_all(&all))
		info = &all[dev]; /* described, not used yet (the start record) */
	if (info) {
		char uuid[48];
		cumemcap_nvml_format_uuid(info->uuid, "GPU-", uuid);
		out_key_json(o, "uuid", uuid);
	}
	int index = log_gpu_index(dev);
	if (index >= 0)
		out_key_u(o, "index", (uint64_t)index);
}

static void put_source(struct out *o, const char *key, const struct cumemcap_source *src)
{
	char where[CUMEMCAP_PATH_MAX + 16];
	cumemcap_source_format(cumemcap_policy(), src, where, sizeof(where));
	out_key_json(o, key, where);
}

/* ,"argv":[...] from /proc/self/cmdline, and "argv_truncated" when cut. */
static void put_argv(struct out *o)
{
	static char cmdline[32 * 1024];
	size_t n = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t r;
		while (n < sizeof(cmdline) && (r = read(fd, cmdline + n, sizeof(cmdline) - n)) > 0)
			n += (size_t)r;
		close(fd);
	}
	/* Escaping may grow an argument sixfold: keep a third for the rest. */
	bool cut = n == sizeof(cmdline);
	out_key(o, "argv");
	out_str(o, "[");
	for (size_t i = 0, first = 1; i < n; first = 0) {
		size_t len = strnlen(cmdline + i, n - i);
		if (o->len + 6 * len + 8 > o->cap / 3 * 2) {
			cut = true;
			break;
		}
		out_str(o, first ? "" : ",");
		out_quoted(o, cmdline + i, len, SIZE_MAX, false);
		i += len + 1;
	}
	out_str(o, cut ? "],\"argv_truncated\":true" : "]");
}

void log_start_record(struct out *o, const char *path, const char *metrics, uint32_t interval_ms)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	log_begin(o, "start");
	out_key_u(o, "ppid", (uint64_t)getppid());
	out_key_u(o, "uid", (uint64_t)getuid());
	put_argv(o);
	int dv = cumemcap_device_driver_version();
	out_key_u_or_null(o, "driver_version", dv > 0, (uint64_t)(dv > 0 ? dv : 0));
	out_key_json(o, "cumemcap", CUMEMCAP_VERSION_STRING);
	out_key(o, "interval");
	out_ms(o, interval_ms);
	out_key_json(o, "log", path);
	out_key_json(o, "metrics", metrics);
	out_key_json(o, "config", p->config_path[0] ? p->config_path : NULL);

	const struct cumemcap_device_info *all;
	int count = cumemcap_device_all(&all);
	out_key(o, "gpus");
	out_str(o, "[");
	for (int d = 0; d < count; d++) {
		out_str(o, d ? ",{" : "{");
		log_put_gpu(o, d, true);
		out_key_json(o, "pci", all[d].pci_bus_id);
		out_key_u(o, "capacity", all[d].total);
		out_key_u_or_null(o, "limit", all[d].limit != CUMEMCAP_NO_LIMIT, all[d].limit);
		put_source(o, "limit_source", &all[d].limit_src);
		out_str(o, "}");
	}
	out_str(o, "]");

	char growth[64], release[64], on_limit[32];
	cumemcap_policy_format_growth(p, growth, sizeof(growth));
	cumemcap_policy_format_release(p, release, sizeof(release));
	cumemcap_policy_format_on_limit(p, on_limit, sizeof(on_limit));
	/* value NULL: the log interval, a number of seconds */
	const struct {
		const char *name, *value;
		const struct cumemcap_source *src;
	} rules[] = {
		{ "count", cumemcap_policy_count_name(p->count), &p->count_src },
		{ "growth", growth, &p->growth_src },
		{ "pool", cumemcap_policy_pool_name(p->pool), &p->pool_src },
		{ "release", release, &p->release_src },
		{ "framework_hints", p->framework_hints ? "on" : "off", &p->hints_src },
		{ "log_interval", NULL, &p->interval_src },
		{ "on_limit", on_limit, &p->on_limit_src },
	};
	out_key(o, "rules");
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		out_strs(o, i ? ",\"" : "{\"", rules[i].name, "\":{\"value\":", NULL);
		if (rules[i].value)
			out_json(o, rules[i].value);
		else
			out_ms(o, p->log_interval_ms);
		put_source(o, "source", rules[i].src);
		out_str(o, "}");
	}
	out_str(o, "}");
	out_key(o, "group");
	if (cumemcap_group_member()) {
		out_str(o, "{\"name\":");
		out_json(o, cumemcap_group_name());
		out_key_json(o, "book", cumemcap_group_path());
		out_key_json(o, "access", cumemcap_policy_group_access_name(p->group_gid));
		out_str(o, "}");
	} else {
		out_str(o, "null");
	}
	/* Hints set, and those left to the user's variables (config/hints.h). */
	const struct cumemcap_hints *h = cumemcap_hints_applied();
	out_key(o, "framework_hints");
	if (h) {
		out_str(o, "{\"state\":");
		out_json(o, cumemcap_hints_state_name(h->state));
		out_str(o, ",\"hints\":[");
		for (size_t i = 0; i < h->count; i++) {
			out_str(o, i ? ",{\"framework\":" : "{\"framework\":");
			out_json(o, h->hint[i].framework);
			out_key_json(o, "variable", h->hint[i].variable);
			out_key_json(o, "value", h->hint[i].value);
			out_str(o, h->hint[i].user ? ",\"set\":false" : ",\"set\":true");
			out_key_json(o, "user", h->hint[i].user);
			out_str(o, "}");
		}
		out_str(o, "]}");
	} else {
		out_str(o, "null");
	}
	/* Where overhead should come from (`overhead` records say where it did). */
	int nvml = atomic_load(&nvml_loads);
	bool host_pids = cumemcap_nvml_host_pids();
	out_key(o, "overhead");
	out_str(o, "{\"expected_source\":");
	out_json(o, nvml < 0 ? NULL : cumemcap_overhead_source_name(cumemcap_overhead_expected(nvml, host_pids)));
	out_key(o, "nvml");
	out_str(o, nvml < 0 ? "null" : nvml ? "true" : "false");
	out_key(o, "host_pid_namespace");
	out_str(o, host_pids ? "true" : "false");
	out_key_u(o, "estimate", p->overhead_estimate);
	put_source(o, "estimate_source", &p->estimate_src);
	out_str(o, "}}\n");
}

/* A described GPU's figures but NVML's, and its facts; NULL for another,
 * whose ledger pages stay untouched (not faulted in at exit). AS-safe. */
static const struct cumemcap_device_info *read_figures(int dev, struct cumemcap_figures *f)
{
	const struct cumemcap_device_info *info = cumemcap_device_info(dev);
	if (info) {
		cumemcap_ledger_read(dev, f);
		f->v[CUMEMCAP_FIG_total] = info->total;
	}
	return info;
}

/* A one-byte column of struct cumemcap_figure_info, for put_figures. */
#define COLUMN(name) offsetof(struct cumemcap_figure_info, name)
_Static_assert(sizeof(cumemcap_figure_info[0].event) == 1 && sizeof(cumemcap_figure_info[0].sample) == 1 &&
		       sizeof(cumemcap_figure_info[0].exit) == 1 && sizeof(cumemcap_figure_info[0].summary) == 1,
	       "one-byte columns");

/* The figures whose column `col` is 1, then 2: as ,"key":value, or (human,
 * the stderr summary) as `pre` value `post`, bytes as sizes. */
static void put_figures(struct out *o, const struct cumemcap_figures *f, size_t col, bool human)
{
	for (unsigned part = 1; part <= 2; part++)
		for (size_t i = 0; i < CUMEMCAP_FIG_COUNT; i++) {
			const struct cumemcap_figure_info *fi = &cumemcap_figure_info[i];
			bool known = !fi->null || f->v[i] != CUMEMCAP_FIGURE_NONE;
			if (((const unsigned char *)fi)[col] != part)
				continue;
			if (!human) {
				out_key_u_or_null(o, fi->key, known, f->v[i]);
				continue;
			}
			out_str(o, fi->pre);
			if (!known)
				out_str(o, "none");
			else if (fi->unit == CUMEMCAP_FU_bytes)
				out_size(o, f->v[i]);
			else
				out_u(o, f->v[i]);
			out_str(o, fi->post);
		}
}

void log_put_figures(struct out *o, int dev)
{
	const struct cumemcap_device_info *info = cumemcap_device_info(dev);
	struct cumemcap_figures f;
	cumemcap_ledger_read_growth(dev);
	cumemcap_ledger_read(dev, &f);
	f.v[CUMEMCAP_FIG_total] = info ? info->total : CUMEMCAP_FIGURE_NONE;
	put_figures(o, &f, COLUMN(event), false);
}

int log_gather(struct gpu_figures *all)
{
	int n = 0;
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		const struct cumemcap_device_info *info = cumemcap_device_info(dev);
		if (!info)
			continue;
		struct gpu_figures *g = &all[n++];
		uint64_t *v = g->f.v, driver = 0;
		g->dev = dev;
		cumemcap_ledger_read_growth(dev);
		read_figures(dev, &g->f);
		cumemcap_nvml_format_uuid(info->uuid, "GPU-", g->uuid);
		learn_index(dev, info->uuid);
		bool known = cumemcap_nvml_process(info->uuid, (unsigned)getpid(), &driver) == CUMEMCAP_NVML_LISTED;
		uint64_t reserved = v[CUMEMCAP_FIG_reserved];
		v[CUMEMCAP_FIG_driver_used] = known ? driver : CUMEMCAP_FIGURE_NONE;
		v[CUMEMCAP_FIG_context_overhead] =
			known && driver >= reserved ? driver - reserved : CUMEMCAP_FIGURE_NONE;
		if (known && driver + 1 > atomic_load(&peak_driver[dev])) /* only the worker writes it */
			atomic_store(&peak_driver[dev], driver + 1);
	}
	return n;
}

/* ,"gpus":[...] of a sample or the exit record. */
static void put_gpus(struct out *o, const struct gpu_figures *all, int n, size_t col)
{
	out_key(o, "gpus");
	out_str(o, "[");
	for (int i = 0; i < n; i++) {
		enum cumemcap_overhead_source source = cumemcap_ledger_source(all[i].dev);
		out_str(o, i ? ",{" : "{");
		log_put_gpu(o, all[i].dev, true);
		put_figures(o, &all[i].f, col, false);
		out_key_json(o, "overhead_source", cumemcap_overhead_source_name(source));
		out_str(o, "}");
	}
	out_str(o, "]");
}

void log_sample_record(struct out *o, const struct gpu_figures *all, int n, uint64_t dropped)
{
	log_begin(o, "sample");
	put_gpus(o, all, n, COLUMN(sample));
	out_key_u(o, "events_dropped", dropped);
	out_str(o, "}\n");
}

bool log_used_gpu(void)
{
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		struct cumemcap_figures f;
		if (!read_figures(dev, &f))
			continue;
		if (f.v[CUMEMCAP_FIG_allocs] + f.v[CUMEMCAP_FIG_frees] + f.v[CUMEMCAP_FIG_refusals] +
		    f.v[CUMEMCAP_FIG_driver_oom])
			return true;
	}
	return false;
}

void log_stderr_summary(void)
{
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		struct cumemcap_figures f;
		const struct cumemcap_device_info *info = read_figures(dev, &f);
		if (!info || f.v[CUMEMCAP_FIG_allocs] + f.v[CUMEMCAP_FIG_refusals] == 0)
			continue;
		char buf[512];
		struct out o = OUT(buf);
		out_str(&o, "device ");
		out_u(&o, (uint64_t)dev);
		out_strs(&o, " (", info->pci_bus_id, "): ", NULL);
		put_figures(&o, &f, COLUMN(summary), true);
		out_say(&o);
	}
}

void log_exit_record(struct out *o, int signo, const char *signal_name, uint64_t samples, uint64_t dropped)
{
	log_begin(o, "exit");
	out_key(o, "reason");
	out_str(o, signo ? "\"signal\"" : "\"exit\"");
	if (signo) {
		out_key_u(o, "signal", (uint64_t)signo);
		if (signal_name)
			out_key_json(o, "signal_name", signal_name);
	}
	out_key_u(o, "samples", samples);
	out_key_u(o, "events_dropped", dropped);
	static struct gpu_figures all[CUMEMCAP_MAX_DEVICES]; /* the one claimant's */
	int n = 0;
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		uint64_t pd = atomic_load(&peak_driver[dev]);
		all[n].dev = dev;
		if (read_figures(dev, &all[n].f))
			all[n++].f.v[CUMEMCAP_FIG_peak_driver_used] = pd ? pd - 1 : CUMEMCAP_FIGURE_NONE;
	}
	put_gpus(o, all, n, COLUMN(exit));
	out_str(o, "}\n");
}

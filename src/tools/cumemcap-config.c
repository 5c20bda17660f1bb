/* tool: cumemcap-config, what the launcher's --check-config and
 * --print-config run.
 *
 *   cumemcap-config --check-config [FILE]
 *       Validate FILE (default: the file the shim would read, from
 *       CUMEMCAP_CONFIG or the built-in default path). Exit 0 when valid,
 *       1 with the error line when not, 2 when there is no file to check.
 *
 *   cumemcap-config --print-config [-- PROGRAM [ARGS...]]
 *       The rules that would apply to PROGRAM on each GPU of this machine,
 *       from the environment and the configuration file, and where each
 *       value came from. Opens the CUDA driver itself to list the GPUs; a
 *       machine without one gets the process-wide rules only.
 *
 * Not part of the shim: a plain program linked with the policy layer, so
 * it applies exactly the rules the shim would.
 *
 * Thread safety: single-threaded; it starts no thread, and its policy and
 * GPU list are its own statics, built and read by main's thread only. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/cuda-api.h" /* cuda.h as the shim declares it, for state/ledger.h */
#include "platform/msg.h"
#include "config/policy.h"
#include "driver/nvml.h"
#include "state/ledger.h"

static const char *env_get(const char *name)
{
	return getenv(name);
}

static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

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
	} else {
		char err[2048];
		if (!cumemcap_policy_config_path(env_get, CUMEMCAP_DEFAULT_CONFIG, path, sizeof(path), err,
						 sizeof(err))) {
			fprintf(stderr, "cumemcap: %s\n", err);
			return 1;
		}
		if (!path[0]) {
			fprintf(stderr, "cumemcap: no configuration file to check (CUMEMCAP_CONFIG is "
					"not set and %s does not exist)\n", CUMEMCAP_DEFAULT_CONFIG);
			return 2;
		}
	}
	static struct cumemcap_policy p;
	char err[2048];
	/* The file alone: the environment is not the file's fault. */
	if (!cumemcap_policy_build(&p, no_env, path, "", err, sizeof(err))) {
		fprintf(stderr, "cumemcap: %s\n", err);
		return 1;
	}
	printf("%s: valid (%zu [device] section%s)\n", path, p.device_section_count,
	       p.device_section_count == 1 ? "" : "s");
	return 0;
}

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

static const char *log_name(const struct cumemcap_policy *p)
{
	return p->log == CUMEMCAP_LOG_STDERR ? "stderr" : p->log == CUMEMCAP_LOG_OFF ? "off" : p->log_path;
}

static int print_config(int argc, char **argv)
{
	static struct cumemcap_policy p;
	char path[CUMEMCAP_PATH_MAX], program[CUMEMCAP_PROGRAM_MAX], err[2048], where[CUMEMCAP_PATH_MAX + 16];
	cumemcap_program_name(argc, argv, program, sizeof(program));
	if (!cumemcap_policy_config_path(env_get, CUMEMCAP_DEFAULT_CONFIG, path, sizeof(path), err,
					 sizeof(err)) ||
	    !cumemcap_policy_build(&p, env_get, path, program, err, sizeof(err))) {
		fprintf(stderr, "cumemcap: %s\n", err);
		return 1;
	}
	printf("program:        %s\n", argc ? program : "(none given: cumemcap --print-config -- PROGRAM ARGS)");
	printf("configuration:  %s", path[0] ? path : "none");
	if (p.program_section_line)
		printf(" ([program] section at line %u applies)", p.program_section_line);
	printf("\n");
	char value[64];
	cumemcap_source_format(&p, &p.count_src, where, sizeof(where));
	printf("count:          %-10s (%s)\n", cumemcap_policy_count_name(p.count), where);
	enum cumemcap_overhead_source expected =
		cumemcap_overhead_expected(cumemcap_nvml_available(), cumemcap_nvml_host_pids());
	cumemcap_source_format(&p, &p.estimate_src, where, sizeof(where));
	cumemcap_fmt_size(p.overhead_estimate, value, sizeof(value));
	printf("overhead:       %-10s (", cumemcap_overhead_source_name(expected));
	if (expected == CUMEMCAP_OVERHEAD_nvml)
		printf("NVML lists this process's pids; the estimate, %s (%s), only if it does not)\n", value, where);
	else if (expected == CUMEMCAP_OVERHEAD_delta)
		printf("NVML is here but this PID namespace is not the host's: the GPU's used memory before and "
		       "after the first context)\n");
	else
		printf("no NVML: %s per context (%s))\n", value, where);
	cumemcap_policy_format_growth(&p, value, sizeof(value));
	cumemcap_source_format(&p, &p.growth_src, where, sizeof(where));
	printf("growth:         %-10s (%s)\n", value, where);
	cumemcap_source_format(&p, &p.pool_src, where, sizeof(where));
	printf("pool:           %-10s (%s)\n", cumemcap_policy_pool_name(p.pool), where);
	cumemcap_policy_format_release(&p, value, sizeof(value));
	cumemcap_source_format(&p, &p.release_src, where, sizeof(where));
	printf("release:        %-10s (%s)\n", value, where);
	cumemcap_source_format(&p, &p.hints_src, where, sizeof(where));
	printf("framework hints: %-9s (%s)\n", p.framework_hints ? "on" : "off", where);
	cumemcap_source_format(&p, &p.log_src, where, sizeof(where));
	printf("log:            %-10s (%s)\n", log_name(&p), where);
	cumemcap_source_format(&p, &p.interval_src, where, sizeof(where));
	snprintf(value, sizeof(value), "%u.%03u s", p.log_interval_ms / 1000, p.log_interval_ms % 1000);
	printf("log interval:   %-10s (%s)\n", value, where);
	cumemcap_source_format(&p, &p.metrics_src, where, sizeof(where));
	printf("metrics:        %-10s (%s)\n", p.metrics_path[0] ? p.metrics_path : "off", where);
	cumemcap_source_format(&p, &p.debug_src, where, sizeof(where));
	printf("debug:          %-10s (%s)\n", p.debug_doors ? "doors" : "off", where);
	cumemcap_source_format(&p, &p.group_src, where, sizeof(where));
	printf("group:          %-10s (%s)", p.group[0] ? p.group : "none", where);
	if (p.group[0]) {
		cumemcap_source_format(&p, &p.group_dir_src, where, sizeof(where));
		printf(", dir %s (%s)", p.group_dir, where);
		cumemcap_source_format(&p, &p.group_access_src, where, sizeof(where));
		printf(", access %s (%s)", cumemcap_policy_group_access_name(p.group_gid), where);
	}
	printf("\n");
	cumemcap_policy_format_on_limit(&p, value, sizeof(value));
	cumemcap_source_format(&p, &p.on_limit_src, where, sizeof(where));
	printf("on_limit:       %-10s (%s)\n", value, where);

	static struct gpu gpus[MAX_GPUS];
	char why[256];
	int n = list_gpus(gpus, MAX_GPUS, why, sizeof(why));
	if (n < 0) {
		printf("GPUs:           %s; limits are decided per GPU when the program first uses one\n", why);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		struct cumemcap_source src;
		char uuid[64], total[32], limit[32];
		struct cumemcap_selector s = { .kind = CUMEMCAP_SEL_UUID };
		memcpy(s.uuid, gpus[i].uuid, sizeof(s.uuid));
		cumemcap_selector_format(&s, uuid, sizeof(uuid));
		uint64_t l = cumemcap_policy_limit(&p, i, gpus[i].uuid, gpus[i].pci, gpus[i].total, &src);
		cumemcap_source_format(&p, &src, where, sizeof(where));
		printf("GPU %d:          %s %s %s, %s: limit %s (%s)", i, gpus[i].name, uuid, gpus[i].pci,
		       cumemcap_fmt_size(gpus[i].total, total, sizeof(total)),
		       l == UINT64_MAX ? "none" : cumemcap_fmt_size(l, limit, sizeof(limit)), where);
		if (p.group[0]) {
			l = cumemcap_policy_group_limit(&p, i, gpus[i].uuid, gpus[i].pci, gpus[i].total, &src);
			cumemcap_source_format(&p, &src, where, sizeof(where));
			printf(", group limit %s (%s)",
			       l == UINT64_MAX ? "none" : cumemcap_fmt_size(l, limit, sizeof(limit)), where);
		}
		printf("\n");
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: cumemcap-config --check-config [FILE]\n"
		   "       cumemcap-config --print-config [-- PROGRAM [ARGS...]]\n");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "--check-config") == 0 && argc <= 3)
		return check_config(argc == 3 ? argv[2] : NULL);
	if (argc >= 2 && strcmp(argv[1], "--print-config") == 0) {
		if (argc == 2)
			return print_config(0, NULL);
		if (strcmp(argv[2], "--") == 0)
			return print_config(argc - 3, argv + 3);
		return print_config(argc - 2, argv + 2);
	}
	usage(stderr);
	return 2;
}

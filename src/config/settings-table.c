/* settings-table: the table of settings and its documentation (see
 * settings.h); the lookups are settings.c's. A file of its own because the
 * table needs the policy's layout (policy.h) while policy.c needs the
 * table's declarations (settings.h).
 * Thread safety: constant data. */
#include "config.h"
#include "config/settings.h"

#include <stddef.h>

#include "config/policy.h"

/* Where a setting's value and source live: once in the policy, or, for a
 * limit rule, in each source's limits. */
#define IN_POLICY(parser, src) parser, NULL, offsetof(struct cumemcap_policy, src)
#define PER_SOURCE(parser, src) NULL, parser, offsetof(struct cumemcap_limits, src)

#define PROCESS_WIDE (CUMEMCAP_IN_ENV | CUMEMCAP_IN_GLOBAL | CUMEMCAP_IN_PROGRAM)

const struct cumemcap_setting cumemcap_settings[] = {
	{ "CUMEMCAP_LIMIT", "limit", PROCESS_WIDE | CUMEMCAP_IN_DEVICE,
	  PER_SOURCE(cumemcap_policy_parse_limit, limit_src),
	  "SIZE", "the limit on every GPU.",
	  "The most device memory a process may hold on each GPU: bytes (1073741824), a number with "
	  "K/M/G/T/P or KiB/MiB/GiB/TiB/PiB (powers of 1024) or KB/MB/GB/TB/PB (powers of 1000), "
	  "e.g. 8GiB, 512M, 1.5G; or a share of that GPU's memory, e.g. 75% (0-100].",
	  "none (no limit: the run only observes; calls pass through, still counted)", NULL, "90%" },
	{ "CUMEMCAP_DEVICE_LIMITS", "device_limits", PROCESS_WIDE,
	  PER_SOURCE(cumemcap_policy_parse_devices, devices_src),
	  "LIST", "per-GPU limits.",
	  "SEL=SIZE[,SEL=SIZE...], SEL being a device ordinal as the process sees it (after "
	  "CUDA_VISIBLE_DEVICES), a UUID (GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f, as nvidia-smi -L "
	  "prints it) or a PCI bus id (0000:3b:00.0); SIZE as for limit. Beats limit on the GPUs it "
	  "names; a selector that matches no GPU is reported once and skipped.",
	  "none", NULL, "0=20GiB,0000:3b:00.0=50%" },
	{ "CUMEMCAP_COUNT", "count", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_count, count_src),
	  "footprint|allocations", "what a limit counts.",
	  "What a limit counts: footprint (the allocations and the driver's overhead for the process, "
	  "its contexts and modules, the figure nvidia-smi shows) or allocations (the allocations only).",
	  "footprint", "footprint", NULL },
	{ "CUMEMCAP_OVERHEAD_ESTIMATE", "overhead_estimate", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_estimate, estimate_src),
	  "SIZE", "a context's overhead when NVML cannot tell it.",
	  "The overhead per context assumed when NVML cannot tell it (an estimate): a size such as "
	  "512MiB, or 0.",
	  "512MiB", "512MiB", NULL },
	{ "CUMEMCAP_GROWTH", "growth", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_growth, growth_src),
	  "ondemand|preallocate[:SIZE]", "how memory is taken from the driver.",
	  "ondemand: take memory from the driver as requests need it; preallocate[:SIZE]: take SIZE "
	  "(default: what the limit leaves) at the first use of each GPU and serve from it.",
	  "ondemand", "ondemand", NULL },
	{ "CUMEMCAP_POOL", "pool", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_pool, pool_src),
	  "auto|on|nopack|off", "whether cuMemAlloc is served from pooled segments.",
	  "auto: pooled on the GPUs a limit or a group applies to (every GPU under growth=preallocate), "
	  "every call goes to the driver elsewhere; on: serve cuMemAlloc from pooled segments on every "
	  "GPU; nopack: pooled, but every block its own segment (IPC export works for all); off: every "
	  "call goes to the driver (accounting only).",
	  "auto", "auto", NULL },
	{ "CUMEMCAP_RELEASE", "release", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_release, release_src),
	  "idle:SECONDS|immediate|never", "when cached free segments go back to the driver.",
	  "When cached free segments go back to the driver: idle:SECONDS (0.001 to 86400) after they "
	  "fell free, immediate, or never. At the limit they are always released before a request is "
	  "refused.",
	  "idle:30", "idle:30", NULL },
	{ "CUMEMCAP_FRAMEWORK_HINTS", "framework_hints", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_hints, hints_src),
	  "on|off", "let TensorFlow and JAX grow instead of preallocating.",
	  "on: when a limit applies to the process (its own or a group's) and growth is ondemand, set "
	  "TF_FORCE_GPU_ALLOW_GROWTH=true unless a TensorFlow memory variable is set, and "
	  "XLA_PYTHON_CLIENT_PREALLOCATE=false unless a JAX/XLA memory variable is set; nothing is set "
	  "without a limit (see docs/frameworks.md). off: set nothing.",
	  "on", "on", NULL },
	{ "CUMEMCAP_LOG", "log", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_log, log_src),
	  "TARGET", "the footprint log: a path template, stderr or off.",
	  "Where the footprint log goes: a path template (%p pid, %h host, %n program, %u uid) for a "
	  "JSON Lines file per process; stderr: readable lines (refusals, an exit summary); off. "
	  "The default directory is under $TMPDIR when that is an absolute path (not for setuid "
	  "programs), else /tmp.",
	  "/tmp/cumemcap-%u/%n.%h.%p.jsonl", CUMEMCAP_DEFAULT_LOG, NULL },
	{ "CUMEMCAP_LOG_INTERVAL", "log_interval", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_interval, interval_src),
	  "SECONDS", "seconds between footprint samples.",
	  "Seconds between footprint samples in the log and rewrites of the metrics file (0.1 to "
	  "86400).",
	  "5", "5", NULL },
	{ "CUMEMCAP_METRICS", "metrics", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_metrics, metrics_src),
	  "TEMPLATE|off", "a Prometheus text file rewritten each interval.",
	  "A path template (as for log) for a Prometheus text file rewritten each interval, or off.",
	  "off", "off", NULL },
	{ "CUMEMCAP_LABELS", "labels", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_labels, labels_src),
	  "NAME=VALUE[,...]", "extra labels on every metrics series.",
	  "NAME=VALUE[,NAME=VALUE...]: extra labels on every metrics series (Prometheus label names, "
	  "not starting with __ and not one cumemcap sets itself; at most 32 pairs, 1023 bytes), "
	  "besides pid, program, host and the pod labels taken from NODE_NAME, POD_NAME, "
	  "POD_NAMESPACE and CONTAINER_NAME.",
	  "none", "", "team=vision,job=resnet50" },
	{ "CUMEMCAP_DEBUG", "debug", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_debug, debug_src),
	  "doors|off", "a line per dlsym/cuGetProcAddress answer.",
	  "doors: one stderr line per dlsym/cuGetProcAddress answer (what was asked, whether the hook "
	  "or the driver's function was handed out); off.",
	  "off", "off", NULL },
	{ "CUMEMCAP_GROUP", "group", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_group, group_src),
	  "NAME", "the group whose budget this process shares.",
	  "A group's name (1-64 of A-Z a-z 0-9 . _ -, not starting with . or -): processes with the "
	  "same name share one budget per physical GPU, besides each one's own limit; a request must "
	  "fit both. Empty: no group (an empty variable turns a file's group off).",
	  "none (no group)", "", "training" },
	{ "CUMEMCAP_GROUP_LIMIT", "group_limit", PROCESS_WIDE,
	  PER_SOURCE(cumemcap_policy_parse_group_limit, group_limit_src),
	  "SIZE|LIST", "the group's budget on each GPU.",
	  "The group's budget per GPU, in the forms of limit and device_limits: one SIZE (or NN%) for "
	  "every GPU, or SEL=SIZE[,SEL=SIZE...]. Needs a group.",
	  "none given here (the group's shared state may hold one)", NULL, "60GiB" },
	{ "CUMEMCAP_GROUP_DIR", "group_dir", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_group_dir, group_dir_src),
	  "DIR", "the directory of the group's shared state.",
	  "An absolute directory for the group's shared state and the node's registry of capped "
	  "processes.",
	  CUMEMCAP_DEFAULT_GROUP_DIR, CUMEMCAP_DEFAULT_GROUP_DIR, NULL },
	{ "CUMEMCAP_GROUP_ACCESS", "group_access", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_group_access, group_access_src),
	  "user|gid:GROUP", "who may share the group's state.",
	  "user: the group's state file is 0600 and must be owned by the caller's uid; gid:GROUP: 0660, "
	  "its Unix group GROUP (a name or a number), made by and shared with GROUP's members only.",
	  "user", "user", NULL },
	{ "CUMEMCAP_ON_LIMIT", "on_limit", PROCESS_WIDE,
	  IN_POLICY(cumemcap_policy_parse_on_limit, on_limit_src),
	  "fail|wait:SECONDS", "what a request over a limit does.",
	  "What a request over a limit (the process's or the group's) does: fail at once, or "
	  "wait:SECONDS (0.001 to 86400, e.g. wait:30, wait:0.5) for memory to be freed, then fail.",
	  "fail", "fail", NULL },
};

const size_t cumemcap_setting_count = sizeof(cumemcap_settings) / sizeof(cumemcap_settings[0]);
_Static_assert(sizeof(cumemcap_settings) / sizeof(cumemcap_settings[0]) <= CUMEMCAP_SETTINGS_MAX,
	       "CUMEMCAP_SETTINGS_MAX holds every setting");

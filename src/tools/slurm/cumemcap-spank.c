/* cumemcap-spank: the Slurm SPANK plugin (docs/slurm.md). It decides the
 * environment of each task of a job that uses GPUs, and the shim
 * (libcumemcap.so) does the enforcing:
 *
 *   - in srun, sbatch and salloc it registers --gpu-mem=SIZE and checks the
 *     value with the shim's own parser, so a bad value stops the client at
 *     once;
 *   - in slurmstepd, before each task starts (slurm_spank_task_init, as the
 *     job's user), it gives a task with a budget LD_PRELOAD of the library
 *     and one cumemcap group per job and node (CUMEMCAP_GROUP=slurm-JOBID,
 *     CUMEMCAP_GROUP_LIMIT, CUMEMCAP_GROUP_DIR, and CUMEMCAP_LOG under
 *     DIR/JOBID/ with log=DIR).
 *     The budget is --gpu-mem, else the job's shards' share of each GPU it
 *     sees (SLURM_SHARDS_ON_NODE over that GPU's shard count in gres.conf,
 *     else shards_per_gpu=N); a job with neither gets nothing;
 *   - in the job epilog on the node (slurmd, as root) it removes the job's
 *     book, and nothing else.
 *
 * A task the plugin cannot set up (no library, an unusable book directory,
 * a shard job whose shard count nobody gives) does not start: one line
 * (slurm_error, which srun shows the user) and a failed step, never an
 * unfenced task.
 *
 * Thread safety: Slurm calls a plugin's callbacks from one thread in each
 * process that loads it (srun, sbatch, salloc, slurmstepd, slurmd); the
 * statics below are written by the argument parser and the option callback
 * and read by the later callbacks of the same process. No lock is needed. */
#include "config.h"

#include "config/parse.h"
#include "tools/slurm/gres.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(cumemcap, 1);

/* The plugstack.conf arguments. */
static struct {
	unsigned shards_per_gpu; /* 0: not given */
	char log_dir[PATH_MAX];	 /* empty: the site's CUMEMCAP_LOG or file applies */
	char library[PATH_MAX];
	char books[PATH_MAX];
	char gres_conf[PATH_MAX]; /* empty: beside SLURM_CONF, else /etc/slurm */
} args;

/* --gpu-mem as the user typed it (checked), empty when not given. */
static char gpu_mem[128];

static const char args_accepted[] =
    "shards_per_gpu=N (1..1024), log=DIR, library=PATH (default " CUMEMCAP_SPANK_LIBRARY
    "), books=DIR (default /dev/shm), gres_conf=PATH (default: gres.conf beside slurm.conf); "
    "paths absolute";

static int gpu_mem_option(int val, const char *value, int remote);

static struct spank_option gpu_mem_spec = {
    "gpu-mem",
    "SIZE",
    "the job's memory budget on each GPU of a node, shared by its tasks: bytes, a number with a "
    "unit (8GiB, 512M) or a share of the GPU (25%); default: its shards' share",
    1,
    0,
    gpu_mem_option,
};

static int gpu_mem_option(int val, const char *value, int remote)
{
	struct cumemcap_amount amount;
	(void)val;
	(void)remote;
	if (!value || strlen(value) >= sizeof(gpu_mem) ||
	    !cumemcap_parse_amount(value, &amount)) {
		slurm_error("cumemcap: --gpu-mem=\"%s\" is not a valid size; accepted: %s",
			    value ? value : "", cumemcap_amount_forms);
		/* In srun, sbatch and salloc that line is the whole answer: the
		 * client stops here rather than add Slurm's own "Invalid
		 * --gpu-mem argument" without the accepted forms. slurmstepd
		 * (a value that reached it unchecked) fails the step instead. */
		spank_context_t ctx = spank_context();
		if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR)
			exit(1);
		return -1;
	}
	snprintf(gpu_mem, sizeof(gpu_mem), "%s", value);
	return 0;
}

static bool set_path(char *dst, const char *key, const char *val)
{
	if (val[0] != '/' || strlen(val) >= PATH_MAX) {
		slurm_error("cumemcap: plugstack.conf argument %s=\"%s\" is not an absolute path; "
			    "accepted: %s",
			    key, val, args_accepted);
		return false;
	}
	snprintf(dst, PATH_MAX, "%s", val);
	return true;
}

/* The arguments of the plugin's line in plugstack.conf. */
static bool parse_args(int ac, char **av)
{
	memset(&args, 0, sizeof(args));
	snprintf(args.library, sizeof(args.library), "%s", CUMEMCAP_SPANK_LIBRARY);
	snprintf(args.books, sizeof(args.books), "/dev/shm");
	for (int i = 0; i < ac; i++) {
		const char *eq = strchr(av[i], '=');
		const char *val = eq ? eq + 1 : "";
		size_t klen = eq ? (size_t)(eq - av[i]) : strlen(av[i]);
		char key[32];
		snprintf(key, sizeof(key), "%.*s",
			 (int)(klen < sizeof(key) - 1 ? klen : sizeof(key) - 1), av[i]);
		if (!eq) {
			slurm_error("cumemcap: plugstack.conf argument \"%s\" is not KEY=VALUE; "
				    "accepted: %s",
				    av[i], args_accepted);
			return false;
		}
		if (strcmp(key, "shards_per_gpu") == 0) {
			char *end;
			errno = 0;
			unsigned long n = strtoul(val, &end, 10);
			if (errno || end == val || *end || n < 1 || n > 1024 || val[0] == '-' ||
			    val[0] == '+') {
				slurm_error("cumemcap: plugstack.conf argument "
					    "shards_per_gpu=\"%s\" is not a shard "
					    "count; accepted: an integer 1..1024",
					    val);
				return false;
			}
			args.shards_per_gpu = (unsigned)n;
		} else if (strcmp(key, "log") == 0) {
			if (!set_path(args.log_dir, key, val))
				return false;
		} else if (strcmp(key, "library") == 0) {
			if (!set_path(args.library, key, val))
				return false;
		} else if (strcmp(key, "books") == 0) {
			if (!set_path(args.books, key, val))
				return false;
		} else if (strcmp(key, "gres_conf") == 0) {
			if (!set_path(args.gres_conf, key, val))
				return false;
		} else {
			slurm_error(
			    "cumemcap: plugstack.conf argument \"%s\" is unknown; accepted: %s",
			    av[i], args_accepted);
			return false;
		}
	}
	return true;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (!parse_args(ac, av))
		return -1;
	if (spank_option_register(sp, &gpu_mem_spec) != ESPANK_SUCCESS) {
		slurm_error("cumemcap: cannot register --gpu-mem");
		return -1;
	}
	return 0;
}

/* One line, which slurmstepd passes to the user's srun as
 * "slurmstepd-NODE: error: cumemcap: ...", then the task is not started. */
static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	slurm_error("cumemcap: %s", line);
	return -1;
}

/* ---- the budget of a shard job ---- */

static void default_gres_conf(char *out, size_t len)
{
	if (args.gres_conf[0]) {
		snprintf(out, len, "%s", args.gres_conf);
		return;
	}
	const char *conf = getenv("SLURM_CONF");
	const char *slash = conf ? strrchr(conf, '/') : NULL;
	if (slash)
		snprintf(out, len, "%.*s/gres.conf", (int)(slash - conf), conf);
	else
		snprintf(out, len, "/etc/slurm/gres.conf");
}

/* The group's budget for a job of `shards` shards: on each GPU it sees (by
 * the ordinal the task will see it as), shards over that GPU's count, never
 * more than the whole GPU. */
static int shard_budget(spank_t sp, unsigned long shards, char *out, size_t len)
{
	char visible[1024] = "", node[256] = "", conf[PATH_MAX];
	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", visible, sizeof(visible)) != ESPANK_SUCCESS ||
	    !visible[0])
		return refuse(
		    "the job has %lu shards but no CUDA_VISIBLE_DEVICES; the step is not started "
		    "unfenced",
		    shards);
	if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof(node)) != ESPANK_SUCCESS) {
		gethostname(node, sizeof(node) - 1);
		node[strcspn(node, ".")] = '\0';
	}
	default_gres_conf(conf, sizeof(conf));
	static struct cumemcap_gres gres;
	FILE *f = fopen(conf, "re");
	memset(&gres, 0, sizeof(gres));
	if (f) {
		cumemcap_gres_read(f, node, &gres);
		fclose(f);
	} else if (errno != ENOENT) {
		/* Not there: shards_per_gpu says. There but unreadable (by the
		 * job's user): a guess could give the job another budget. */
		return refuse("%s: %s; the step is not started unfenced", conf, strerror(errno));
	}

	size_t used = 0;
	unsigned ordinal = 0;
	out[0] = '\0';
	for (const char *p = visible; *p; ordinal++) {
		char *end;
		unsigned long index = strtoul(p, &end, 10);
		if (end == p || (*end && *end != ','))
			return refuse(
			    "CUDA_VISIBLE_DEVICES=\"%s\" is not a list of GPU indices; the step is "
			    "not started unfenced",
			    visible);
		unsigned count = cumemcap_gres_shards(&gres, index);
		if (count == 0)
			count = args.shards_per_gpu;
		if (count == 0)
			return refuse(
			    "GPU %lu of node %s has no shard count in %s and the plugin has no "
			    "shards_per_gpu=N; the step is not started unfenced",
			    index, node, conf);
		uint32_t share = cumemcap_gres_share(shards, count);
		int w = snprintf(out + used, len - used, "%s%u=%" PRIu32 ".%03" PRIu32 "%%",
				 used ? "," : "", ordinal, share / 1000, share % 1000);
		if (w < 0 || (size_t)w >= len - used)
			return refuse("too many GPUs in CUDA_VISIBLE_DEVICES=\"%s\"", visible);
		used += (size_t)w;
		p = end + (*end == ',');
	}
	if (ordinal == 1) /* one GPU: its share alone, "25.000%" rather than "0=25.000%" */
		memmove(out, out + 2, strlen(out + 2) + 1);
	return 0;
}

/* ---- the task's environment ---- */

/* The library must be there for the user the task runs as. */
static int check_library(void)
{
	int fd = open(args.library, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0)
		return refuse("library=%s cannot be opened: %s; the step is not started unfenced",
			      args.library, strerror(errno));
	bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	close(fd);
	if (!regular)
		return refuse("library=%s is not a regular file; the step is not started unfenced",
			      args.library);
	return 0;
}

/* The book directory must be a directory the task's user can write. */
static int check_books(void)
{
	struct stat st;
	if (stat(args.books, &st) != 0)
		return refuse("books=%s: %s; the step is not started unfenced", args.books,
			      strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return refuse("books=%s is not a directory; the step is not started unfenced",
			      args.books);
	if (access(args.books, W_OK | X_OK) != 0)
		return refuse(
		    "books=%s is not writable by uid %u: %s; the step is not started unfenced",
		    args.books, (unsigned)getuid(), strerror(errno));
	return 0;
}

/* LD_PRELOAD with the library first, once. */
static int set_preload(spank_t sp)
{
	char old[4096] = "", value[sizeof(old) + PATH_MAX + 1];
	spank_err_t rc = spank_getenv(sp, "LD_PRELOAD", old, sizeof(old));
	if (rc == ESPANK_NOSPACE)
		return refuse("LD_PRELOAD of the task is longer than %zu bytes", sizeof(old) - 1);
	size_t len = strlen(args.library);
	for (const char *p = old; *p;) {
		size_t n = strcspn(p, ": ");
		if (n == len && strncmp(p, args.library, len) == 0)
			return 0;
		p += n + (p[n] != '\0');
	}
	snprintf(value, sizeof(value), "%s%s%s", args.library, old[0] ? ":" : "", old);
	return spank_setenv(sp, "LD_PRELOAD", value, 1) == ESPANK_SUCCESS
		   ? 0
		   : refuse("cannot set LD_PRELOAD");
}

static int set_env(spank_t sp, const char *name, const char *value)
{
	if (spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS)
		return refuse("cannot set %s in the task's environment", name);
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	uint32_t job = 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
		return refuse("cannot read the job id");

	char budget[2048];
	char text[64] = "";
	unsigned long shards = 0;
	if (spank_getenv(sp, "SLURM_SHARDS_ON_NODE", text, sizeof(text)) == ESPANK_SUCCESS &&
	    text[0]) {
		char *end;
		shards = strtoul(text, &end, 10);
		if (*end)
			return refuse("SLURM_SHARDS_ON_NODE=\"%s\" is not a number", text);
	}
	if (gpu_mem[0]) {
		struct cumemcap_amount amount;
		if (!cumemcap_parse_amount(gpu_mem, &amount))
			return refuse("--gpu-mem=\"%s\" is not a valid size; accepted: %s", gpu_mem,
				      cumemcap_amount_forms);
		snprintf(budget, sizeof(budget), "%s", gpu_mem);
	} else if (shards > 0) {
		if (shard_budget(sp, shards, budget, sizeof(budget)) != 0)
			return -1;
	} else {
		return 0; /* whole GPUs or none: the plugin changes nothing */
	}

	if (check_library() != 0 || check_books() != 0)
		return -1;
	char group[64], log[PATH_MAX + 64];
	snprintf(group, sizeof(group), "slurm-%" PRIu32, job);
	if (set_preload(sp) != 0 || set_env(sp, "CUMEMCAP_GROUP", group) != 0 ||
	    set_env(sp, "CUMEMCAP_GROUP_LIMIT", budget) != 0 ||
	    set_env(sp, "CUMEMCAP_GROUP_DIR", args.books) != 0)
		return -1;
	if (args.log_dir[0]) {
		/* DIR/JOBID/, made 0700 by the job's first process: DIR can be
		 * shared by every user (root's, mode 1777), since the shim
		 * writes a log only in a directory its user alone can write. */
		snprintf(log, sizeof(log), "%s/%" PRIu32 "/%%n.%%h.%%p.jsonl", args.log_dir, job);
		if (set_env(sp, "CUMEMCAP_LOG", log) != 0)
			return -1;
	}
	return 0;
}

/* ---- the epilog: the job's book goes ---- */

/* Remove books/cumemcap-group.slurm-JOBID when it is a regular file of the
 * job's user: what the job's tasks made. A link, another user's file or
 * anything else at that name stays. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	if (!parse_args(ac, av))
		return -1;
	uint32_t job = 0;
	uid_t uid = 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
		slurm_error("cumemcap: job epilog: cannot read the job's id and user");
		return -1;
	}
	int dir = open(args.books, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return 0; /* no directory, no book */
	char name[64];
	snprintf(name, sizeof(name), "cumemcap-group.slurm-%" PRIu32, job);
	struct stat st;
	int rc = 0;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == uid && unlinkat(dir, name, 0) != 0 && errno != ENOENT) {
		slurm_error("cumemcap: job %" PRIu32 ": cannot remove %s/%s: %s", job, args.books,
			    name, strerror(errno));
		rc = -1;
	}
	close(dir);
	return rc;
}

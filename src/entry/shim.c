/* shim: the library's life cycle and public API. The constructor checks
 * the configuration before main (a wrong limit stops the process with one
 * line); the first hook opens the driver (setup.c), so a process that
 * never uses CUDA makes no driver call. Fork handlers keep every lock
 * usable in the child and empty its records (it holds none of its
 * parent's GPU memory). The destructor writes the exit summary;
 * cumemcap_get_stats reads the ledger and takes no lock. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "account/footprint.h"
#include "driver/nvml.h"
#include "arena/arena.h"
#include "state/capture.h"
#include "cumemcap.h"
#include "state/device.h"
#include "group/group.h"
#include "platform/export.h"
#include "account/graph.h"
#include "account/vmm.h"
#include "entry/hooks.h"
#include "state/ledger.h"
#include "log/log.h"
#include "platform/msg.h"
#include "config/hints.h"
#include "config/policy.h"
#include "state/track.h"
#include "platform/worker.h"

static void fork_prepare(void)
{
	cumemcap_log_fork_prepare();
	cumemcap_capture_lock();
	cumemcap_worker_lock();
	cumemcap_arena_lock_all();
	cumemcap_account_lock();
	cumemcap_graph_lock();
	cumemcap_vmm_lock();
	cumemcap_track_lock();
}

static void fork_parent(void)
{
	cumemcap_track_unlock();
	cumemcap_vmm_unlock();
	cumemcap_graph_unlock();
	cumemcap_account_unlock();
	cumemcap_arena_unlock_all();
	cumemcap_worker_unlock();
	cumemcap_capture_unlock();
	cumemcap_log_fork_parent();
}

static void fork_child(void)
{
	cumemcap_device_forget_contexts(); /* the forking thread's caches: the child reaches no context */
	cumemcap_track_reset_locked();
	cumemcap_account_pool_reset();
	cumemcap_ledger_reset();
	cumemcap_track_unlock();
	cumemcap_vmm_fork_child();
	cumemcap_graph_fork_child();
	cumemcap_account_unlock();
	cumemcap_arena_fork_child();
	cumemcap_worker_fork_child();
	cumemcap_log_fork_child();
	cumemcap_capture_fork_child();
	cumemcap_death_lock_fork_child();
	cumemcap_hooks_ctx_fork_child();
	cumemcap_nvml_fork_child();
	cumemcap_account_footprint_fork_child();
	cumemcap_group_fork_child();
}

static _Atomic bool started; /* the destructor has something to end */
static bool hints_set;	     /* the constructor set the framework hints */

/* Join the group (or stop: never uncapped), set the hints unless the
 * constructor did, take the log's snapshot, register the fork handlers. */
static void start(void)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	char err[1024 + 256];
	if (p->group[0])
		cumemcap_log_arm_sigbus();
	if (!cumemcap_group_start(p, err, sizeof(err)))
		cumemcap_fatal("%s", err);
	if (!hints_set)
		cumemcap_hints_apply(p);
	cumemcap_log_init();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atomic_store(&started, true);
}

/* glibc passes the program's arguments ([program] sections match on them).
 * A configured process builds its policy here, so a wrong setting stops it
 * before main, and sets the hints frameworks read at their start. The rest
 * waits for the first hook unless the process joins a group or runs
 * setuid; a fork before then needs no handler: nothing is held yet. */
__attribute__((constructor)) static void cumemcap_start(int argc, char **argv)
{
	bool configured = cumemcap_policy_start(argc, argv);
	if (configured) {
		const struct cumemcap_policy *p = cumemcap_policy();
		if (p->group[0] || p->secure) {
			start();
			return;
		}
		cumemcap_hints_apply(p);
		hints_set = true;
	}
	cumemcap_log_take_env(configured);
	if (!cumemcap_setup_defer_start(start))
		start();
}

__attribute__((destructor)) static void cumemcap_stop(void)
{
	/* Never used: no worker, no group, no GPU to write about. */
	if (!atomic_load(&started)) {
		cumemcap_log_say_where();
		return;
	}
	cumemcap_worker_stop();
	cumemcap_account_group_changes(); /* made since the worker's last look */
	cumemcap_log_exit();
	cumemcap_log_say_where();
	cumemcap_group_leave();
}

#define X(name, src, stats, ...) +stats
_Static_assert(sizeof(struct cumemcap_stats) == sizeof(uint64_t) * (0 CUMEMCAP_FIGURES(X)),
	       "every field of struct cumemcap_stats is a figure marked stats");
#undef X

CUMEMCAP_EXPORT int cumemcap_get_stats(int device, struct cumemcap_stats *out, size_t size)
{
	const struct cumemcap_device_info *info = cumemcap_device_info(device);
	if (!info || !out)
		return -1;
	struct cumemcap_figures f;
	cumemcap_ledger_read_growth(device);
	cumemcap_ledger_read(device, &f);
	f.v[CUMEMCAP_FIG_total] = info->total;
	struct cumemcap_stats s;
#define X(name, src, stats, ...) CUMEMCAP_FIG_IF(stats)(s.name = f.v[CUMEMCAP_FIG_##name];)
	CUMEMCAP_FIGURES(X)
#undef X
	memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}

CUMEMCAP_EXPORT const char *cumemcap_version(void)
{
	return CUMEMCAP_VERSION_STRING;
}

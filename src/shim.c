/* shim: the library's life cycle and public API.
 *
 * The constructor validates the configuration before the program's main
 * runs (a wrong limit stops the process with one line) and touches nothing
 * else: the driver is opened lazily by the first hook, so a process that
 * never uses CUDA makes no driver call. Fork handlers keep every lock
 * usable in the child and empty the child's books (a child holds none of
 * its parent's GPU memory). The destructor prints the exit summary when
 * CUMEMCAP_LOG=stderr. */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "account.h"
#include "cumemcap.h"
#include "device.h"
#include "export.h"
#include "ledger.h"
#include "msg.h"
#include "policy.h"
#include "track.h"

static void fork_prepare(void)
{
	cumemcap_account_lock();
	cumemcap_track_lock_all();
}

static void fork_parent(void)
{
	cumemcap_track_unlock_all();
	cumemcap_account_unlock();
}

static void fork_child(void)
{
	cumemcap_track_reset_locked();
	cumemcap_pool_reset();
	cumemcap_ledger_reset();
	cumemcap_track_unlock_all();
	cumemcap_account_unlock();
}

/* glibc passes a shared library's constructors the program's arguments;
 * [program] sections match on them. */
__attribute__((constructor)) static void cumemcap_start(int argc, char **argv, char **envp)
{
	(void)envp;
	cumemcap_policy_set_args(argc, argv);
	cumemcap_policy();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void summary(void)
{
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		const struct cumemcap_device_info *info = cumemcap_device_info(dev);
		struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
		if (!info || atomic_load(&d->allocs) + atomic_load(&d->refusals) == 0)
			continue;
		char lim[32], tot[32], peak[32], now[32];
		uint64_t limit = cumemcap_ledger_limit(dev);
		cumemcap_msg("device %d (%s): limit %s of %s; peak held %s, held at exit %s; "
			     "%llu allocations, %llu frees, %llu refused at the limit",
			     dev, info->pci_bus_id,
			     limit == CUMEMCAP_NO_LIMIT ? "none" : cumemcap_fmt_size(limit, lim, sizeof(lim)),
			     cumemcap_fmt_size(info->total, tot, sizeof(tot)),
			     cumemcap_fmt_size(atomic_load(&d->peak), peak, sizeof(peak)),
			     cumemcap_fmt_size(atomic_load(&d->reserved), now, sizeof(now)),
			     (unsigned long long)atomic_load(&d->allocs),
			     (unsigned long long)atomic_load(&d->frees),
			     (unsigned long long)atomic_load(&d->refusals));
	}
}

__attribute__((destructor)) static void cumemcap_stop(void)
{
	if (cumemcap_policy()->log == CUMEMCAP_LOG_STDERR)
		summary();
}

CUMEMCAP_EXPORT int cumemcap_get_stats(int device, struct cumemcap_stats *out, size_t size)
{
	const struct cumemcap_device_info *info = cumemcap_device_info(device);
	if (!info || !out)
		return -1;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[device];
	struct cumemcap_stats s = {
		.limit = cumemcap_ledger_limit(device),
		.total = info->total,
		.reserved = atomic_load(&d->reserved),
		.peak_reserved = atomic_load(&d->peak),
		.linear = atomic_load(&d->kind[CUMEMCAP_KIND_linear]),
		.managed = atomic_load(&d->kind[CUMEMCAP_KIND_managed]),
		.pool = atomic_load(&d->kind[CUMEMCAP_KIND_pool]),
		.vmm = atomic_load(&d->kind[CUMEMCAP_KIND_vmm]),
		.array = atomic_load(&d->kind[CUMEMCAP_KIND_array]),
		.allocs = atomic_load(&d->allocs),
		.frees = atomic_load(&d->frees),
		.refusals = atomic_load(&d->refusals),
		.driver_oom = atomic_load(&d->driver_oom),
		.largest_request = atomic_load(&d->largest_request),
	};
	memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}

CUMEMCAP_EXPORT const char *cumemcap_version(void)
{
	return CUMEMCAP_VERSION_STRING;
}

/* setup: what the first hook does before any hook goes on: the rest of
 * the start the constructor left to it, opening the driver, and the
 * registrations through which lower layers call higher ones.
 *
 * Calls go down the layers (docs/design.md#layers); where a lower layer
 * must reach a higher one, the higher one registers a function here, and
 * nowhere else, so this file is the list of every such call:
 *
 *   worker -> log, account  the samples, the arenas' idle release, the
 *                          footprint and the group's books (ticks)
 *   device -> log          a GPU became known (the start record)
 *   ledger -> account      read back the pools' unread growth
 *                          (cumemcap_ledger_read_growth, before figures are read)
 *
 * It runs once, from the first hook that finds a driver (cumemcap_ready,
 * through NEED): before any GPU is known, any arena exists or the worker
 * starts, whichever library constructor runs first. Before it, and before
 * the driver is opened, the first hook runs the rest of the start the
 * constructor left to it (cumemcap_setup_defer_start). Thread safety: two
 * pthread_once, then one acquire load per hook. */
#include "entry/hooks.h"
#include "entry/setup.h"

#include <pthread.h>
#include <stdatomic.h>

#include "account/account.h"
#include "account/footprint.h"
#include "state/device.h"
#include "platform/worker.h"

_Atomic bool cumemcap_set_up;

static void register_upcalls(void)
{
	cumemcap_worker_register(cumemcap_account_arena_tick);
	cumemcap_worker_register(cumemcap_log_tick);
	cumemcap_worker_register(cumemcap_account_footprint_tick);
	cumemcap_worker_register(cumemcap_account_group_tick);
	cumemcap_device_listen(cumemcap_log_device);
	atomic_store(&cumemcap_ledger_growth_reader, cumemcap_account_pool_refresh_now);
}

/* The rest of a start the constructor left to the first hook (shim.c:
 * a process nothing configures). Once the first hook has looked, it holds
 * too_late_to_defer, so that a later deferral fails and the constructor
 * runs its start itself. */
static void (*_Atomic deferred_start)(void);

static void too_late_to_defer(void)
{
	/* Only a marker: never called. */
}

bool cumemcap_setup_defer_start(void (*start)(void))
{
	void (*none)(void) = NULL;
	return atomic_compare_exchange_strong(&deferred_start, &none, start);
}

static void run_deferred_start(void)
{
	void (*start)(void) = atomic_exchange(&deferred_start, too_late_to_defer);
	if (start)
		start();
}

bool cumemcap_ready_slow(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT, start_once = PTHREAD_ONCE_INIT;
	/* Before the driver is opened, as it would have been in the
	 * constructor: the fork handlers stay registered before the driver's. */
	pthread_once(&start_once, run_deferred_start);
	if (!cumemcap_driver_ready())
		return false;
	pthread_once(&once, register_upcalls);
	atomic_store_explicit(&cumemcap_set_up, true, memory_order_release);
	return true;
}

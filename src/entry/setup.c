/* setup: what the first hook does before any hook goes on: the rest of the
 * constructor's start (shim.c), opening the driver, and registering the
 * functions through which lower layers call higher ones (the worker's
 * ticks, the device layer's listener, the ledger's growth reader).
 *
 * Thread safety: two pthread_once, before any GPU is known or any arena
 * exists; then one acquire load per hook. */
#include "entry/hooks.h"

#include <pthread.h>
#include <stdatomic.h>

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

/* too_late_to_defer after the first hook looked: a later deferral fails. */
static void (*_Atomic deferred_start)(void);

static void too_late_to_defer(void)
{
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
	/* Before the driver opens: our fork handlers are registered before its. */
	pthread_once(&start_once, run_deferred_start);
	if (!cumemcap_driver_ready())
		return false;
	pthread_once(&once, register_upcalls);
	atomic_store_explicit(&cumemcap_set_up, true, memory_order_release);
	return true;
}

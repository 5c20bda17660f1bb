/* log: see log.h.
 *
 * Not built yet: the JSON Lines file, samples, NVML and metrics (issue 5).
 * What exists is CUMEMCAP_LOG=stderr: one line per refusal and an exit
 * summary per GPU. */
#include "log.h"

#include <stdatomic.h>

#include "device.h"
#include "ledger.h"
#include "msg.h"
#include "policy.h"

void cumemcap_log_init(void) {}
void cumemcap_log_device(int dev) { (void)dev; }
void cumemcap_log_segment(int dev, bool taken, uint64_t bytes) { (void)dev; (void)taken; (void)bytes; }

void cumemcap_log_refusal(int dev, const char *door, uint64_t requested)
{
	if (cumemcap_policy()->log != CUMEMCAP_LOG_STDERR)
		return;
	char want[32], lim[32], held[32];
	cumemcap_msg("device %d: refused %s (%s) at the limit: %s held of %s", dev,
		     cumemcap_fmt_size(requested, want, sizeof(want)), door,
		     cumemcap_fmt_size(atomic_load(&cumemcap_ledger[dev].reserved), held, sizeof(held)),
		     cumemcap_fmt_size(cumemcap_ledger_limit(dev), lim, sizeof(lim)));
}

void cumemcap_log_driver_oom(int dev, const char *door, uint64_t requested) { (void)dev; (void)door; (void)requested; }
uint32_t cumemcap_log_tick(uint64_t now_ms) { (void)now_ms; return UINT32_MAX; }

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

void cumemcap_log_exit(int signo)
{
	(void)signo;
	if (cumemcap_policy()->log == CUMEMCAP_LOG_STDERR)
		summary();
}

void cumemcap_log_fork_child(void) {}

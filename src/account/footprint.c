/* footprint: see footprint.h, which says how it is thread-safe. The card
 * is read (cuMemGetInfo) inside a reader section of the death lock, so the
 * context it is asked with cannot die meanwhile. */
#include "account/footprint.h"

#include <string.h>
#include <unistd.h>

#include "config/policy.h"
#include "driver/nvml.h"
#include "log/log.h"
#include "platform/worker.h"
#include "platform/xmutex.h"
#include "driver/driver.h"
#include "state/device.h"
#include "state/death-lock.h"
#include "state/ledger.h"

static struct cumemcap_xmutex fp_lock = CUMEMCAP_XMUTEX_INIT(fp_lock);

static struct gpu {
	unsigned contexts;    /* alive, as the shim saw them made */
	bool primary;         /* the primary context is one of them */
	bool baseline_ok;     /* `baseline` read before the first context */
	uint64_t baseline;    /* the GPU's used memory then */
	uint64_t per_context; /* delta, estimate: the overhead of one context */
	bool fresh;           /* nvml: the next reading replaces the overhead */
	uint64_t read_ms;     /* when it was last refreshed (cumemcap_now_ms) */
	enum cumemcap_overhead_source source;
	CUcontext primary_ctx; /* the primary context's handle while it is one of them */
	/* estimate: the highest reading of the card's used memory beyond the
	 * process's allocations since a context was made or gone. */
	bool card_ok;
	uint64_t card;
	uint64_t epoch;       /* contexts made and gone: a reading spanning one is dropped */
} gpus[CUMEMCAP_MAX_DEVICES];

/* Contexts made by cuCtxCreate, to find their GPU when destroyed. Past
 * this many, the extra ones never count as gone: over-, never under-counted. */
#define MADE_MAX 256
static struct {
	CUcontext ctx;
	int dev;
} made[MADE_MAX];

static uint64_t next_tick_ms;

/* Before a refusal the overhead is read again unless it was read this
 * recently: a program retrying in a loop must not query NVML each time. */
#define REFUSAL_READ_MS 10

void cumemcap_account_context_coming(int dev)
{
	if (!cumemcap_device_ensure(dev))
		return;
	const struct cumemcap_device_info *info = cumemcap_device_info(dev);
	cumemcap_xmutex_lock(&fp_lock);
	struct gpu *g = &gpus[dev];
	if (g->source == CUMEMCAP_OVERHEAD_none && g->contexts == 0 && !g->baseline_ok)
		g->baseline_ok = cumemcap_nvml_device_used(info->uuid, &g->baseline);
	cumemcap_xmutex_unlock(&fp_lock);
}

/* fp_lock held: the overhead of dev now, by its source. */
static void refresh_locked(int dev)
{
	struct gpu *g = &gpus[dev];
	const struct cumemcap_device_info *info = cumemcap_device_info(dev);
	if (!info)
		return;
	cumemcap_ledger_read_growth(dev); /* unread pool growth is the calls', not overhead */
	uint64_t reserved = cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved);
	uint64_t overhead = cumemcap_ledger_get(dev, CUMEMCAP_FIG_overhead), used;
	g->read_ms = cumemcap_now_ms();
	/* A context the shim did not see made still has its overhead. */
	unsigned contexts = g->contexts ? g->contexts : reserved ? 1 : 0;
	switch (g->source) {
	case CUMEMCAP_OVERHEAD_nvml:
		switch (cumemcap_nvml_process(info->uuid, (unsigned)getpid(), &used)) {
		case CUMEMCAP_NVML_LISTED: {
			/* With the larger `reserved` of before and after the
			 * answer, a reading is never high (footprint.h). */
			uint64_t after = cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved);
			if (after > reserved)
				reserved = after;
			uint64_t reading = used > reserved ? used - reserved : 0;
			if (g->fresh || reading > overhead)
				overhead = reading;
			g->fresh = false;
			break;
		}
		case CUMEMCAP_NVML_UNLISTED:
			if (contexts == 0)
				overhead = 0;
			break;
		case CUMEMCAP_NVML_UNKNOWN:
			break; /* keep the last figure */
		}
		break;
	case CUMEMCAP_OVERHEAD_delta:
	case CUMEMCAP_OVERHEAD_meminfo:
	case CUMEMCAP_OVERHEAD_estimate:
		overhead = contexts * g->per_context;
		if (g->source == CUMEMCAP_OVERHEAD_estimate && g->card_ok && g->card < overhead) {
			cumemcap_ledger_set_overhead(dev, g->card, CUMEMCAP_OVERHEAD_meminfo);
			return;
		}
		break;
	case CUMEMCAP_OVERHEAD_none:
		overhead = 0;
		break;
	}
	cumemcap_ledger_set_overhead(dev, overhead, g->source);
}

/* fp_lock held: the first context on dev is made; learn the source. */
static void learn_locked(int dev)
{
	struct gpu *g = &gpus[dev];
	const struct cumemcap_device_info *info = cumemcap_device_info(dev);
	uint64_t used;
	if (cumemcap_nvml_process(info->uuid, (unsigned)getpid(), &used) == CUMEMCAP_NVML_LISTED) {
		g->source = CUMEMCAP_OVERHEAD_nvml;
	} else if (g->baseline_ok && cumemcap_nvml_device_used(info->uuid, &used)) {
		uint64_t before = g->baseline + cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved);
		g->per_context = used > before ? used - before : 0;
		g->source = CUMEMCAP_OVERHEAD_delta;
	} else {
		g->per_context = cumemcap_policy()->overhead_estimate;
		g->source = CUMEMCAP_OVERHEAD_estimate;
	}
	g->baseline_ok = false;
	refresh_locked(dev);
	cumemcap_log_overhead(dev, cumemcap_overhead_source_name(g->source), g->per_context);
}

/* Without NVML, what the card shows used beyond the process's allocations
 * bounds its overhead: cuMemGetInfo (fp_lock not held; no capture forbids it). */
static void read_card(int dev)
{
	cumemcap_death_lock_read();
	cumemcap_xmutex_lock(&fp_lock);
	struct gpu *g = &gpus[dev];
	CUcontext ctx = NULL; /* a live context of the process on dev to ask with */
	if (g->source == CUMEMCAP_OVERHEAD_estimate) {
		ctx = g->primary ? g->primary_ctx : NULL;
		for (int i = 0; i < MADE_MAX && !ctx; i++)
			if (made[i].ctx && made[i].dev == dev)
				ctx = made[i].ctx;
	}
	uint64_t epoch = g->epoch;
	cumemcap_xmutex_unlock(&fp_lock);
	uint64_t before = cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved), free = 0, total = 0;
	bool ok = ctx && cumemcap_driver_card_memory(ctx, &free, &total);
	uint64_t after = cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved);
	cumemcap_death_unlock_read();
	if (!ok)
		return;
	uint64_t reserved = after > before ? after : before, used = total > free ? total - free : 0;
	uint64_t beyond = used > reserved ? used - reserved : 0;
	cumemcap_xmutex_lock(&fp_lock);
	if (g->epoch == epoch && g->source == CUMEMCAP_OVERHEAD_estimate) {
		if (!g->card_ok || beyond > g->card)
			g->card = beyond;
		g->card_ok = true;
		refresh_locked(dev);
	}
	cumemcap_xmutex_unlock(&fp_lock);
}

void cumemcap_account_context_made(int dev, CUcontext ctx, bool primary)
{
	if (!cumemcap_device_ensure(dev))
		return;
	cumemcap_xmutex_lock(&fp_lock);
	struct gpu *g = &gpus[dev];
	if (primary) {
		if (!g->primary)
			g->contexts++;
		g->primary = true;
		g->primary_ctx = ctx;
	} else {
		g->contexts++;
		for (int i = 0; i < MADE_MAX; i++)
			if (!made[i].ctx) {
				made[i].ctx = ctx;
				made[i].dev = dev;
				break;
			}
	}
	g->fresh = true;
	g->card_ok = false;
	g->epoch++;
	if (g->source == CUMEMCAP_OVERHEAD_none)
		learn_locked(dev);
	else
		refresh_locked(dev);
	cumemcap_xmutex_unlock(&fp_lock);
	read_card(dev);
}

void cumemcap_account_context_gone(CUcontext ctx, int dev)
{
	cumemcap_xmutex_lock(&fp_lock);
	if (cumemcap_ledger_valid(dev)) {
		if (gpus[dev].primary && gpus[dev].contexts)
			gpus[dev].contexts--;
		gpus[dev].primary = false;
		gpus[dev].primary_ctx = NULL;
	} else if (ctx) {
		for (int i = 0; i < MADE_MAX; i++)
			if (made[i].ctx == ctx) {
				dev = made[i].dev;
				made[i].ctx = NULL;
				if (gpus[dev].contexts)
					gpus[dev].contexts--;
				break;
			}
	}
	if (cumemcap_ledger_valid(dev)) {
		gpus[dev].fresh = true;
		gpus[dev].card_ok = false; /* read again at the next sample or refusal */
		gpus[dev].epoch++;
		refresh_locked(dev);
	}
	cumemcap_xmutex_unlock(&fp_lock);
}

void cumemcap_account_footprint_refresh(int dev)
{
	if (!cumemcap_ledger_valid(dev))
		return;
	bool due = true;
	cumemcap_xmutex_lock(&fp_lock);
	if (gpus[dev].source == CUMEMCAP_OVERHEAD_none && cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved) &&
	    cumemcap_device_info(dev))
		learn_locked(dev); /* memory in a context the shim did not see made */
	else if (cumemcap_now_ms() - gpus[dev].read_ms >= REFUSAL_READ_MS)
		refresh_locked(dev);
	else
		due = false;
	cumemcap_xmutex_unlock(&fp_lock);
	if (due)
		read_card(dev);
}

uint32_t cumemcap_account_footprint_tick(uint64_t now_ms)
{
	bool card[CUMEMCAP_MAX_DEVICES] = { false };
	cumemcap_xmutex_lock(&fp_lock);
	if (now_ms >= next_tick_ms) {
		next_tick_ms = now_ms + cumemcap_policy()->log_interval_ms;
		for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
			if (gpus[dev].source != CUMEMCAP_OVERHEAD_none) {
				refresh_locked(dev);
				card[dev] = gpus[dev].source == CUMEMCAP_OVERHEAD_estimate;
			}
	}
	uint64_t wait = next_tick_ms - now_ms;
	cumemcap_xmutex_unlock(&fp_lock);
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		if (card[dev])
			read_card(dev);
	return wait > UINT32_MAX ? UINT32_MAX : (uint32_t)wait;
}

void cumemcap_account_footprint_fork_child(void)
{
	cumemcap_xmutex_fork_child(&fp_lock);
	memset(gpus, 0, sizeof(gpus));
	memset(made, 0, sizeof(made));
	next_tick_ms = 0;
}

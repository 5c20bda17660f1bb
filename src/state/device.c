/* device: see device.h. */
#include "state/device.h"
#include "platform/export.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "driver/driver.h"
#include "group/group.h"
#include "state/ledger.h"
#include "state/streams.h"
#include "platform/msg.h"
#include "platform/worker.h"

static struct cumemcap_device_info infos[CUMEMCAP_MAX_DEVICES];
static _Atomic bool ready[CUMEMCAP_MAX_DEVICES]; /* infos[dev] is filled in */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t rules_once = PTHREAD_ONCE_INIT;
static void (*_Atomic listener)(int dev);

void cumemcap_device_listen(void (*known)(int dev))
{
	atomic_store(&listener, known);
}

static bool describe(int dev, struct cumemcap_device_info *info)
{
	memset(info, 0, sizeof(*info));
	if (!cumemcap_driver_describe(dev, &info->total, info->uuid, info->pci_bus_id, sizeof(info->pci_bus_id)))
		return false;
	info->limit = cumemcap_policy_limit(cumemcap_policy(), false, dev, info->uuid,
					    info->pci_bus_id, info->total, &info->limit_src);
	return true;
}

/* Every GPU the driver reported, described when the first one was used:
 * written once under init_lock, then read-only. */
static int all_count;
static struct cumemcap_device_info all[CUMEMCAP_MAX_DEVICES];
static _Atomic int all_known = -1; /* all_count, published */

/* Say once which GPU a rule names is none of this machine's (settings may serve several). */
static void check_selector(void *ctx, const struct cumemcap_selector *sel,
			   const struct cumemcap_source *src)
{
	(void)ctx;
	for (int d = 0; d < all_count; d++)
		if (cumemcap_selector_matches(sel, d, all[d].uuid, all[d].pci_bus_id))
			return;
	char name[64], where[CUMEMCAP_PATH_MAX + 16];
	cumemcap_selector_format(sel, name, sizeof(name));
	cumemcap_source_format(cumemcap_policy(), src, where, sizeof(where));
	cumemcap_msg("%s: \"%s\" matches none of the %d GPU(s) this process sees; that rule is not "
		     "applied", where, name, all_count);
}

static bool single; /* the driver reports one GPU, described: under init_lock */
static _Atomic int only = -1; /* 0 once that GPU is known (cumemcap_device_only) */
static _Atomic int driver_version; /* 0: unknown */

static void check_rules(void)
{
	int count = cumemcap_driver_device_count();
	if (count <= 0)
		return;
	for (int d = 0; d < count && d < CUMEMCAP_MAX_DEVICES; d++)
		if (describe(d, &all[all_count]))
			all_count++;
	single = count == 1 && all_count == 1;
	cumemcap_policy_selectors(cumemcap_policy(), check_selector, NULL);
	atomic_store(&driver_version, cumemcap_driver_version());
	atomic_store_explicit(&all_known, all_count, memory_order_release);
}

int cumemcap_device_driver_version(void)
{
	return atomic_load(&driver_version);
}

int cumemcap_device_all(const struct cumemcap_device_info **out)
{
	int n = atomic_load_explicit(&all_known, memory_order_acquire);
	*out = n > 0 ? all : NULL;
	return n < 0 ? 0 : n;
}

/* A member whose group limit on `dev` differs from the budget the group's
 * book already holds: the book's holds, said in one line. */
static void name_other_budget(int dev, const struct cumemcap_device_info *info)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	struct cumemcap_source src;
	const struct cumemcap_group_dev *gd = &cumemcap_group_devs[dev];
	if (!p->group[0] || !atomic_load(&gd->on) || atomic_load(&gd->gpu) < 0) /* not attached */
		return;
	uint64_t mine = cumemcap_policy_limit(p, true, dev, info->uuid, info->pci_bus_id, info->total, &src);
	uint64_t budget = cumemcap_group_limit(dev);
	if (mine == UINT64_MAX || budget == mine)
		return;
	char b[32], m[32], where[CUMEMCAP_PATH_MAX + 16];
	cumemcap_source_format(p, &src, where, sizeof(where));
	cumemcap_msg("CUMEMCAP_GROUP=%s: GPU %d: the group's budget holds: %s, not the %s of %s "
		     "(the group's first member set it; cumemcap group set changes it)", p->group, dev,
		     budget == UINT64_MAX ? "none" : cumemcap_fmt_size(budget, b, sizeof(b)),
		     cumemcap_fmt_size(mine, m, sizeof(m)), where);
}

bool cumemcap_device_ensure(int dev)
{
	if (!cumemcap_ledger_valid(dev))
		return false;
	if (atomic_load_explicit(&ready[dev], memory_order_acquire))
		return true;
	pthread_mutex_lock(&init_lock);
	/* One the driver cannot describe now is asked again next time: a hook
	 * may look before the program's cuInit (footprint.h). */
	bool made = !atomic_load(&ready[dev]) && describe(dev, &infos[dev]);
	if (made) {
		pthread_once(&rules_once, check_rules);
		cumemcap_ledger_set_limit(dev, infos[dev].limit);
		cumemcap_group_attach(dev, infos[dev].uuid, infos[dev].pci_bus_id, infos[dev].total,
				      infos[dev].limit);
		name_other_budget(dev, &infos[dev]);
		atomic_store_explicit(&ready[dev], true, memory_order_release);
		if (dev == 0 && single)
			atomic_store_explicit(&only, 0, memory_order_release);
	}
	pthread_mutex_unlock(&init_lock);
	if (made) {
		void (*tell)(int dev) = atomic_load(&listener);
		if (tell)
			tell(dev);
		cumemcap_worker_start();
	}
	return atomic_load(&ready[dev]);
}

int cumemcap_device_only(void)
{
	return atomic_load_explicit(&only, memory_order_acquire);
}

const struct cumemcap_device_info *cumemcap_device_info(int dev)
{
	return cumemcap_ledger_valid(dev) && atomic_load(&ready[dev]) ? &infos[dev] : NULL;
}

/* Each thread's device (and arena) of the last context it asked about; a
 * death bumps the generation, as the handle may come back on another device. */
static _Atomic uint64_t generation = 1;
static CUMEMCAP_TLS struct last_ctx {
	CUcontext ctx;
	uint64_t generation;
	int dev;
	void *arena; /* NULL on a change */
} last;

void cumemcap_device_forget_contexts(void)
{
	atomic_fetch_add_explicit(&generation, 1, memory_order_release);
}

/* A context this thread has not seen under this generation. */
static __attribute__((noinline)) CUresult current_slow(CUcontext ctx, uint64_t gen, int *dev)
{
	CUdevice d;
	CUresult r = cumemcap_driver_current_device(&d);
	if (r != CUDA_SUCCESS)
		return r;
	if (!cumemcap_device_ensure(d))
		return CUDA_ERROR_INVALID_DEVICE;
	last = (struct last_ctx){ ctx, gen, d, NULL };
	*dev = d;
	return CUDA_SUCCESS;
}

CUresult cumemcap_device_current(CUcontext *ctx, int *dev)
{
	CUresult r = cumemcap_driver_current_ctx(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!*ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	uint64_t gen = atomic_load_explicit(&generation, memory_order_acquire);
	if (__builtin_expect(last.ctx == *ctx && last.generation == gen, 1)) {
		*dev = last.dev;
		return CUDA_SUCCESS;
	}
	return current_slow(*ctx, gen, dev);
}

CUresult cumemcap_device_current_arena(CUcontext *ctx, int *dev, void **arena)
{
	CUresult r = cumemcap_device_current(ctx, dev);
	*arena = last.arena;
	return r;
}

void cumemcap_device_cache_arena(CUcontext ctx, void *arena)
{
	if (last.ctx == ctx || !arena)
		last.arena = arena;
}

/* Each thread remembers the owner of the last stream it asked about, until a
 * stream or a context dies. Both generations are read before the driver is
 * asked, so an answer that a destruction overtook is never kept. */
static CUMEMCAP_TLS struct last_stream {
	CUstream stream; /* NULL: nothing cached */
	uint64_t streams_gen, generation;
	CUcontext owner;
	int dev;
} last_stream;

bool cumemcap_device_of_stream_known(CUstream s, CUcontext *ctx, int *dev)
{
	if (!s || last_stream.stream != s || last_stream.streams_gen != cumemcap_streams_gen() ||
	    last_stream.generation != atomic_load_explicit(&generation, memory_order_acquire))
		return false;
	*ctx = last_stream.owner;
	*dev = last_stream.dev;
	return true;
}

void cumemcap_device_of_stream(CUstream s, CUcontext *ctx, int *dev)
{
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return;
	uint64_t sgen = cumemcap_streams_gen();
	uint64_t gen = atomic_load_explicit(&generation, memory_order_acquire);
	CUcontext owner;
	CUdevice d = *dev;
	if (!cumemcap_driver_stream_ctx(s, &owner))
		return;
	if (owner != *ctx && (!cumemcap_driver_ctx_device(owner, &d) || !cumemcap_device_ensure(d)))
		return;
	last_stream = (struct last_stream){ s, sgen, gen, owner, d };
	*ctx = owner;
	*dev = d;
}

/* streams: see streams.h. A fixed array: such streams are few (PyTorch: a dozen). */
#include "state/streams.h"

#include <stdatomic.h>

#include "platform/spin.h"

#define MAX_KEPT 256

static struct entry {
	CUstream stream;
	CUcontext ctx; /* NULL: unknown, every fence falls back */
} kept[MAX_KEPT];
static int used;
static int untracked; /* past the array's end */
static atomic_flag lock = ATOMIC_FLAG_INIT;
static _Atomic uint64_t gen;

void cumemcap_streams_created(CUstream stream, CUcontext ctx, unsigned flags)
{
	if (ctx && !(flags & CU_STREAM_NON_BLOCKING))
		return; /* the legacy stream waits for it */
	cumemcap_spin_lock(&lock);
	if (used < MAX_KEPT)
		kept[used++] = (struct entry){ stream, ctx };
	else
		untracked++;
	cumemcap_spin_unlock(&lock);
}

void cumemcap_streams_destroyed(CUstream stream)
{
	/* First, so that a fence that missed the stream sees it move. */
	atomic_fetch_add_explicit(&gen, 1, memory_order_seq_cst);
	cumemcap_spin_lock(&lock);
	for (int i = 0; i < used; i++)
		if (kept[i].stream == stream) {
			kept[i] = kept[--used];
			break;
		}
	cumemcap_spin_unlock(&lock);
}

uint64_t cumemcap_streams_gen(void)
{
	return atomic_load_explicit(&gen, memory_order_seq_cst);
}

int cumemcap_streams_of(CUcontext ctx, CUstream out[CUMEMCAP_STREAMS_MAX])
{
	cumemcap_spin_lock(&lock);
	int n = untracked ? -1 : 0;
	for (int i = 0; i < used && n >= 0; i++) {
		if (!kept[i].ctx || (kept[i].ctx == ctx && n == CUMEMCAP_STREAMS_MAX))
			n = -1;
		else if (kept[i].ctx == ctx)
			out[n++] = kept[i].stream;
	}
	cumemcap_spin_unlock(&lock);
	return n;
}

void cumemcap_streams_forget_ctx(CUcontext ctx)
{
	cumemcap_spin_lock(&lock);
	for (int i = 0; i < used;)
		if (kept[i].ctx == ctx)
			kept[i] = kept[--used];
		else
			i++;
	cumemcap_spin_unlock(&lock);
}

void cumemcap_streams_fork_child(void)
{
	used = 0;
	untracked = 0;
	atomic_flag_clear(&lock);
}

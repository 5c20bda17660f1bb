/* arena/fence: see fence.h. */
#include "arena/fence.h"

#include "arena/arena-internal.h"
#include "driver/driver.h"
#include "state/streams.h"

#define EVENTS (CUMEMCAP_STREAMS_MAX + 1)

static struct fence {
	atomic_flag busy;
	CUcontext ctx;   /* whose events these are (NULL: none) */
	uint32_t epoch;  /* the arena's epoch they were made in */
	uint32_t made;   /* events made so far */
	bool synced;     /* a context synchronization began at generation gen */
	uint64_t gen;
	CUevent ev[EVENTS]; /* ev[0]: the legacy stream's */
} fences[MAX_ARENAS];

/* Prove the work queued so far on the legacy stream and on the busy ones
 * of streams[0..n) complete. */
static CUresult fence_now(struct fence *f, const CUstream *streams, int n)
{
	CUstream busy[EVENTS];
	uint32_t k = 0;
	busy[k++] = CU_STREAM_LEGACY;
	for (int i = 0; i < n; i++) {
		CUresult r = cumemcap_driver_stream_query(streams[i]);
		if (r == CUDA_ERROR_NOT_READY)
			busy[k++] = streams[i];
		else if (r != CUDA_SUCCESS)
			return r;
	}
	CUresult r = CUDA_SUCCESS;
	while (f->made < k && r == CUDA_SUCCESS) {
		r = cumemcap_driver_event_create(&f->ev[f->made]);
		if (r == CUDA_SUCCESS)
			f->made++;
	}
	for (uint32_t i = 0; i < k && r == CUDA_SUCCESS; i++)
		r = cumemcap_driver_event_record(f->ev[i], busy[i]);
	for (uint32_t i = 0; i < k && r == CUDA_SUCCESS; i++) {
		r = cumemcap_driver_event_query(f->ev[i]);
		if (r == CUDA_ERROR_NOT_READY)
			r = cumemcap_driver_event_synchronize(f->ev[i]);
	}
	return r;
}

CUresult arena_fence_wait(struct arena *a, CUcontext ctx, uint32_t epoch)
{
	struct fence *f = &fences[a - arenas];
	if (atomic_flag_test_and_set_explicit(&f->busy, memory_order_acquire))
		return cumemcap_driver_ctx_synchronize(); /* another thread fences */
	if (f->ctx != ctx || f->epoch != epoch) {
		/* A new context in the slot: the old events died with theirs. */
		f->ctx = ctx;
		f->epoch = epoch;
		f->made = 0;
		f->synced = false;
	}
	CUstream streams[CUMEMCAP_STREAMS_MAX];
	uint64_t gen = cumemcap_streams_gen();
	CUresult r = CUDA_ERROR_NOT_READY;
	if (f->synced && f->gen == gen) {
		int n = cumemcap_streams_of(ctx, streams);
		if (n >= 0)
			r = fence_now(f, streams, n);
		/* A stream destroyed meanwhile may have left the list before
		 * it was recorded on. */
		if (r == CUDA_SUCCESS && cumemcap_streams_gen() != gen)
			r = CUDA_ERROR_NOT_READY;
	}
	if (r != CUDA_SUCCESS) {
		r = cumemcap_driver_ctx_synchronize();
		f->synced = r == CUDA_SUCCESS;
		f->gen = gen;
	}
	atomic_flag_clear_explicit(&f->busy, memory_order_release);
	return r;
}

void arena_fence_fork_child(void)
{
	for (unsigned i = 0; i < MAX_ARENAS; i++) {
		fences[i].ctx = NULL;
		fences[i].made = 0;
		fences[i].synced = false;
		atomic_flag_clear(&fences[i].busy);
	}
}

/* arena/fence: see fence.h. */
#include "arena/fence.h"

#include "arena/arena-internal.h"
#include "driver/driver.h"
#include "state/streams.h"

#define EVENTS (CUMEMCAP_STREAMS_MAX + 1)

static struct fence {
	atomic_flag busy;
	uint32_t epoch;  /* the arena's epoch the events were made in */
	uint32_t made;   /* events made so far */
	uint64_t synced; /* 1 + the stream generation a context synchronization began at; 0: none */
	CUevent ev[EVENTS]; /* ev[0]: the legacy stream's */
} fences[MAX_ARENAS];

CUresult arena_fence_wait(struct arena *a, CUcontext ctx, uint32_t epoch)
{
	struct fence *f = &fences[a - arenas];
	if (atomic_flag_test_and_set_explicit(&f->busy, memory_order_acquire))
		return cumemcap_driver_ctx_synchronize(); /* another thread fences */
	if (f->epoch != epoch) {
		/* The arena was emptied: the old events died with their context. */
		f->epoch = epoch;
		f->made = 0;
		f->synced = 0;
	}
	/* busy[0..k): the legacy stream and the non-blocking ones with work. */
	CUstream busy[EVENTS];
	busy[0] = CU_STREAM_LEGACY;
	uint32_t k = 1;
	uint64_t gen = cumemcap_streams_gen();
	int n = f->synced == gen + 1 ? cumemcap_streams_of(ctx, busy + 1) : -1;
	CUresult r = n < 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
	for (int i = 1; i <= n && r == CUDA_SUCCESS; i++) {
		r = cumemcap_driver_stream_query(busy[i]);
		if (r == CUDA_ERROR_NOT_READY) {
			busy[k++] = busy[i];
			r = CUDA_SUCCESS;
		}
	}
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
	/* A stream destroyed meanwhile may have left the list unrecorded. */
	if (r == CUDA_SUCCESS && cumemcap_streams_gen() != gen)
		r = CUDA_ERROR_NOT_READY;
	if (r != CUDA_SUCCESS) {
		r = cumemcap_driver_ctx_synchronize();
		f->synced = r == CUDA_SUCCESS ? gen + 1 : 0;
	}
	atomic_flag_clear_explicit(&f->busy, memory_order_release);
	return r;
}

void arena_fence_fork_child(void)
{
	memset(fences, 0, sizeof(fences)); /* as at start: no events, not synchronized, none busy */
}

/* events: the event and stream calls the arenas' fences make (arena/fence.c).
 * Each returns the driver's answer unchanged, or CUDA_ERROR_NOT_SUPPORTED
 * when the driver lacks the entry point (the caller then synchronizes the
 * whole context). Thread safety: no state, as driver.h. */
#pragma once

#include "driver/driver.h"

/* A reusable event of the current context, with no timing (cheaper to
 * record and query). */
static inline CUresult cumemcap_driver_event_create(CUevent *ev)
{
	return real_cuEventCreate ? real_cuEventCreate(ev, CU_EVENT_DISABLE_TIMING) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Record ev on `stream` (CU_STREAM_LEGACY: the legacy default stream, which
 * first waits for every blocking stream of the context). Never on a stream
 * that captures: the record would become a node of the program's graph. */
static inline CUresult cumemcap_driver_event_record(CUevent ev, CUstream stream)
{
	return real_cuEventRecord ? real_cuEventRecord(ev, stream) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Has the work ev captured completed? CUDA_SUCCESS or CUDA_ERROR_NOT_READY;
 * never blocks. */
static inline CUresult cumemcap_driver_event_query(CUevent ev)
{
	return real_cuEventQuery ? real_cuEventQuery(ev) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Wait until the work ev captured has completed. */
static inline CUresult cumemcap_driver_event_synchronize(CUevent ev)
{
	return real_cuEventSynchronize ? real_cuEventSynchronize(ev) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Has every operation queued on `stream` so far completed? CUDA_SUCCESS or
 * CUDA_ERROR_NOT_READY; never blocks. */
static inline CUresult cumemcap_driver_stream_query(CUstream stream)
{
	return real_cuStreamQuery ? real_cuStreamQuery(stream) : CUDA_ERROR_NOT_SUPPORTED;
}

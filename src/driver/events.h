/* events: the event and stream calls of the arenas' fences (arena/fence.c),
 * each the driver's answer or CUDA_ERROR_NOT_SUPPORTED when the driver
 * lacks the entry point. Thread-safe: no state. */
#pragma once

#include "driver/driver.h"

/* A reusable event of the current context, without timing. */
static inline CUresult cumemcap_driver_event_create(CUevent *ev)
{
	return real_cuEventCreate ? real_cuEventCreate(ev, CU_EVENT_DISABLE_TIMING) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Record ev on `stream`. Never on a capturing stream: it would become a
 * node of the program's graph. */
static inline CUresult cumemcap_driver_event_record(CUevent ev, CUstream stream)
{
	return real_cuEventRecord ? real_cuEventRecord(ev, stream) : CUDA_ERROR_NOT_SUPPORTED;
}

/* CUDA_SUCCESS when ev's work is done, else CUDA_ERROR_NOT_READY, at once. */
static inline CUresult cumemcap_driver_event_query(CUevent ev)
{
	return real_cuEventQuery ? real_cuEventQuery(ev) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Likewise for all work queued on `stream`. */
static inline CUresult cumemcap_driver_stream_query(CUstream stream)
{
	return real_cuStreamQuery ? real_cuStreamQuery(stream) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Wait for ev's work. */
static inline CUresult cumemcap_driver_event_synchronize(CUevent ev)
{
	return real_cuEventSynchronize ? real_cuEventSynchronize(ev) : CUDA_ERROR_NOT_SUPPORTED;
}

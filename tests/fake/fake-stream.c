/* fake-stream: streams and events.
 *
 * Every created stream (and every per-thread default stream, made lazily
 * per thread and context) has a detached worker thread and a FIFO of
 * operations. Enqueueing returns at once; the worker sleeps
 * FAKECUDA_STREAM_DELAY_US and then really runs the operation, so work is
 * observably late. The legacy default stream has no worker: an operation on
 * it first waits until every blocking stream of the context is drained, then
 * runs in the caller; blocking streams' workers do not start an operation
 * while a legacy operation runs. NON_BLOCKING streams are only waited for by
 * cuMemFree, context synchronize and context teardown (fake_ctx_drain).
 * cuStreamSynchronize/cuStreamQuery on the legacy stream cover the blocking
 * streams (what a marker on the legacy stream would wait for). An event
 * recorded on the legacy stream is the one legacy operation that does not
 * run in the caller: as documented, the record returns at once and the
 * event completes when the work queued before it on every blocking stream
 * of the context has (the streams' counts then are kept with the event and
 * looked at whenever its completion is).
 * Stream, event and context synchronize trim the device's pools down to
 * their release thresholds afterwards (fake-pool.c).
 *
 * Thread safety: everything under fake_lock; workers drop it while an
 * operation runs. Streams and events are found in global lists, so a stale
 * or made-up handle is CUDA_ERROR_INVALID_HANDLE, never a dereference. A
 * stream struct is freed by its exiting worker, or by the last thread still
 * waiting on it.
 */
#include "fake-internal.h"
#include "fake-extra.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct CUstream_st {
	struct CUctx_st *ctx;
	unsigned flags;
	bool nonblocking;
	bool per_thread;
	pthread_t owner; /* per_thread: the thread it belongs to */
	struct fake_op *head, *tail;
	uint64_t submitted, completed;
	uint64_t serial; /* never reused, unlike the address */
	bool dying;
	struct fake_capture *capture; /* the capture sequence it is in (fake-capture.c) */
	bool exited;  /* worker gone; freed by the last waiter */
	int waiters;  /* threads waiting on this stream's progress */
	pthread_cond_t cv;
	struct CUstream_st *next;
};

struct CUevent_st {
	struct CUctx_st *ctx;
	unsigned flags;
	uint64_t recorded, completed;
	struct timespec completed_at; /* when the last completed record ran */
	int refs; /* the handle + pending operations */
	/* Recorded on the legacy stream: completes (as record mark_seq) once
	 * each of these blocking streams completed `target` operations. */
	struct legacy_mark {
		uint64_t serial, target;
	} *marks;
	int nmarks;
	uint64_t mark_seq;
	bool destroyed;
	struct CUevent_st *next;
};

static struct CUstream_st *all_streams;
static struct CUevent_st *all_events;
static uint64_t stream_serials;

/* ---- events (helpers) --------------------------------------------------------- */

static void event_unref(struct CUevent_st *e)
{
	if (--e->refs > 0)
		return;
	for (struct CUevent_st **pp = &all_events; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	free(e->marks);
	free(e);
}

static bool event_valid(struct CUevent_st *e)
{
	for (struct CUevent_st *p = all_events; p; p = p->next)
		if (p == e)
			return !p->destroyed && p->ctx->alive;
	return false;
}

/* A legacy-stream record whose blocking streams are done completes now
 * (lock held). */
static void event_settle(struct CUevent_st *e)
{
	if (e->completed >= e->mark_seq)
		return; /* no legacy record pending */
	for (int i = 0; i < e->nmarks; i++)
		for (struct CUstream_st *s = all_streams; s; s = s->next)
			if (s->serial == e->marks[i].serial && s->completed < e->marks[i].target)
				return; /* gone from the list: its worker drained and exited */
	e->completed = e->mark_seq;
	clock_gettime(CLOCK_MONOTONIC, &e->completed_at);
	free(e->marks);
	e->marks = NULL;
	e->nmarks = 0;
}

/* ---- operations -------------------------------------------------------------- */

static void op_run_unlocked(struct fake_op *op)
{
	switch (op->kind) {
	case FAKE_OP_COPY:
		memmove(op->dst, op->src, op->n);
		break;
	case FAKE_OP_SET8:
		memset(op->dst, (int)(op->value & 0xff), op->n);
		break;
	case FAKE_OP_SET32: {
		uint32_t *d = op->dst;
		for (size_t i = 0; i < op->n; i++)
			d[i] = op->value;
		break;
	}
	case FAKE_OP_HOSTFN:
		op->fn(op->user);
		break;
	case FAKE_OP_WAIT_EVENT:
		pthread_mutex_lock(&fake_lock);
		for (event_settle(op->event); op->event->completed < op->seq; event_settle(op->event))
			fake_wait();
		pthread_mutex_unlock(&fake_lock);
		break;
	case FAKE_OP_EVENT_RECORD:
	case FAKE_OP_POOL_FREE:
		break;
	}
}

static void op_finish_locked(struct fake_op *op)
{
	switch (op->kind) {
	case FAKE_OP_EVENT_RECORD:
		if (op->event->completed < op->seq) {
			op->event->completed = op->seq;
			clock_gettime(CLOCK_MONOTONIC, &op->event->completed_at);
		}
		event_unref(op->event);
		break;
	case FAKE_OP_WAIT_EVENT:
		event_unref(op->event);
		break;
	case FAKE_OP_POOL_FREE:
		fake_chunk_return(op->chunk_pool, op->chunk);
		break;
	default:
		break;
	}
	free(op->owned);
	free(op);
}

static void *stream_worker(void *arg)
{
	struct CUstream_st *s = arg;
	pthread_mutex_lock(&fake_lock);
	for (;;) {
		while (!s->head && !s->dying)
			pthread_cond_wait(&s->cv, &fake_lock);
		if (!s->head)
			break;
		struct fake_op *op = s->head;
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		while (!s->nonblocking && s->ctx->legacy_running)
			fake_wait();
		pthread_mutex_unlock(&fake_lock);
		if (fake_cfg.delay_us)
			usleep(fake_cfg.delay_us);
		op_run_unlocked(op);
		pthread_mutex_lock(&fake_lock);
		op_finish_locked(op);
		s->completed++;
		fake_broadcast();
	}
	for (struct CUstream_st **pp = &all_streams; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	fake_broadcast();
	s->exited = true;
	bool free_now = s->waiters == 0;
	pthread_mutex_unlock(&fake_lock);
	if (free_now) {
		pthread_cond_destroy(&s->cv);
		free(s);
	}
	return NULL;
}

/* Wait until s completed target operations (lock held); s may exit (and is
 * then freed here) meanwhile. */
static void stream_wait_for(struct CUstream_st *s, uint64_t target)
{
	s->waiters++;
	while (s->completed < target && !s->exited)
		fake_wait();
	if (--s->waiters == 0 && s->exited) {
		pthread_cond_destroy(&s->cv);
		free(s);
	}
}

static bool stream_busy(const struct CUstream_st *s)
{
	return s->completed != s->submitted;
}

static void drain_blocking(struct CUctx_st *ctx)
{
	for (;;) {
		bool busy = false;
		for (struct CUstream_st *s = all_streams; s && !busy; s = s->next)
			busy = s->ctx == ctx && !s->nonblocking && stream_busy(s);
		if (!busy)
			return;
		fake_wait();
	}
}

void fake_ctx_drain(struct CUctx_st *ctx)
{
	fake_capture_ctx_synchronized(ctx);
	for (;;) {
		bool busy = ctx->legacy_running > 0;
		for (struct CUstream_st *s = all_streams; s && !busy; s = s->next)
			busy = s->ctx == ctx && stream_busy(s);
		if (!busy)
			return;
		fake_wait();
	}
}

void fake_op_discard(struct fake_op *op)
{
	op_finish_locked(op);
}

struct fake_op *fake_op_clone(const struct fake_op *op, bool launch)
{
	struct fake_op *c = malloc(sizeof *c);
	if (!c)
		return NULL;
	*c = *op;
	c->next = NULL;
	if (op->owned) { /* a staged host source: the graph keeps its own */
		if (!(c->owned = malloc(op->n))) {
			free(c);
			return NULL;
		}
		memcpy(c->owned, op->owned, op->n);
		c->src = c->owned;
	}
	if (c->kind == FAKE_OP_EVENT_RECORD || c->kind == FAKE_OP_WAIT_EVENT)
		c->event->refs++;
	if (launch && c->kind == FAKE_OP_EVENT_RECORD) /* each launch records the event anew */
		c->seq = ++c->event->recorded;
	return c;
}

struct fake_capture *fake_stream_capture(struct CUstream_st *s) { return s->capture; }
void fake_stream_set_capture(struct CUstream_st *s, struct fake_capture *c) { s->capture = c; }
struct CUctx_st *fake_stream_ctx(struct CUstream_st *s) { return s->ctx; }
bool fake_stream_blocking(struct CUstream_st *s) { return !s->nonblocking; }

void fake_stream_submit(struct CUctx_st *ctx, struct CUstream_st *s, struct fake_op *op, bool wait)
{
	if (s && s->capture) { /* captured into a graph, not run */
		fake_capture_add_op(s->capture, op);
		return;
	}
	if (!s) {
		drain_blocking(ctx);
		ctx->legacy_running++;
		pthread_mutex_unlock(&fake_lock);
		op_run_unlocked(op);
		pthread_mutex_lock(&fake_lock);
		op_finish_locked(op);
		ctx->legacy_running--;
		fake_broadcast();
		return;
	}
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	uint64_t mine = ++s->submitted;
	pthread_cond_signal(&s->cv);
	if (wait)
		stream_wait_for(s, mine);
}

/* ---- streams ------------------------------------------------------------------- */

static CUresult stream_new(struct CUctx_st *ctx, unsigned flags, bool per_thread, struct CUstream_st **out)
{
	struct CUstream_st *s = calloc(1, sizeof *s);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->ctx = ctx;
	s->flags = flags;
	s->nonblocking = flags & CU_STREAM_NON_BLOCKING;
	s->per_thread = per_thread;
	s->serial = ++stream_serials;
	s->owner = pthread_self();
	pthread_cond_init(&s->cv, NULL);
	pthread_t t;
	if (pthread_create(&t, NULL, stream_worker, s) != 0) {
		pthread_cond_destroy(&s->cv);
		free(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_detach(t);
	s->next = all_streams;
	all_streams = s;
	*out = s;
	return CUDA_SUCCESS;
}

CUresult fake_stream_resolve(CUstream h, bool per_thread, struct CUctx_st *ctx, struct CUstream_st **out)
{
	if (h == CU_STREAM_LEGACY || (!h && !per_thread)) {
		*out = NULL;
		return CUDA_SUCCESS;
	}
	if (!h || h == CU_STREAM_PER_THREAD) {
		pthread_t self = pthread_self();
		for (struct CUstream_st *s = all_streams; s; s = s->next)
			if (s->per_thread && !s->dying && s->ctx == ctx && pthread_equal(s->owner, self)) {
				*out = s;
				return CUDA_SUCCESS;
			}
		return stream_new(ctx, CU_STREAM_DEFAULT, true, out);
	}
	for (struct CUstream_st *s = all_streams; s; s = s->next)
		if (s == h) {
			if (s->dying || !s->ctx->alive)
				break;
			*out = s;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_HANDLE;
}

void fake_ctx_release_streams(struct CUctx_st *ctx)
{
	for (struct CUstream_st *s = all_streams; s; s = s->next)
		if (s->ctx == ctx && !s->dying) {
			if (s->capture)
				fake_capture_stream_gone(s);
			s->dying = true;
			pthread_cond_signal(&s->cv);
		}
	for (;;) {
		bool left = false;
		for (struct CUstream_st *s = all_streams; s && !left; s = s->next)
			left = s->ctx == ctx;
		if (!left)
			break;
		fake_wait();
	}
	struct CUevent_st *e = all_events;
	while (e) {
		struct CUevent_st *next = e->next;
		if (e->ctx == ctx && !e->destroyed) {
			e->destroyed = true;
			event_unref(e);
		}
		e = next;
	}
}

static CUresult stream_create(CUstream *phStream, unsigned int Flags)
{
	REQUIRE_INIT();
	if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	struct CUstream_st *s = NULL;
	CUresult r = fake_ctx_require(&ctx);
	if (!r)
		r = stream_new(ctx, Flags, false, &s);
	pthread_mutex_unlock(&fake_lock);
	if (!r)
		*phStream = s;
	return r;
}

FAKE_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	COUNT(cuStreamCreate);
	return stream_create(phStream, Flags);
}

/* Documented: a priority outside the device's range is clamped to it; the
 * fake's streams all run alike, so it is not kept. */
FAKE_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	COUNT(cuStreamCreateWithPriority);
	(void)priority;
	return stream_create(phStream, flags);
}

/* The fake makes no green contexts, so no handle names one. */
FAKE_API CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority)
{
	COUNT(cuGreenCtxStreamCreate);
	REQUIRE_INIT();
	(void)greenCtx;
	(void)priority;
	if (!phStream || flags != CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_INVALID_HANDLE;
}

/* Returns at once; the worker finishes the queued work, then exits. */
static CUresult stream_destroy(CUstream h)
{
	REQUIRE_INIT();
	if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	for (struct CUstream_st *s = all_streams; s; s = s->next)
		if (s == h && !s->dying && !s->per_thread) {
			if (s->capture)
				fake_capture_stream_gone(s);
			s->dying = true;
			pthread_cond_signal(&s->cv);
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamDestroy(CUstream hStream)
{
	COUNT(cuStreamDestroy);
	return stream_destroy(hStream);
}

FAKE_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
	COUNT(cuStreamDestroy_v2);
	return stream_destroy(hStream);
}

/* Resolve a stream with the context it belongs to (lock held). */
CUresult fake_stream_lookup(CUstream h, bool pt, struct CUctx_st **ctx, struct CUstream_st **s)
{
	CUresult r = CUDA_SUCCESS;
	if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		r = fake_ctx_require(ctx);
		if (r)
			return r;
	}
	r = fake_stream_resolve(h, pt, *ctx, s);
	if (!r && *s)
		*ctx = (*s)->ctx;
	return r;
}

static CUresult stream_sync(CUstream h, bool pt)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	if (!r && s && s->capture) {
		/* synchronizing a capturing stream breaks its capture */
		fake_capture_invalidate(s->capture);
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	} else if (!r) {
		if (s) {
			stream_wait_for(s, s->submitted);
		} else {
			drain_blocking(ctx);
		}
		fake_pools_trim_at_sync(ctx->dev);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamSynchronize(CUstream hStream)
{
	COUNT(cuStreamSynchronize);
	return stream_sync(hStream, false);
}

FAKE_API CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	COUNT(cuStreamSynchronize_ptsz);
	return stream_sync(hStream, true);
}

static CUresult stream_query(CUstream h, bool pt)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	if (!r && s && s->capture) {
		/* so does querying it */
		fake_capture_invalidate(s->capture);
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	} else if (!r) {
		bool busy = false;
		if (s)
			busy = stream_busy(s);
		else
			for (struct CUstream_st *p = all_streams; p && !busy; p = p->next)
				busy = p->ctx == ctx && !p->nonblocking && stream_busy(p);
		r = busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamQuery(CUstream hStream)
{
	COUNT(cuStreamQuery);
	return stream_query(hStream, false);
}

FAKE_API CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	COUNT(cuStreamQuery_ptsz);
	return stream_query(hStream, true);
}

/* "Returns the context that the stream is associated with": the current
 * context for the default streams (per-thread: the thread's). */
static CUresult stream_get_ctx(CUstream h, CUcontext *pctx, bool pt)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	if (!r)
		*pctx = ctx;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	COUNT(cuStreamGetCtx);
	return stream_get_ctx(hStream, pctx, false);
}

FAKE_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
	COUNT(cuStreamGetCtx_ptsz);
	return stream_get_ctx(hStream, pctx, true);
}

static CUresult stream_wait_event(CUstream h, CUevent ev, unsigned flags, bool pt)
{
	REQUIRE_INIT();
	if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	if (!r && !event_valid(ev))
		r = CUDA_ERROR_INVALID_HANDLE;
	if (!r)
		event_settle(ev);
	if (!r && ev->recorded > ev->completed) {
		struct fake_op *op = calloc(1, sizeof *op);
		if (!op) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			op->kind = FAKE_OP_WAIT_EVENT;
			op->event = ev;
			op->seq = ev->recorded;
			ev->refs++;
			fake_stream_submit(ctx, s, op, false);
		}
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	COUNT(cuStreamWaitEvent);
	return stream_wait_event(hStream, hEvent, Flags, false);
}

FAKE_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	COUNT(cuStreamWaitEvent_ptsz);
	return stream_wait_event(hStream, hEvent, Flags, true);
}

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *user, bool pt)
{
	REQUIRE_INIT();
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	struct fake_op *op = NULL;
	if (!r && !(op = calloc(1, sizeof *op)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		op->kind = FAKE_OP_HOSTFN;
		op->fn = fn;
		op->user = user;
		fake_stream_submit(ctx, s, op, false);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	COUNT(cuLaunchHostFunc);
	return launch_host_func(hStream, fn, userData, false);
}

FAKE_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
	COUNT(cuLaunchHostFunc_ptsz);
	return launch_host_func(hStream, fn, userData, true);
}

/* cuStreamAddCallback: a host function that also gets the stream and the
 * stream's status (always CUDA_SUCCESS: nothing on a fake stream fails).
 * Flags must be 0. */
struct callback {
	CUstream stream;
	CUstreamCallback fn;
	void *user;
};

static void run_callback(void *arg)
{
	struct callback *cb = arg;
	cb->fn(cb->stream, CUDA_SUCCESS, cb->user);
}

static CUresult stream_add_callback(CUstream h, CUstreamCallback fn, void *user, unsigned flags, bool pt)
{
	REQUIRE_INIT();
	if (!fn || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	struct fake_op *op = NULL;
	struct callback *cb = NULL;
	if (!r && (!(op = calloc(1, sizeof *op)) || !(cb = malloc(sizeof *cb)))) {
		free(op);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!r) {
		*cb = (struct callback){h, fn, user};
		op->kind = FAKE_OP_HOSTFN;
		op->fn = run_callback;
		op->user = cb;
		op->owned = cb;
		fake_stream_submit(ctx, s, op, false);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
	COUNT(cuStreamAddCallback);
	return stream_add_callback(hStream, callback, userData, flags, false);
}

FAKE_API CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
					   unsigned int flags)
{
	COUNT(cuStreamAddCallback_ptsz);
	return stream_add_callback(hStream, callback, userData, flags, true);
}

/* ---- events ------------------------------------------------------------------------ */

FAKE_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	COUNT(cuEventCreate);
	REQUIRE_INIT();
	unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
	if (!phEvent || (Flags & ~known) ||
	    ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	struct CUevent_st *e = NULL;
	if (!r && !(e = calloc(1, sizeof *e)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		e->ctx = ctx;
		e->flags = Flags;
		e->refs = 1;
		e->next = all_events;
		all_events = e;
		*phEvent = e;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* Record on the legacy stream (lock held): it first waits for every
 * blocking stream of the context, so the event completes once each has
 * done what was queued on it by now (at once when all are idle). A legacy
 * operation running in another thread (they run in their callers) is
 * waited for here. */
static CUresult legacy_record(struct CUctx_st *ctx, struct CUevent_st *e)
{
	while (ctx->legacy_running)
		fake_wait();
	int n = 0;
	for (struct CUstream_st *s = all_streams; s; s = s->next)
		n += s->ctx == ctx && !s->nonblocking && stream_busy(s);
	struct legacy_mark *marks = NULL;
	if (n && !(marks = calloc((size_t)n, sizeof(*marks))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	int k = 0;
	for (struct CUstream_st *s = all_streams; s && k < n; s = s->next)
		if (s->ctx == ctx && !s->nonblocking && stream_busy(s))
			marks[k++] = (struct legacy_mark){ s->serial, s->submitted };
	free(e->marks);
	e->marks = marks;
	e->nmarks = n;
	e->mark_seq = ++e->recorded;
	event_settle(e);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent ev, CUstream h, bool pt)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s = NULL;
	CUresult r = event_valid(ev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (!r)
		r = fake_stream_lookup(h, pt, &ctx, &s);
	struct fake_op *op = NULL;
	if (!r && !(op = calloc(1, sizeof *op)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r && !s) {
		free(op);
		r = legacy_record(ctx, ev);
	} else if (!r) {
		op->kind = FAKE_OP_EVENT_RECORD;
		op->event = ev;
		/* captured: a node of the graph, the event itself is not recorded now */
		op->seq = s && s->capture ? 0 : ++ev->recorded;
		ev->refs++;
		fake_stream_submit(ctx, s, op, false);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	COUNT(cuEventRecord);
	return event_record(hEvent, hStream, false);
}

FAKE_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	COUNT(cuEventRecord_ptsz);
	return event_record(hEvent, hStream, true);
}

FAKE_API CUresult cuEventQuery(CUevent hEvent)
{
	COUNT(cuEventQuery);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	bool valid = event_valid(hEvent);
	if (valid)
		event_settle(hEvent);
	CUresult r = !valid ? CUDA_ERROR_INVALID_HANDLE
		     : hEvent->completed < hEvent->recorded ? CUDA_ERROR_NOT_READY
							     : CUDA_SUCCESS;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuEventSynchronize(CUevent hEvent)
{
	COUNT(cuEventSynchronize);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = event_valid(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (!r) {
		struct CUevent_st *e = hEvent;
		uint64_t target = e->recorded;
		e->refs++; /* keep it while waiting, even if destroyed meanwhile */
		for (event_settle(e); e->completed < target; event_settle(e))
			fake_wait();
		fake_pools_trim_at_sync(e->ctx->dev);
		event_unref(e);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

static CUresult event_destroy(CUevent ev)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = event_valid(ev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (!r) {
		ev->destroyed = true;
		event_unref(ev);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuEventDestroy(CUevent hEvent)
{
	COUNT(cuEventDestroy);
	return event_destroy(hEvent);
}

FAKE_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
	COUNT(cuEventDestroy_v2);
	return event_destroy(hEvent);
}

/* Documented: an event never recorded or created with
 * CU_EVENT_DISABLE_TIMING is CUDA_ERROR_INVALID_HANDLE; one recorded but not
 * yet completed is CUDA_ERROR_NOT_READY. The time is the host clock at which
 * each event's last record ran on its stream. */
static CUresult elapsed_time(float *ms, CUevent start, CUevent end)
{
	REQUIRE_INIT();
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_SUCCESS;
	if (event_valid(start) && event_valid(end)) {
		event_settle(start);
		event_settle(end);
	}
	if (!event_valid(start) || !event_valid(end) || !start->recorded || !end->recorded ||
	    ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING))
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (start->completed < start->recorded || end->completed < end->recorded)
		r = CUDA_ERROR_NOT_READY;
	else
		*ms = (float)((double)(end->completed_at.tv_sec - start->completed_at.tv_sec) * 1e3 +
			      (double)(end->completed_at.tv_nsec - start->completed_at.tv_nsec) / 1e6);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	COUNT(cuEventElapsedTime);
	return elapsed_time(pMilliseconds, hStart, hEnd);
}

FAKE_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	COUNT(cuEventElapsedTime_v2);
	return elapsed_time(pMilliseconds, hStart, hEnd);
}

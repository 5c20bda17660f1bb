/* log: see log.h. Owns the entry points, the policy's answers copied
 * once, the event rate limit, the sample schedule, the file's open lock,
 * the exit summary (written once, by the destructor or a fatal signal's
 * handler: one atomic exchange claims it) and alternate signal stacks.
 *
 * Hooks write their events at once, holding no lock: a queue for the
 * worker would lose the last events on a crash. Samples, NVML and the
 * Prometheus file are the worker's, under tick_lock, which no hook takes.
 * The exit path is async-signal-safe. */
#include "log/log.h"

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "log/file.h"
#include "log/metrics.h"
#include "log/records.h"
#include "driver/nvml.h"
#include "group/group.h"
#include "group/book.h"
#include "state/ledger.h"
#include "platform/export.h"
#include "platform/msg.h"
#include "platform/worker.h"
#include "config/policy.h"

static pthread_once_t snapshot_once = PTHREAD_ONCE_INIT;
static uint32_t interval_ms = CUMEMCAP_DEFAULT_LOG_INTERVAL_MS;
static enum cumemcap_log_target log_target = CUMEMCAP_LOG_OFF; /* a signal handler reads it */
static bool metrics_wanted;
static _Atomic uint64_t samples_written, events_dropped; /* dropped: over the rate */
static bool env_taken; /* the environment was read at start (before main) */

void cumemcap_log_take_env(bool policy_built)
{
	log_metrics_init();
	log_file_init(policy_built);
	env_taken = true;
}

static void snapshot(void)
{
	log_identity();
	if (!env_taken)
		cumemcap_log_take_env(true);
	const struct cumemcap_policy *p = cumemcap_policy();
	interval_ms = p->log_interval_ms ? p->log_interval_ms : CUMEMCAP_DEFAULT_LOG_INTERVAL_MS;
	metrics_wanted = p->metrics_path[0] != '\0';
	log_target = p->log;
}

void cumemcap_log_init(void)
{
	pthread_once(&snapshot_once, snapshot);
}

#define FATAL(sig) { .signo = sig, .name = #sig }
static const struct {
	int signo;
	const char *name;
} fatal[] = { FATAL(SIGSEGV), FATAL(SIGBUS),  FATAL(SIGFPE), FATAL(SIGILL),  FATAL(SIGABRT),
	      FATAL(SIGTERM), FATAL(SIGINT), FATAL(SIGHUP), FATAL(SIGQUIT) };
#undef FATAL
#define N_FATAL (sizeof(fatal) / sizeof(fatal[0]))
static struct sigaction previous[N_FATAL]; /* what fatal[i] did before ours */
static atomic_flag armed = ATOMIC_FLAG_INIT;

/* signo's row of `fatal`, or N_FATAL. */
static size_t slot_of(int signo)
{
	size_t i = 0;
	while (i < N_FATAL && fatal[i].signo != signo)
		i++;
	return i;
}

static _Atomic bool exit_claimed;

/* Claim the exit, write its summary (signo: the fatal signal, or 0). */
static void exit_once(int signo)
{
	if (!atomic_exchange(&exit_claimed, true)) {
		if (log_target == CUMEMCAP_LOG_STDERR) {
			log_stderr_summary();
		} else if (log_target == CUMEMCAP_LOG_FILE && atomic_load(&log_file_state) == OPEN) {
			static char buf[64 * 1024]; /* only the one claimant writes it */
			struct out o = OUT(buf);
			size_t i = slot_of(signo);
			log_exit_record(&o, signo, i < N_FATAL ? fatal[i].name : NULL, atomic_load(&samples_written),
					atomic_load(&events_dropped));
			log_emit(&o);
		}
		/* A finished process leaves no stale series behind. */
		if (atomic_exchange(&log_metrics_state, OFF) == OPEN)
			log_metrics_unlink();
	}
}

/* Over the default: write the summary, restore the default and raise the
 * signal again (the process ends as it would have); else the program's. */
static void on_fatal(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;
	size_t i = slot_of(sig); /* N_FATAL: the program installed this handler for another signal */
	const struct sigaction *old = &previous[i];
	if ((sig == SIGBUS && info && cumemcap_mapped_fault(info->si_addr)) || i == N_FATAL) {
		/* A group's book cut under its mapping (group/book.h): not the program's. */
	} else if (old->sa_handler == SIG_DFL) {
		exit_once(sig);
		sigaction(sig, old, NULL);
		raise(sig); /* blocked until we return */
	} else if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, info, uc);
	} else if (old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
	}
	errno = saved;
}

/* A stack overflow's SIGSEGV needs an alternate stack: each thread the
 * shim sees once armed gets one unless it has one; freed at thread exit. */
#define ALTSTACK_BYTES (64u * 1024)
_Atomic bool cumemcap_log_signals_armed;
CUMEMCAP_TLS bool cumemcap_log_thread_seen;
static pthread_key_t altstack_key;
static bool altstack_key_ok; /* written before the handlers are armed */

static size_t altstack_size(void)
{
	long min = sysconf(_SC_SIGSTKSZ);
	return min > 0 && (size_t)min * 4 > ALTSTACK_BYTES ? (size_t)min * 4 : ALTSTACK_BYTES;
}

/* Thread exit: drop the stack and its guard page if in place and idle. */
static void altstack_free(void *mem)
{
	long page = sysconf(_SC_PAGESIZE);
	stack_t cur;
	if (sigaltstack(NULL, &cur) == 0 && (char *)cur.ss_sp == (char *)mem + page) {
		if (cur.ss_flags & SS_ONSTACK)
			return;
		stack_t off = { .ss_flags = SS_DISABLE };
		sigaltstack(&off, NULL);
	}
	munmap(mem, altstack_size() + (size_t)page);
}

void cumemcap_log_thread_slow(void)
{
	cumemcap_log_thread_seen = true;
	int saved = errno;
	stack_t cur;
	if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
		goto out;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size = altstack_size();
	char *mem = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
			 -1, 0);
	if (mem == MAP_FAILED)
		goto out;
	mprotect(mem, page, PROT_NONE); /* an overflow of the handler faults, not corrupts */
	stack_t ss = { .ss_sp = mem + page, .ss_size = size, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL) != 0) {
		munmap(mem, size + page);
		goto out;
	}
	if (altstack_key_ok)
		pthread_setspecific(altstack_key, mem);
out:
	errno = saved;
}

/* At the first GPU use: a process that never uses CUDA is left alone, and
 * an interpreter's own handlers (CPython's SIGINT) are in by then. */
static void arm(size_t i)
{
	struct sigaction cur;
	struct sigaction act = { .sa_sigaction = on_fatal, .sa_flags = SA_SIGINFO | SA_ONSTACK };
	if (sigaction(fatal[i].signo, NULL, &cur) != 0 || cur.sa_handler == SIG_IGN ||
	    ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fatal))
		return;
	if (cur.sa_handler == SIG_DFL) {
		sigfillset(&act.sa_mask);
	} else {
		act.sa_mask = cur.sa_mask;
		act.sa_flags |= cur.sa_flags & (SA_RESTART | SA_NODEFER);
	}
	previous[i] = cur;
	sigaction(fatal[i].signo, &act, &previous[i]);
}

static void arm_signals(void)
{
	if (atomic_flag_test_and_set(&armed))
		return;
	for (size_t i = 0; i < N_FATAL; i++)
		arm(i);
	altstack_key_ok = pthread_key_create(&altstack_key, altstack_free) == 0;
	atomic_store_explicit(&cumemcap_log_signals_armed, true, memory_order_release);
	cumemcap_log_thread();
}

/* SIGBUS alone goes in at start: no interpreter installs one then. */
void cumemcap_log_arm_sigbus(void)
{
	arm(slot_of(SIGBUS));
}

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

#define EVENT_BUF 4096 /* an event record's: the head's names may grow sixfold escaped */

/* Create the file and write its start record, once. */
static void ensure_open(void)
{
	if (atomic_load_explicit(&log_file_state, memory_order_acquire) != CLOSED)
		return;
	int saved = errno;
	pthread_mutex_lock(&open_lock);
	if (atomic_load(&log_file_state) == CLOSED && log_file_create()) {
		static char buf[96 * 1024];
		struct out o = OUT(buf);
		char expanded[CUMEMCAP_PATH_MAX];
		const char *metrics = log_metrics_path();
		if (!metrics[0])
			metrics = metrics_wanted && log_expand(cumemcap_policy()->metrics_path, expanded, sizeof(expanded))
					  ? expanded
					  : NULL;
		log_start_record(&o, log_file_path, metrics, interval_ms);
		log_file_start(&o);
	}
	pthread_mutex_unlock(&open_lock);
	errno = saved;
}

/* At most this many event records a second, so that a program spinning
 * on refusals does not fill the disk; the rest are counted as dropped. */
#define EVENTS_PER_SECOND 1000u
static _Atomic uint64_t window_second;
static _Atomic uint32_t window_events;

/* Whether to write an event record (file open, exit unclaimed, rate ok). */
static bool file_logging(void)
{
	cumemcap_log_init();
	if (log_target != CUMEMCAP_LOG_FILE || atomic_load(&exit_claimed))
		return false;
	ensure_open();
	if (atomic_load_explicit(&log_file_state, memory_order_acquire) != OPEN)
		return false;
	uint64_t now = cumemcap_now_ms() / 1000 + 1, was = atomic_load(&window_second);
	if (was != now && atomic_compare_exchange_strong(&window_second, &was, now))
		atomic_store(&window_events, 0); /* approximate at the edge; fine */
	if (atomic_fetch_add(&window_events, 1) < EVENTS_PER_SECOND)
		return true;
	atomic_fetch_add(&events_dropped, 1);
	return false;
}

static bool begin_event(struct out *o, const char *type, int dev)
{
	if (!file_logging())
		return false;
	log_begin(o, type);
	log_put_gpu(o, dev, false);
	return true;
}

static void end_event(struct out *o, int dev)
{
	log_put_figures(o, dev);
	out_str(o, "}\n");
	log_emit(o);
}

void cumemcap_log_device(int dev)
{
	(void)dev;
	cumemcap_log_init();
	if (log_target == CUMEMCAP_LOG_OFF)
		return;
	if (metrics_wanted)
		log_metrics_claim(); /* its name, for the start record */
	if (log_target == CUMEMCAP_LOG_FILE) {
		log_probe_nvml(); /* before the file's lock, which the start record holds */
		ensure_open();
	}
	arm_signals();
}

void cumemcap_log_segment(int dev, bool taken, uint64_t bytes)
{
	char buf[EVENT_BUF];
	struct out o = OUT(buf);
	if (!begin_event(&o, "segment", dev))
		return;
	out_key_json(&o, "op", taken ? "take" : "release");
	out_key_u(&o, "bytes", bytes);
	end_event(&o, dev);
}

static void put_request(struct out *o, const char *door, uint64_t requested)
{
	out_key_u(o, "requested", requested);
	out_key(o, "door");
	out_quoted(o, door ? door : "", door ? strnlen(door, 96) : 0, SIZE_MAX, false);
}

static void refusal_or_oom(const char *type, int dev, const char *door, uint64_t requested)
{
	char buf[EVENT_BUF];
	struct out o = OUT(buf);
	if (!begin_event(&o, type, dev))
		return;
	uint64_t limit = cumemcap_ledger_get(dev, CUMEMCAP_FIG_limit);
	put_request(&o, door, requested);
	log_put_figures(&o, dev);
	out_key_u_or_null(&o, "limit", limit != CUMEMCAP_NO_LIMIT, limit);
	out_str(&o, "}\n");
	log_emit(&o);
}

void cumemcap_log_refusal(int dev, const char *door, uint64_t requested)
{
	cumemcap_log_init();
	if (log_target == CUMEMCAP_LOG_STDERR) {
		char want[32], lim[32], held[32], over[64] = "";
		uint64_t overhead = cumemcap_ledger_get(dev, CUMEMCAP_FIG_overhead);
		if (overhead) {
			char o[32];
			snprintf(over, sizeof(over), " (%s of it the driver's overhead)",
				 cumemcap_fmt_size(overhead, o, sizeof(o)));
		}
		/* The group's budget, when it is the one that said no. */
		uint64_t glimit = cumemcap_group_limit(dev), gused = cumemcap_group_used(dev);
		if (glimit != UINT64_MAX && gused != UINT64_MAX &&
		    (gused >= glimit || requested > glimit - gused)) {
			char gu[32], gl[32];
			cumemcap_msg("device %d: refused %s (%s) at the limit of group %s: its members hold %s of %s",
				     dev, cumemcap_fmt_size(requested, want, sizeof(want)), door, cumemcap_group_name(),
				     cumemcap_fmt_size(gused, gu, sizeof(gu)), cumemcap_fmt_size(glimit, gl, sizeof(gl)));
			return;
		}
		/* The footprint is what the limit counts, unless
		 * CUMEMCAP_COUNT=allocations (then reserved). */
		cumemcap_msg("device %d: refused %s (%s) at the limit: %s held%s of %s", dev,
			     cumemcap_fmt_size(requested, want, sizeof(want)), door,
			     cumemcap_fmt_size(cumemcap_ledger_get(dev, CUMEMCAP_FIG_footprint), held, sizeof(held)), over,
			     cumemcap_fmt_size(cumemcap_ledger_get(dev, CUMEMCAP_FIG_limit), lim, sizeof(lim)));
		return;
	}
	refusal_or_oom("refusal", dev, door, requested);
}

void cumemcap_log_wait(int dev, const char *door, uint64_t requested, uint64_t waited_ms, bool granted)
{
	cumemcap_log_init();
	if (log_target == CUMEMCAP_LOG_STDERR) {
		char want[32];
		cumemcap_msg("device %d: %s (%s) waited %llu ms for room at the limit: %s", dev,
			     cumemcap_fmt_size(requested, want, sizeof(want)), door, (unsigned long long)waited_ms,
			     granted ? "granted" : "refused at its deadline");
		return;
	}
	char buf[EVENT_BUF];
	struct out o = OUT(buf);
	if (!begin_event(&o, "wait", dev))
		return;
	put_request(&o, door, requested);
	out_key(&o, "waited");
	out_ms(&o, waited_ms);
	out_key_json(&o, "outcome", granted ? "granted" : "timeout");
	end_event(&o, dev);
}

void cumemcap_log_group_change(int dev, const unsigned char uuid[16], uint64_t time_ns, unsigned uid,
			       uint64_t old_limit, uint64_t new_limit)
{
	cumemcap_log_init();
	char id[48];
	cumemcap_nvml_format_uuid(uuid, "GPU-", id);
	if (log_target == CUMEMCAP_LOG_STDERR) {
		char was[32] = "none", now[32] = "none";
		if (old_limit != UINT64_MAX)
			cumemcap_fmt_size(old_limit, was, sizeof(was));
		if (new_limit != UINT64_MAX)
			cumemcap_fmt_size(new_limit, now, sizeof(now));
		cumemcap_msg("group %s: limit on %s changed from %s to %s by uid %u", cumemcap_group_name(), id,
			     was, now, uid);
		return;
	}
	if (!file_logging())
		return;
	char buf[EVENT_BUF];
	struct out o = OUT(buf);
	log_begin(&o, "group_change");
	out_key_json(&o, "group", cumemcap_group_name());
	out_key_u_or_null(&o, "gpu", dev >= 0, (uint64_t)dev);
	out_key_json(&o, "uuid", id);
	int index = log_gpu_index(dev);
	if (index >= 0)
		out_key_u(&o, "index", (uint64_t)index);
	out_key(&o, "changed_at");
	out_ms(&o, time_ns / 1000000u);
	out_key_u(&o, "by_uid", uid);
	out_key_u_or_null(&o, "old_limit", old_limit != UINT64_MAX, old_limit);
	out_key_u_or_null(&o, "new_limit", new_limit != UINT64_MAX, new_limit);
	if (dev >= 0)
		log_put_figures(&o, dev);
	out_str(&o, "}\n");
	log_emit(&o);
}

void cumemcap_log_driver_oom(int dev, const char *door, uint64_t requested)
{
	refusal_or_oom("driver_oom", dev, door, requested);
}

static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_due; /* CLOCK_MONOTONIC ms; 0: not scheduled */

uint32_t cumemcap_log_tick(uint64_t now_ms)
{
	cumemcap_log_init();
	bool log_on = log_target == CUMEMCAP_LOG_FILE && atomic_load(&log_file_state) == OPEN;
	bool metrics_on = metrics_wanted && atomic_load(&log_metrics_state) != OFF;
	if ((!log_on && !metrics_on) || atomic_load(&exit_claimed))
		return UINT32_MAX;
	pthread_mutex_lock(&tick_lock);
	if (!next_due)
		next_due = now_ms + interval_ms;
	bool due = now_ms >= next_due;
	if (due) /* the next after this one, or one interval from now if missed */
		next_due = next_due + interval_ms > now_ms ? next_due + interval_ms : now_ms + interval_ms;
	uint32_t wait = (uint32_t)(next_due - now_ms);
	pthread_mutex_unlock(&tick_lock);
	if (!due)
		return wait;
	/* NVML is asked with no lock of ours held: fork() takes tick_lock
	 * after other libraries' fork handlers took theirs, which NVML may take. */
	static struct gpu_figures f[CUMEMCAP_MAX_DEVICES]; /* only the worker ticks */
	int n = log_gather(f);
	pthread_mutex_lock(&tick_lock);
	if (log_on) {
		static char buf[48 * 1024];
		struct out o = OUT(buf);
		log_sample_record(&o, f, n, atomic_load(&events_dropped));
		if (!atomic_load(&exit_claimed)) {
			log_emit(&o);
			atomic_fetch_add(&samples_written, 1);
		}
	}
	if (metrics_on)
		log_write_metrics(f, n);
	pthread_mutex_unlock(&tick_lock);
	return wait;
}

void cumemcap_log_exit(void)
{
	int saved = errno;
	cumemcap_log_init();
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		cumemcap_ledger_read_growth(dev); /* unread pool growth (ledger.h) */
	/* A forked child opens its file only if it used the GPU. */
	if (log_target == CUMEMCAP_LOG_FILE && atomic_load(&log_file_state) == CLOSED && log_used_gpu())
		ensure_open();
	exit_once(0);
	errno = saved;
}

void cumemcap_log_say_where(void)
{
	const char *launched = getenv("CUMEMCAP_LAUNCHED");
	char *end;
	const struct cumemcap_policy *p = cumemcap_policy();
	/* Under secure execution the environment does not count. */
	if (p->secure || p->log != CUMEMCAP_LOG_FILE || !launched ||
	    strtol(launched, &end, 10) != (long)getpid() || *end)
		return;
	if (atomic_load(&log_file_state) == OPEN)
		cumemcap_msg("footprint log: %s (cumemcap report summarizes it)", log_file_path);
	else if (!log_used_gpu())
		cumemcap_msg("no footprint log: the program used no GPU");
}

/* Taken before the shim's other locks: no holder of those waits for
 * these. A tick in progress (an NVML query) delays fork(). */
void cumemcap_log_fork_prepare(void)
{
	pthread_mutex_lock(&open_lock);
	pthread_mutex_lock(&tick_lock);
	pthread_mutex_lock(&log_metrics_lock);
}

void cumemcap_log_fork_parent(void)
{
	pthread_mutex_unlock(&log_metrics_lock);
	pthread_mutex_unlock(&tick_lock);
	pthread_mutex_unlock(&open_lock);
}

void cumemcap_log_fork_child(void)
{
	cumemcap_log_fork_parent();
	log_metrics_fork_child();
	log_file_fork_child();
	log_identity();
	atomic_store(&exit_claimed, false);
	atomic_store(&samples_written, 0);
	atomic_store(&events_dropped, 0);
	next_due = 0;
}

void cumemcap_log_context(int dev, const char *event, uint64_t live, uint64_t held, uint64_t blocks)
{
	char buf[EVENT_BUF];
	struct out o = OUT(buf);
	if (!begin_event(&o, "context", dev))
		return;
	out_key_json(&o, "event", event);
	out_key_u(&o, "freed_live", live);
	out_key_u(&o, "freed_segments", held);
	out_key_u(&o, "blocks", blocks);
	end_event(&o, dev);
}

void cumemcap_log_overhead(int dev, const char *source, uint64_t per_context)
{
	char buf[EVENT_BUF];
	struct out o = OUT(buf);
	if (!begin_event(&o, "overhead", dev))
		return;
	out_key_json(&o, "source", source);
	out_key_u_or_null(&o, "per_context", strcmp(source, "nvml") != 0, per_context);
	end_event(&o, dev);
}

/* log/signals: see signals.h. Owns the table of fatal signals, the
 * handler that writes the exit summary and ends the process as the signal
 * would have, and one alternate stack per thread. Each slot's `previous`
 * is written before its handler goes in and only read after; a pthread
 * key frees a thread's stack when the thread ends. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log/file.h"
#include "log/metrics.h"
#include "log/records.h"
#include "log/signals.h"
#include "group/book.h"

/* One row per signal: its number and its name (for the exit record);
 * `previous` holds, at the same index, what each did before ours. */
#define FATAL(sig) { .signo = sig, .name = #sig }
static const struct {
	int signo;
	const char *name;
} fatal[] = { FATAL(SIGSEGV), FATAL(SIGBUS),  FATAL(SIGFPE), FATAL(SIGILL),  FATAL(SIGABRT),
	      FATAL(SIGTERM), FATAL(SIGINT), FATAL(SIGHUP), FATAL(SIGQUIT) };
#undef FATAL
#define N_FATAL (sizeof(fatal) / sizeof(fatal[0]))
static struct sigaction previous[N_FATAL];
static atomic_flag armed = ATOMIC_FLAG_INIT;

/* signo's row of `fatal`; N_FATAL for a signal not there. */
static size_t slot_of(int signo)
{
	size_t i = 0;
	while (i < N_FATAL && fatal[i].signo != signo)
		i++;
	return i;
}

_Atomic bool log_exit_claimed;

void log_exit_once(int signo)
{
	int saved = errno;
	if (!atomic_exchange(&log_exit_claimed, true)) {
		if (log_target == CUMEMCAP_LOG_STDERR) {
			log_stderr_summary();
		} else if (log_target == CUMEMCAP_LOG_FILE && atomic_load(&log_file_state) == OPEN) {
			static char buf[64 * 1024]; /* only the one claimant writes it */
			struct out o = OUT(buf);
			size_t i = slot_of(signo);
			log_exit_record(&o, signo, i < N_FATAL ? fatal[i].name : NULL);
			log_emit(&o);
		}
		/* A finished process leaves no stale series behind. */
		if (atomic_exchange(&log_metrics_state, OFF) == OPEN)
			log_metrics_unlink();
	}
	errno = saved;
}

/* A signal whose previous disposition was the default ends the process:
 * write the summary, put the default back and raise it again, so the
 * process ends as it would have (status, core dump). A handler the
 * program had installed is called instead: the program decides, and if
 * it exits, the destructor writes the summary. */
static void on_fatal(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;
	/* A group's book cut under its mapping by another member: the touch
	 * goes on in private memory, and the member leaves the group at its
	 * next look (group/book.h). Not the program's signal. */
	if (sig == SIGBUS && info && cumemcap_mapped_fault(info->si_addr)) {
		errno = saved;
		return;
	}
	size_t i = slot_of(sig);
	if (i == N_FATAL)
		return;
	const struct sigaction *old = &previous[i];
	if (old->sa_handler == SIG_DFL) {
		log_exit_once(sig);
		sigaction(sig, old, NULL);
		raise(sig); /* blocked until we return */
	} else if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, info, uc);
	} else if (old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
	}
	errno = saved;
}

/* Alternate signal stacks: a stack overflow raises SIGSEGV with no stack
 * left to run a handler on, so without one the exit record is lost. Each
 * thread the shim sees once the handlers are armed (the one that arms
 * them, and every thread that enters a hook) gets one, unless it has one
 * already (the program's, a runtime's or a sanitizer's stays). Freed when
 * the thread ends; the main thread's lives as long as the process. */
#define ALTSTACK_BYTES (64u * 1024)
_Atomic bool cumemcap_log_signals_armed;
CUMEMCAP_TLS bool cumemcap_log_thread_seen;
static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;
static bool altstack_key_ok;

static size_t altstack_size(void)
{
	long min = sysconf(_SC_SIGSTKSZ), page = sysconf(_SC_PAGESIZE);
	size_t size = ALTSTACK_BYTES;
	if (min > 0 && (size_t)min * 4 > size)
		size = (size_t)min * 4;
	return page > 0 ? (size + (size_t)page - 1) / (size_t)page * (size_t)page : size;
}

/* Thread exit: the stack is ours to drop only if it is still in place
 * and not in use; the guard page goes with it. */
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

static void altstack_make_key(void)
{
	altstack_key_ok = pthread_key_create(&altstack_key, altstack_free) == 0;
}

void cumemcap_log_thread_slow(void)
{
	if (cumemcap_log_thread_seen || !atomic_load_explicit(&cumemcap_log_signals_armed, memory_order_relaxed))
		return;
	cumemcap_log_thread_seen = true;
	int saved = errno;
	stack_t cur;
	if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
		goto out;
	pthread_once(&altstack_once, altstack_make_key);
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

/* Installed at the first GPU use, not in the constructor: a process that
 * never uses CUDA is left as it was, and an interpreter that installs its
 * own handlers only over the default (CPython's SIGINT ->
 * KeyboardInterrupt) has done so by then. An ignored signal stays
 * ignored. */
static void arm(size_t i)
{
	struct sigaction cur, act;
	if (sigaction(fatal[i].signo, NULL, &cur) != 0 || cur.sa_handler == SIG_IGN ||
	    ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fatal))
		return;
	memset(&act, 0, sizeof(act));
	act.sa_sigaction = on_fatal;
	act.sa_flags = SA_SIGINFO | SA_ONSTACK;
	if (cur.sa_handler == SIG_DFL) {
		sigfillset(&act.sa_mask);
	} else {
		act.sa_mask = cur.sa_mask;
		act.sa_flags |= cur.sa_flags & (SA_RESTART | SA_NODEFER);
	}
	previous[i] = cur;
	sigaction(fatal[i].signo, &act, &previous[i]);
}

void log_arm_signals(void)
{
	if (atomic_flag_test_and_set(&armed))
		return;
	for (size_t i = 0; i < N_FATAL; i++)
		arm(i);
	atomic_store(&cumemcap_log_signals_armed, true);
	cumemcap_log_thread_slow();
}

/* A group member maps its book in the constructor, before the other
 * handlers go in: SIGBUS alone goes in first (no interpreter installs
 * one at start), so that a book cut under the mapping never kills the
 * program. */
void cumemcap_log_arm_sigbus(void)
{
	arm(slot_of(SIGBUS));
}


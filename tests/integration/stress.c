/* stress: many threads allocate and free mixed sizes against a small limit.
 *
 * Every block is filled with its own byte through the driver and checked
 * in full before it is freed, so two blocks that overlapped would show.
 * A third of the frees happen on another thread than the allocating one
 * (through a shared mailbox). At the end nothing is held, by the shim's
 * books and by the fake driver's, and the driver never held more than the
 * limit. The seed is printed; STRESS_SEED=N repeats a run.
 *
 * Run with FAKECUDA_DEVICES=4GiB CUMEMCAP_LIMIT=24MiB. */
#include "common.h"

#include <pthread.h>
#include <time.h>

#define LIMIT (24 * MiB)
#define THREADS 8
#define ROUNDS 800
#define SLOTS 16

static struct api A;
static struct fake F;
static CUcontext ctx;
static unsigned long long seed;

struct block {
	CUdeviceptr ptr;
	size_t size;
	unsigned char fill;
};

static pthread_mutex_t mailbox_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block mailbox[THREADS * 4];
static size_t mailbox_n;
static uint64_t refused[THREADS];

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void verify_and_free(const struct block *b)
{
	static _Thread_local unsigned char buf[1 << 16];
	for (size_t off = 0; off < b->size; off += sizeof(buf)) {
		size_t n = b->size - off < sizeof(buf) ? b->size - off : sizeof(buf);
		OK(A.cuMemcpyDtoH(buf, b->ptr + off, n));
		for (size_t i = 0; i < n; i++) {
			if (buf[i] != b->fill) {
				fprintf(stderr, "seed %llu: block %#llx+%zu holds %#x, expected %#x: overlap\n",
					seed, (unsigned long long)b->ptr, off + i, buf[i], b->fill);
				exit(1);
			}
		}
	}
	OK(A.cuMemFree(b->ptr));
}

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t s = seed * 2654435761u + (uint64_t)id + 1;
	struct block mine[SLOTS];
	memset(mine, 0, sizeof(mine));
	OK(A.cuCtxSetCurrent(ctx));
	for (int round = 0; round < ROUNDS; round++) {
		int slot = (int)(next_rand(&s) % SLOTS);
		if (mine[slot].ptr) {
			/* Hand a third of the blocks to whoever passes next. */
			bool handed = false;
			if (next_rand(&s) % 3 == 0) {
				pthread_mutex_lock(&mailbox_lock);
				if (mailbox_n < sizeof(mailbox) / sizeof(mailbox[0])) {
					mailbox[mailbox_n++] = mine[slot];
					handed = true;
				}
				pthread_mutex_unlock(&mailbox_lock);
			}
			if (!handed)
				verify_and_free(&mine[slot]);
			mine[slot].ptr = 0;
			continue;
		}
		/* Free someone else's block now and then. */
		struct block other = { 0 };
		pthread_mutex_lock(&mailbox_lock);
		if (mailbox_n)
			other = mailbox[--mailbox_n];
		pthread_mutex_unlock(&mailbox_lock);
		if (other.ptr)
			verify_and_free(&other);

		static const size_t sizes[] = { 512, 4096, 65536, 256 << 10, 1 << 20, 2 << 20 };
		size_t size = sizes[next_rand(&s) % 6] + (next_rand(&s) % 8) * 512;
		CUdeviceptr p = 0;
		CUresult r = A.cuMemAlloc(&p, size);
		if (r == CUDA_ERROR_OUT_OF_MEMORY) {
			refused[id]++;
			continue;
		}
		OK(r);
		CHECK(p % 256 == 0);
		mine[slot] = (struct block){ p, size, (unsigned char)(next_rand(&s) | 1) };
		OK(A.cuMemsetD8(p, mine[slot].fill, size));
		CHECK(F.reserved(0) <= LIMIT);
	}
	for (int i = 0; i < SLOTS; i++)
		if (mine[i].ptr)
			verify_and_free(&mine[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *env = getenv("STRESS_SEED");
	seed = env ? strtoull(env, NULL, 10) : (unsigned long long)time(NULL);
	printf("stress: seed %llu (STRESS_SEED=%llu repeats this run)\n", seed, seed);
	fflush(stdout);
	load_api(argc, argv, &A, &F);
	ctx = use_primary(&A, 0);

	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (size_t i = 0; i < mailbox_n; i++)
		verify_and_free(&mailbox[i]);

	uint64_t total_refused = 0;
	for (int i = 0; i < THREADS; i++)
		total_refused += refused[i];
	struct cumemcap_stats st = shim_stats(0);
	printf("stress: %llu allocations, %llu refused at the limit, driver peak %.1f MiB of %llu MiB\n",
	       (unsigned long long)st.allocs, (unsigned long long)total_refused,
	       (double)F.peak_reserved(0) / MiB, LIMIT / MiB);
	CHECK(F.peak_reserved(0) <= LIMIT);
	CHECK(st.peak_reserved <= LIMIT);
	CHECK(total_refused > 0); /* the limit was really in play */
	CHECK(st.refusals == total_refused);
	CHECK(st.reserved == 0);
	CHECK(st.live == 0 && st.pooled == 0);
	CHECK(st.allocs == st.frees);
	CHECK(F.reserved(0) == 0);
	CHECK(F.live_allocations(0) == 0);
	return 0;
}

/* fuzz-book: the loader of a group's book (cumemcap_book_check in
 * src/group/book.c) and the readers that trust what it accepts, under
 * libFuzzer or fuzz-replay.
 *
 * A book is CUMEMCAP_BOOK_SIZE bytes (~2.4 MB), too big to be an input.
 * Once per process the harness makes a real one with cumemcap_book_open in
 * a temporary directory (group "fuzz", three GPUs, four limit changes, two
 * live members holding budget), copies its bytes and removes the file. The
 * input is a list of patches to that image, each record
 *
 *   region:u8 offset:u24le len:u8 bytes[len % 16 + 1]
 *
 * region % 6: 0 header (4096 bytes), 1 GPU table, 2 change ring, 3 the
 * slot area, 4 a slot's first 64 bytes (offset: slot index in its low 16
 * bits, the byte in its high 8), 5 no bytes: check a copy cut to `offset`
 * bytes too. The offset is taken modulo the region's size; a record cut
 * short by the input's end writes what it has. The patched image lies in
 * a heap block of exactly the book's size, so a read past it is one ASan
 * sees. What must hold (a violation is __builtin_trap()):
 *   - the check gives the same answer twice, for each kind, with and
 *     without a name; a refusal is one non-empty line, and cut short by a
 *     small buffer a prefix of the whole; a book accepted with its name is
 *     accepted without one; never for both kinds; a cut copy is refused;
 *   - once accepted, the readers that trust it stay inside the book and
 *     agree: cumemcap_book_used for every GPU is the sum of the `held` of
 *     slots below slots_used, every ready GPU's UUID formats to 40
 *     characters and looks itself up, every change entry the ring holds
 *     names a GPU whose entry can be read (as the group's worker does). */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "driver/nvml.h"
#include "group/book.h"

#define CHECK(cond)                       \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

#define NAME "fuzz"
#define MAX_PATCHES 256
#define SHORT_WHY 29

static unsigned char *pristine; /* the book as made, never patched */
static unsigned char *image;    /* the patched copy under test */

struct patch {
	size_t at, len;
};

/* Make a real book once and keep its bytes. */
static void make_pristine(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[512], path[1024], why[256];
	snprintf(dir, sizeof(dir), "%s/cumemcap-fuzz-book.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	CHECK(cumemcap_book_path(path, sizeof(path), dir, CUMEMCAP_BOOK_GROUP, NAME));
	struct cumemcap_book a, b;
	CHECK(cumemcap_book_open(&a, path, CUMEMCAP_BOOK_GROUP, NAME, CUMEMCAP_BOOK_USER, (gid_t)-1,
				 true, why, sizeof(why)));
	CHECK(cumemcap_book_open(&b, path, CUMEMCAP_BOOK_GROUP, NAME, CUMEMCAP_BOOK_USER, (gid_t)-1,
				 false, why, sizeof(why)));
	for (unsigned g = 0; g < 3; g++) {
		unsigned char uuid[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, (unsigned char)(g + 1) };
		char pci[32];
		snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + g);
		CHECK(cumemcap_book_gpu_find(&a, uuid, pci, 16ull << 30, CUMEMCAP_BOOK_NONE) == (int)g);
	}
	CHECK(cumemcap_book_set_limit(&a, -1, 8ull << 30, 1000) == 3);
	CHECK(cumemcap_book_set_limit(&a, 1, 4ull << 30, 1001) == 1);
	int sa = cumemcap_book_claim(&a, "train.py"), sb = cumemcap_book_claim(&b, "eval.py");
	CHECK(sa == 0 && sb == 1);
	atomic_store(&cumemcap_book_slot(&a, 0)->gpu[0].held, 1ull << 30);
	atomic_store(&cumemcap_book_slot(&a, 1)->gpu[0].held, 2ull << 30);
	atomic_store(&cumemcap_book_slot(&a, 1)->gpu[1].held, 3ull << 20);
	pristine = malloc(CUMEMCAP_BOOK_SIZE);
	image = malloc(CUMEMCAP_BOOK_SIZE);
	CHECK(pristine && image);
	memcpy(pristine, a.map, CUMEMCAP_BOOK_SIZE);
	memcpy(image, pristine, CUMEMCAP_BOOK_SIZE);
	cumemcap_book_close(&b);
	cumemcap_book_close(&a);
	CHECK(unlink(path) == 0 && rmdir(dir) == 0);
	CHECK(cumemcap_book_check(pristine, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, NAME, why, sizeof(why)));
}

static bool check(const void *data, size_t len, enum cumemcap_book_kind kind, const char *name)
{
	char why[512], short_why[SHORT_WHY];
	memset(why, 0x5a, sizeof(why));
	bool ok = cumemcap_book_check(data, len, kind, name, why, sizeof(why));
	memset(short_why, 0x5a, sizeof(short_why));
	CHECK(cumemcap_book_check(data, len, kind, name, short_why, sizeof(short_why)) == ok);
	if (!ok) {
		CHECK(memchr(why, '\0', sizeof(why)) != NULL);
		CHECK(why[0] != '\0' && strchr(why, '\n') == NULL);
		CHECK(memchr(short_why, '\0', sizeof(short_why)) != NULL);
		CHECK(strncmp(short_why, why, strlen(short_why)) == 0);
	}
	return ok;
}

/* The readers that trust an accepted book, on the heap image. */
static void read_book(void)
{
	struct cumemcap_book b = { .fd = -1, .map = image, .path = "" };
	const struct cumemcap_book_header *h = cumemcap_book_header(&b);
	CHECK(strlen(h->name) <= CUMEMCAP_BOOK_NAME_MAX);
	uint32_t used = atomic_load(&h->slots_used);
	CHECK(used <= CUMEMCAP_BOOK_SLOTS);

	uint64_t sum[CUMEMCAP_BOOK_GPUS] = { 0 };
	unsigned live = 0;
	for (unsigned i = 0; i < used; i++) {
		const struct cumemcap_book_slot *s = cumemcap_book_slot(&b, i);
		live += atomic_load(&s->state) == 1;
		CHECK(strnlen(s->program, sizeof(s->program)) <= sizeof(s->program));
		for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
			uint64_t v = atomic_load(&s->gpu[g].held);
			sum[g] = sum[g] + v < sum[g] ? UINT64_MAX : sum[g] + v;
		}
	}
	CHECK(live <= used);
	for (unsigned i = used; i < CUMEMCAP_BOOK_SLOTS; i++)
		CHECK(atomic_load(&cumemcap_book_slot(&b, i)->state) == 0);

	for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
		CHECK(cumemcap_book_used(&b, g) == sum[g]);
		const struct cumemcap_book_gpu *e = cumemcap_book_gpu(&b, g);
		uint32_t state = atomic_load(&e->state);
		CHECK(state <= 2);
		if (state != 2)
			continue;
		char text[48];
		cumemcap_nvml_format_uuid(e->uuid, "GPU-", text);
		CHECK(strlen(text) == 40 && strncmp(text, "GPU-", 4) == 0);
		CHECK(strlen(e->pci) < sizeof(e->pci));
		int found = cumemcap_book_gpu_lookup(&b, e->uuid);
		CHECK(found >= 0 && (unsigned)found <= g);
	}

	/* The change ring, newest first, as cumemcap_group_next_change reads
	 * each entry: the GPU it names is indexed in the table. */
	uint64_t last = atomic_load(&h->change_seq);
	for (uint64_t k = 0; k < CUMEMCAP_BOOK_CHANGES && k < last; k++) {
		uint64_t seq = last - k;
		const struct cumemcap_book_change *c = cumemcap_book_change(&b, seq);
		if (atomic_load(&c->seq) != seq)
			continue;
		CHECK(c->gpu >= -1 && c->gpu < CUMEMCAP_BOOK_GPUS);
		unsigned char uuid[16];
		char text[48];
		memcpy(uuid, cumemcap_book_gpu(&b, (unsigned)c->gpu)->uuid, 16);
		cumemcap_nvml_format_uuid(uuid, "GPU-", text);
		CHECK(strlen(text) == 40);
	}
	/* Every entry the ring holds is one of the last CHANGES. */
	for (unsigned i = 0; i < CUMEMCAP_BOOK_CHANGES; i++) {
		const struct cumemcap_book_change *c =
			(const struct cumemcap_book_change *)(image + CUMEMCAP_BOOK_CHANGE_OFF) + i;
		uint64_t seq = atomic_load(&c->seq);
		CHECK(seq == 0 || (seq % CUMEMCAP_BOOK_CHANGES == i && seq <= last));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!pristine)
		make_pristine();

	static const size_t region_at[] = { 0, CUMEMCAP_BOOK_GPU_OFF, CUMEMCAP_BOOK_CHANGE_OFF, CUMEMCAP_BOOK_SLOT_OFF };
	static const size_t region_len[] = {
		CUMEMCAP_BOOK_HEADER_BYTES,
		CUMEMCAP_BOOK_GPUS * sizeof(struct cumemcap_book_gpu),
		CUMEMCAP_BOOK_CHANGES * sizeof(struct cumemcap_book_change),
		CUMEMCAP_BOOK_SLOTS * sizeof(struct cumemcap_book_slot),
	};
	struct patch patches[MAX_PATCHES];
	size_t npatches = 0, cut = SIZE_MAX, pos = 0;
	while (pos + 5 <= size && npatches < MAX_PATCHES) {
		unsigned region = data[pos] % 6;
		size_t off = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8 | (size_t)data[pos + 3] << 16;
		size_t len = data[pos + 4] % 16u + 1;
		pos += 5;
		if (region == 5) {
			cut = off % CUMEMCAP_BOOK_SIZE;
			continue;
		}
		size_t at;
		if (region == 4) {
			at = CUMEMCAP_BOOK_SLOT_OFF + (off & 0xffff) % CUMEMCAP_BOOK_SLOTS * sizeof(struct cumemcap_book_slot) +
			     (off >> 16) % 64;
		} else {
			at = region_at[region] + off % region_len[region];
		}
		if (len > size - pos)
			len = size - pos;
		if (len > CUMEMCAP_BOOK_SIZE - at)
			len = CUMEMCAP_BOOK_SIZE - at;
		memcpy(image + at, data + pos, len);
		pos += len;
		patches[npatches++] = (struct patch){ at, len };
	}

	bool group_named = check(image, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, NAME);
	bool group_any = check(image, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, NULL);
	bool group_other = check(image, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, "another-group");
	const char *hname = ((const struct cumemcap_book_header *)image)->name;
	bool reg_any = check(image, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_REGISTRY, NULL);
	bool reg_named = check(image, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_REGISTRY, "0");
	CHECK(!group_named || group_any);
	CHECK(!group_other || group_any);
	CHECK(!reg_named || reg_any);
	CHECK(!(group_any && reg_any));
	if (group_named && group_other)
		__builtin_trap(); /* one name cannot be both */
	if (group_any && memchr(hname, '\0', CUMEMCAP_BOOK_NAME_MAX + 1))
		CHECK(group_named == (strcmp(hname, NAME) == 0));
	if (group_any || reg_any)
		read_book();

	if (cut != SIZE_MAX) {
		/* A copy of exactly `cut` bytes: any read past it is ASan's. */
		unsigned char *part = malloc(cut ? cut : 1);
		CHECK(part != NULL);
		memcpy(part, image, cut);
		CHECK(!check(part, cut, CUMEMCAP_BOOK_GROUP, NAME));
		CHECK(!check(part, cut, CUMEMCAP_BOOK_REGISTRY, NULL));
		free(part);
	}

	for (size_t i = 0; i < npatches; i++)
		memcpy(image + patches[i].at, pristine + patches[i].at, patches[i].len);
	return 0;
}

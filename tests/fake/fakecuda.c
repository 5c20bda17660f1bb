/* fakecuda: core of the fake CUDA driver (libcuda.so.1 for tests).
 *
 * Owns: FAKECUDA_* configuration (read once, lazily, abort() on a malformed
 * value), cuInit and fork behaviour, device memory accounting (other
 * tenants, allocations, and what the driver holds outside allocations:
 * contexts and driver-side growth, fakecuda_driver_grow and
 * FAKECUDA_DRIVER_GROW), error strings, the call counters and the
 * fakecuda_* record functions.
 *
 * Thread safety: all state is under fake_lock (see fake-internal.h);
 * counters are relaxed atomics. Fork: the
 * lock is taken around fork() (pthread_atfork) so the child gets it in a
 * usable state; a child forked after cuInit succeeded gets
 * CUDA_ERROR_NOT_INITIALIZED from every call, as from the real driver, since
 * the parent's stream workers do not exist there.
 */
#include "fake-internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fake_cond = PTHREAD_COND_INITIALIZER;
static struct fake_counts *_Atomic all_counts;
static pthread_key_t thread_key;
static pthread_once_t thread_once = PTHREAD_ONCE_INIT;
struct fake_config fake_cfg;

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
/* 0: cuInit not called (or failed), 1: initialized, 2: child forked after init */
static _Atomic int init_state;
static _Atomic uint64_t device_syncs;

void fake_wait(void) { pthread_cond_wait(&fake_cond, &fake_lock); }
void fake_broadcast(void) { pthread_cond_broadcast(&fake_cond); }

/* ---- configuration ---------------------------------------------------- */

static _Noreturn void bad_config(const char *var, const char *value, const char *accepted)
{
	fprintf(stderr, "fakecuda: bad %s=\"%s\": %s\n", var, value, accepted);
	abort();
}

static const char size_forms[] =
	"expected sizes like 16GiB, 512MiB, 1.5G, 8GB or plain bytes, comma separated, one per device";

/* Parse one size ("16GiB", "1.5G", "1000000"); allow_zero for OTHER_USED. */
static bool parse_size(const char *s, size_t len, bool allow_zero, uint64_t *out)
{
	char buf[64];
	if (len == 0 || len >= sizeof buf)
		return false;
	memcpy(buf, s, len);
	buf[len] = 0;
	const char *p = buf;
	uint64_t ip = 0;
	if (!isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p)) {
		if (ip > (UINT64_MAX - 9) / 10)
			return false;
		ip = ip * 10 + (uint64_t)(*p++ - '0');
	}
	double frac = 0, scale = 0.1;
	bool has_frac = false;
	if (*p == '.') {
		has_frac = true;
		p++;
		if (!isdigit((unsigned char)*p))
			return false;
		while (isdigit((unsigned char)*p)) {
			frac += (*p++ - '0') * scale;
			scale /= 10;
		}
	}
	static const struct { const char *u; uint64_t m; } units[] = {
		{"", 1}, {"b", 1},
		{"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
		{"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000000ull},
		{"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000000000ull},
		{"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000000000000ull},
	};
	char unit[8];
	size_t ul = strlen(p);
	if (ul >= sizeof unit)
		return false;
	for (size_t i = 0; i < sizeof unit; i++) /* the NUL too (ul < sizeof unit) */
		if ((unit[i] = (char)tolower((unsigned char)p[i])) == '\0')
			break;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcmp(unit, units[i].u) != 0)
			continue;
		if (has_frac && units[i].m == 1)
			return false; /* plain numbers are whole bytes */
		if (ip > UINT64_MAX / units[i].m)
			return false;
		uint64_t v = ip * units[i].m + (uint64_t)(frac * (double)units[i].m);
		if (v == 0 && !allow_zero)
			return false;
		*out = v;
		return true;
	}
	return false;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9') return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	return -1;
}

static bool parse_uuid(const char *s, size_t len, unsigned char out[16])
{
	/* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
	if (len != 40 || strncmp(s, "GPU-", 4) != 0)
		return false;
	const char *p = s + 4;
	int n = 0;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash) {
			if (p[i] != '-')
				return false;
			continue;
		}
		int hi = hexval((unsigned char)p[i]), lo = hexval((unsigned char)p[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[n++] = (unsigned char)(hi * 16 + lo);
		i++;
	}
	return n == 16;
}

static bool parse_hex(const char **p, const char *end, int maxdigits, unsigned *out)
{
	unsigned v = 0;
	int n = 0;
	while (*p < end && hexval((unsigned char)**p) >= 0 && n < maxdigits) {
		v = v * 16 + (unsigned)hexval((unsigned char)**p);
		(*p)++;
		n++;
	}
	if (n == 0)
		return false;
	*out = v;
	return true;
}

/* [domain:]bus:device.function, hex; function must be 0 for the fake. */
bool fake_parse_pci(const char *s, size_t len, unsigned *dom, unsigned *bus, unsigned *devn)
{
	const char *p = s, *end = s + len;
	unsigned a, b, c, f;
	if (!parse_hex(&p, end, 8, &a) || p >= end || *p++ != ':')
		return false;
	if (!parse_hex(&p, end, 2, &b) || p >= end)
		return false;
	if (*p == ':') {
		p++;
		if (!parse_hex(&p, end, 2, &c) || p >= end || *p++ != '.')
			return false;
	} else if (*p == '.') {
		p++;
		c = b;
		b = a;
		a = 0;
	} else {
		return false;
	}
	if (!parse_hex(&p, end, 1, &f) || p != end || f != 0 || b > 0xff || c > 0x1f)
		return false;
	*dom = a;
	*bus = b;
	*devn = c;
	return true;
}

/* Split a comma list; returns item count, or -1 if more than max. */
static int split(const char *s, const char **items, size_t *lens, int max)
{
	int n = 0;
	for (;;) {
		const char *c = strchr(s, ',');
		size_t l = c ? (size_t)(c - s) : strlen(s);
		if (n == max)
			return -1;
		items[n] = s;
		lens[n++] = l;
		if (!c)
			return n;
		s = c + 1;
	}
}

static bool parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* FAKECUDA_DRIVER_GROW: "SIZE@SECONDS", a size (not 0) and a delay of
 * 0..86400 seconds in decimal ("256MiB@0.5"). */
static void parse_grow(const char *v, struct fake_config *c)
{
	static const char forms[] = "expected SIZE@SECONDS, e.g. 256MiB@0.5 (size above 0, 0..86400 seconds)";
	const char *at = strchr(v, '@');
	if (!at || !parse_size(v, (size_t)(at - v), false, &c->grow_bytes))
		bad_config("FAKECUDA_DRIVER_GROW", v, forms);
	const char *t = at + 1;
	char *end;
	double sec = isdigit((unsigned char)*t) ? strtod(t, &end) : -1;
	if (sec < 0 || sec > 86400 || *end)
		bad_config("FAKECUDA_DRIVER_GROW", v, forms);
	c->grow_after_ns = (uint64_t)(sec * 1e9 + 0.5);
}

/* CUDA_VISIBLE_DEVICES, as the driver reads it: a comma-separated list of
 * device indices or UUIDs ("GPU-" and enough of the UUID to name one
 * device); the visible devices are those listed, in the list's order, up
 * to the first entry that names none (an index out of range, -1, a
 * prefix matching no device or several). NVML is not affected (the fake
 * NVML reads the physical list). */
static int visible_entry(const struct fake_config *c, const char *s, size_t len)
{
	if (len > 4 && strncmp(s, "GPU-", 4) == 0) {
		int found = -1;
		for (int d = 0; d < c->ndev; d++) {
			char id[48];
			const unsigned char *u = c->dev[d].uuid;
			snprintf(id, sizeof id, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
				 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
				 u[14], u[15]);
			if (len <= strlen(id) && strncasecmp(id, s, len) == 0) {
				if (found >= 0)
					return -1;
				found = d;
			}
		}
		return found;
	}
	unsigned long long u;
	char buf[24];
	if (len == 0 || len >= sizeof buf)
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (!parse_uint(buf, FAKE_MAX_DEVICES, &u) || (int)u >= c->ndev)
		return -1;
	return (int)u;
}

static void apply_visible_devices(struct fake_config *c)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	if (!v)
		return;
	static struct fake_config orig; /* once, before any thread of the fake */
	orig = *c;
	const struct fake_config *pc = &orig;
	int n = 0;
	for (const char *s = v; n < FAKE_MAX_DEVICES;) {
		while (*s == ' ')
			s++;
		size_t len = strcspn(s, ",");
		size_t trim = len;
		while (trim && s[trim - 1] == ' ')
			trim--;
		int d = visible_entry(pc, s, trim);
		if (d < 0)
			break;
		c->dev[n++] = orig.dev[d];
		if (!s[len])
			break;
		s += len + 1;
	}
	c->ndev = n;
}

static void config_load_once(void)
{
	const char *items[FAKE_MAX_DEVICES];
	size_t lens[FAKE_MAX_DEVICES];
	const char *v = getenv("FAKECUDA_DEVICES");
	struct fake_config *c = &fake_cfg;

	if (!v) {
		c->ndev = 1;
		c->dev[0].total = 16ull << 30;
	} else if (strcmp(v, "none") == 0) {
		c->ndev = 0;
	} else {
		int n = split(v, items, lens, FAKE_MAX_DEVICES);
		if (n < 1)
			bad_config("FAKECUDA_DEVICES", v, "at most 16 devices; \"none\" for zero");
		for (int i = 0; i < n; i++)
			if (!parse_size(items[i], lens[i], false, &c->dev[i].total))
				bad_config("FAKECUDA_DEVICES", v, size_forms);
		c->ndev = n;
	}
	for (int i = 0; i < c->ndev; i++) {
		static const unsigned char def[16] = {0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0};
		memcpy(c->dev[i].uuid, def, 16);
		c->dev[i].uuid[15] = (unsigned char)i;
		c->dev[i].pci_bus = 0x10u + (unsigned)i;
	}
	if ((v = getenv("FAKECUDA_UUIDS"))) {
		int n = split(v, items, lens, FAKE_MAX_DEVICES);
		if (n != c->ndev)
			bad_config("FAKECUDA_UUIDS", v, "expected one GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx per device");
		for (int i = 0; i < n; i++)
			if (!parse_uuid(items[i], lens[i], c->dev[i].uuid))
				bad_config("FAKECUDA_UUIDS", v, "expected GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex)");
	}
	if ((v = getenv("FAKECUDA_PCI"))) {
		int n = split(v, items, lens, FAKE_MAX_DEVICES);
		if (n != c->ndev)
			bad_config("FAKECUDA_PCI", v, "expected one PCI bus id (0000:3b:00.0) per device");
		for (int i = 0; i < n; i++)
			if (!fake_parse_pci(items[i], lens[i], &c->dev[i].pci_domain, &c->dev[i].pci_bus,
				       &c->dev[i].pci_device))
				bad_config("FAKECUDA_PCI", v, "expected [domain:]bus:device.0 in hex, e.g. 0000:3b:00.0");
	}
	if ((v = getenv("FAKECUDA_OTHER_USED"))) {
		int n = split(v, items, lens, FAKE_MAX_DEVICES);
		if (n != c->ndev)
			bad_config("FAKECUDA_OTHER_USED", v, "expected one size per device");
		for (int i = 0; i < n; i++)
			if (!parse_size(items[i], lens[i], true, &c->dev[i].other_used) ||
			    c->dev[i].other_used > c->dev[i].total)
				bad_config("FAKECUDA_OTHER_USED", v, "expected sizes (0 allowed), each at most the device's capacity");
	}
	apply_visible_devices(c);
	c->ctx_overhead = 0;
	if ((v = getenv("FAKECUDA_CTX_OVERHEAD")) &&
	    !parse_size(v, strlen(v), true, &c->ctx_overhead))
		bad_config("FAKECUDA_CTX_OVERHEAD", v, "expected one size (0 allowed), e.g. 300MiB");
	c->grow_bytes = c->grow_after_ns = 0;
	if ((v = getenv("FAKECUDA_DRIVER_GROW")))
		parse_grow(v, c);
	c->driver_version = 13000;
	unsigned long long u;
	if ((v = getenv("FAKECUDA_DRIVER_VERSION"))) {
		if (!parse_uint(v, INT_MAX, &u) || u < 2000)
			bad_config("FAKECUDA_DRIVER_VERSION", v, "expected an integer CUDA version >= 2000, e.g. 12040");
		c->driver_version = (int)u;
	}
	c->delay_us = 0;
	if ((v = getenv("FAKECUDA_STREAM_DELAY_US"))) {
		if (!parse_uint(v, 60000000, &u))
			bad_config("FAKECUDA_STREAM_DELAY_US", v, "expected microseconds, 0..60000000");
		c->delay_us = (unsigned)u;
	}
	c->free_delay_us = 0;
	if ((v = getenv("FAKECUDA_FREE_DELAY_US"))) {
		if (!parse_uint(v, 60000000, &u))
			bad_config("FAKECUDA_FREE_DELAY_US", v, "expected microseconds, 0..60000000");
		c->free_delay_us = (unsigned)u;
	}
}

static void atfork_prepare(void) { pthread_mutex_lock(&fake_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&fake_lock); }
static void atfork_child(void)
{
	/* The forking thread took fake_lock in atfork_prepare and is the
	 * child's only thread: it unlocks it. Re-initializing a locked mutex
	 * is undefined, and ThreadSanitizer (which does not treat
	 * pthread_mutex_init as an unlock) then saw the lock as still held by
	 * the parent's thread: "double lock of a mutex" and, with that mutex's
	 * happens-before lost, false data races under it. The condition
	 * variable is re-made: waiters of the parent's other threads may be
	 * recorded in it and would swallow wake-ups. */
	pthread_mutex_unlock(&fake_lock);
	pthread_cond_init(&fake_cond, NULL);
	if (atomic_load(&init_state) == 1)
		atomic_store(&init_state, 2);
}

void fake_config_load(void)
{
	pthread_once(&config_once, config_load_once);
}

__attribute__((constructor)) static void fake_ctor(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

CUresult fake_initialized(void)
{
	return atomic_load_explicit(&init_state, memory_order_acquire) == 1 ? CUDA_SUCCESS
									     : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult fake_check_dev(CUdevice dev)
{
	return dev >= 0 && dev < fake_cfg.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

void *fake_map(size_t len, bool low32)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (low32 ? MAP_32BIT : 0);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- accounting --------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Capacity less everything held on dev, driver-side memory as it is now. */
static uint64_t free_as_is(const struct fake_dev *d)
{
	uint64_t used = d->other_used + (uint64_t)d->nctx * fake_cfg.ctx_overhead + d->grown + d->reserved;
	return used >= d->total ? 0 : d->total - used;
}

uint64_t fake_dev_driver_held(int dev)
{
	struct fake_dev *d = &fake_cfg.dev[dev];
	/* FAKECUDA_DRIVER_GROW comes due: the driver takes it when the card
	 * has room (as a module load would succeed then), else at a later
	 * look. */
	if (d->nctx > 0 && fake_cfg.grow_bytes && !d->timed_done &&
	    now_ns() - d->ctx_since_ns >= fake_cfg.grow_after_ns && fake_cfg.grow_bytes <= free_as_is(d)) {
		d->grown += fake_cfg.grow_bytes;
		d->timed_done = true;
	}
	return (uint64_t)d->nctx * fake_cfg.ctx_overhead + d->grown;
}

void fake_dev_ctx_up(int dev)
{
	struct fake_dev *d = &fake_cfg.dev[dev];
	if (d->nctx++ == 0) {
		d->ctx_since_ns = now_ns();
		d->timed_done = false;
	}
}

void fake_dev_ctx_down(int dev)
{
	struct fake_dev *d = &fake_cfg.dev[dev];
	if (--d->nctx == 0)
		d->grown = 0; /* what the driver held there goes with the last context */
}

uint64_t fake_dev_free(int dev)
{
	fake_dev_driver_held(dev);
	return free_as_is(&fake_cfg.dev[dev]);
}

CUresult fake_dev_charge(int dev, uint64_t bytes)
{
	struct fake_dev *d = &fake_cfg.dev[dev];
	if (bytes > fake_dev_free(dev))
		return CUDA_ERROR_OUT_OF_MEMORY;
	d->reserved += bytes;
	if (d->reserved > d->peak)
		d->peak = d->reserved;
	return CUDA_SUCCESS;
}

void fake_dev_uncharge(int dev, uint64_t bytes)
{
	fake_cfg.dev[dev].reserved -= bytes;
}

void fake_count_device_sync(void)
{
	atomic_fetch_add(&device_syncs, 1);
}

/* ---- init, version, errors ------------------------------------------------ */

FAKE_API CUresult cuInit(unsigned int Flags)
{
	COUNT(cuInit);
	fake_config_load();
	if (atomic_load(&init_state) == 2)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_cfg.ndev == 0)
		return CUDA_ERROR_NO_DEVICE;
	int expected = 0;
	atomic_compare_exchange_strong(&init_state, &expected, 1);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int *driverVersion)
{
	COUNT(cuDriverGetVersion);
	fake_config_load();
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = fake_cfg.driver_version;
	return CUDA_SUCCESS;
}

static const struct { CUresult code; const char *name, *text; } errors[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

FAKE_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	COUNT(cuGetErrorString);
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == error) {
			*pStr = errors[i].text;
			return CUDA_SUCCESS;
		}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	COUNT(cuGetErrorName);
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == error) {
			*pStr = errors[i].name;
			return CUDA_SUCCESS;
		}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- the record (fakecuda.h) --------------------------------------------------------- */

FAKE_API uint64_t fakecuda_reserved(int dev)
{
	fake_config_load();
	if (fake_check_dev(dev))
		return 0;
	pthread_mutex_lock(&fake_lock);
	uint64_t v = fake_cfg.dev[dev].reserved;
	pthread_mutex_unlock(&fake_lock);
	return v;
}

FAKE_API uint64_t fakecuda_peak_reserved(int dev)
{
	fake_config_load();
	if (fake_check_dev(dev))
		return 0;
	pthread_mutex_lock(&fake_lock);
	uint64_t v = fake_cfg.dev[dev].peak;
	pthread_mutex_unlock(&fake_lock);
	return v;
}

FAKE_API void fakecuda_reset_peak(int dev)
{
	fake_config_load();
	if (fake_check_dev(dev))
		return;
	pthread_mutex_lock(&fake_lock);
	fake_cfg.dev[dev].peak = fake_cfg.dev[dev].reserved;
	pthread_mutex_unlock(&fake_lock);
}

FAKE_API int fakecuda_driver_grow(int dev, int64_t bytes)
{
	fake_config_load();
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	struct fake_dev *d = &fake_cfg.dev[dev];
	CUresult r = CUDA_SUCCESS;
	if (d->nctx == 0) {
		r = CUDA_ERROR_INVALID_CONTEXT; /* nothing of this process lives there */
	} else if (bytes >= 0) {
		if ((uint64_t)bytes > fake_dev_free(dev))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		else
			d->grown += (uint64_t)bytes;
	} else {
		uint64_t less = (uint64_t)(-(bytes + 1)) + 1; /* INT64_MIN too */
		d->grown = less >= d->grown ? 0 : d->grown - less;
	}
	pthread_mutex_unlock(&fake_lock);
	return (int)r;
}

FAKE_API uint64_t fakecuda_driver_held(int dev)
{
	fake_config_load();
	if (fake_check_dev(dev))
		return 0;
	pthread_mutex_lock(&fake_lock);
	uint64_t v = fake_dev_driver_held(dev);
	pthread_mutex_unlock(&fake_lock);
	return v;
}

FAKE_API uint64_t fakecuda_live_allocations(int dev)
{
	fake_config_load();
	if (fake_check_dev(dev))
		return 0;
	pthread_mutex_lock(&fake_lock);
	uint64_t v = fake_cfg.dev[dev].live;
	pthread_mutex_unlock(&fake_lock);
	return v;
}

static const char *const entry_names[FAKE_N_IDS] = {
#define FAKE_NAME_ROW(base, ver, sfx, fn) #fn,
	FAKE_ENTRY_POINTS(FAKE_NAME_ROW)
#undef FAKE_NAME_ROW
};

/* A thread exits: its block is free for the next thread (its counts stay). */
static void thread_release(void *value)
{
	struct fake_thread *t = value;
	atomic_store(&t->counts->taken, false);
	free(t);
}

static void thread_key_make(void)
{
	if (pthread_key_create(&thread_key, thread_release) != 0)
		abort();
}

static struct fake_counts *counts_take(void)
{
	struct fake_counts *c;
	for (c = atomic_load(&all_counts); c; c = c->next) {
		bool expected = false;
		if (!atomic_load_explicit(&c->taken, memory_order_relaxed) &&
		    atomic_compare_exchange_strong(&c->taken, &expected, true))
			return c;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	atomic_store(&c->taken, true);
	c->next = atomic_load(&all_counts);
	while (!atomic_compare_exchange_weak(&all_counts, &c->next, c))
		;
	return c;
}

struct fake_thread *fake_thread(void)
{
	pthread_once(&thread_once, thread_key_make);
	struct fake_thread *t = pthread_getspecific(thread_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		abort();
	t->counts = counts_take();
	t->capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
	if (pthread_setspecific(thread_key, t) != 0)
		abort();
	return t;
}

FAKE_API uint64_t fakecuda_thread_calls(const char *exported_name)
{
	if (!exported_name)
		return 0;
	pthread_once(&thread_once, thread_key_make);
	struct fake_thread *t = pthread_getspecific(thread_key);
	if (!t)
		return 0; /* this thread called nothing yet */
	struct fake_counts *c = t->counts;
	for (int i = 0; i < FAKE_N_IDS; i++)
		if (strcmp(entry_names[i], exported_name) == 0)
			return atomic_load(&c->n[i]);
	return 0;
}

FAKE_API uint64_t fakecuda_calls(const char *exported_name)
{
	if (!exported_name)
		return 0;
	for (int i = 0; i < FAKE_N_IDS; i++) {
		if (strcmp(entry_names[i], exported_name) != 0)
			continue;
		uint64_t n = 0;
		for (struct fake_counts *c = atomic_load(&all_counts); c; c = c->next)
			n += atomic_load(&c->n[i]);
		return n;
	}
	return 0;
}

FAKE_API uint64_t fakecuda_device_syncs(void)
{
	return atomic_load(&device_syncs);
}

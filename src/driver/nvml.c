/* nvml: see nvml.h. Entry points are found with libc's dlsym, not the shim's. */
#include "driver/nvml.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/driver.h"
#include "platform/xmutex.h"

#define NVML_ERROR_INSUFFICIENT_SIZE 7

/* ---- the real entry points ----------------------------------------------- */

static struct cumemcap_nvml_real real_fns; /* written before real_state = 1 */
static _Atomic int real_state;		   /* 0 untried, 1 ready, -1 missing, 2 resolving */

/* dlopen libnvidia-ml.so.1 into *out. It stays loaded, usable or not: what
 * the program's nvmlInit may have started is riskier to unload. */
static bool resolve(int extra, struct cumemcap_nvml_real *out)
{
	memset(out, 0, sizeof(*out));
	if (!cumemcap_driver_libc_ready())
		return false;
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL | extra);
	Dl_info info;
	if (lib) {
#define RESOLVE(field, name) *(void **)&out->field = cumemcap_real_dlsym(lib, name)
		RESOLVE(init_v2, "nvmlInit_v2");
		RESOLVE(handle_by_uuid, "nvmlDeviceGetHandleByUUID");
		RESOLVE(get_uuid, "nvmlDeviceGetUUID");
		RESOLVE(memory_info, "nvmlDeviceGetMemoryInfo");
		RESOLVE(memory_info_v2, "nvmlDeviceGetMemoryInfo_v2");
		RESOLVE(procs, "nvmlDeviceGetComputeRunningProcesses");
		RESOLVE(procs_v2, "nvmlDeviceGetComputeRunningProcesses_v2");
		RESOLVE(procs_v3, "nvmlDeviceGetComputeRunningProcesses_v3");
		RESOLVE(get_index, "nvmlDeviceGetIndex");
#undef RESOLVE
	}
	void *probe = out->init_v2 ? (void *)out->init_v2 : (void *)out->get_uuid;
	bool ok = probe && dladdr(probe, &info);
	if (ok)
		out->base = info.dli_fbase;
	else
		memset(out, 0, sizeof(*out));
	/* Leave no error in dlerror() for the program to read as its own. */
	(void)dlerror();
	return ok;
}

/* The real entry points, resolved once. RTLD_NOLOAD: only if NVML is
 * loaded already (a failure is then not remembered). */
static bool real_load(int extra, struct cumemcap_nvml_real *out)
{
	int s = atomic_load_explicit(&real_state, memory_order_acquire);
	if (s == 1) {
		*out = real_fns;
		return true;
	}
	if (s == -1 && !(extra & RTLD_NOLOAD)) {
		memset(out, 0, sizeof(*out));
		return false;
	}
	int expect = s;
	bool mine = s != 2 && atomic_compare_exchange_strong(&real_state, &expect, 2);
	bool ok = resolve(extra, out);
	if (mine) {
		if (ok)
			real_fns = *out;
		atomic_store_explicit(&real_state, ok ? 1 : (extra & RTLD_NOLOAD) ? s : -1,
				      memory_order_release);
	}
	return ok;
}

bool cumemcap_nvml_real(struct cumemcap_nvml_real *out)
{
	return real_load(0, out);
}

bool cumemcap_nvml_owns(const void *sym)
{
	struct cumemcap_nvml_real r;
	Dl_info info;
	return sym && real_load(RTLD_NOLOAD, &r) && dladdr(sym, &info) && info.dli_fbase == r.base;
}

/* ---- what the log asks: this process's figure per GPU --------------------- */

static struct cumemcap_xmutex lock = CUMEMCAP_XMUTEX_INIT(lock);
static enum { UNTRIED, READY, MISSING } state;
static struct cumemcap_nvml_real fns;
static cumemcap_nvml_procs_fn procs; /* the newest of fns' process lists */
static size_t proc_stride;	     /* sizeof the record procs fills */

/* Device handles by CUDA UUID, a GPU NVML does not know included. */
static struct {
	unsigned char uuid[16];
	bool known;
	nvmlDevice_t handle;
} handles[CUMEMCAP_MAX_DEVICES];
static int handles_used;

void cumemcap_nvml_format_uuid(const unsigned char uuid[16], const char *prefix, char out[48])
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (; prefix[n] && n < 4; n++)
		out[n] = prefix[n];
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[n++] = '-';
		out[n++] = hex[uuid[i] >> 4];
		out[n++] = hex[uuid[i] & 15];
	}
	out[n] = '\0';
}

static bool load(void)
{
	if (!cumemcap_nvml_real(&fns))
		return false;
	proc_stride = sizeof(struct cumemcap_nvml_process);
	procs = fns.procs_v3 ? fns.procs_v3 : fns.procs_v2;
	if (!procs) {
		procs = fns.procs;
		proc_stride = sizeof(struct cumemcap_nvml_process_v1);
	}
	return fns.init_v2 && fns.handle_by_uuid && procs && fns.init_v2() == CUMEMCAP_NVML_SUCCESS;
}

static bool handle_for(const unsigned char uuid[16], nvmlDevice_t *out)
{
	for (int i = 0; i < handles_used; i++) {
		if (memcmp(handles[i].uuid, uuid, 16) == 0) {
			*out = handles[i].handle;
			return handles[i].known;
		}
	}
	/* CUDA gives a MIG instance's UUID in the same 16 bytes. */
	char name[48];
	nvmlDevice_t h = NULL;
	cumemcap_nvml_format_uuid(uuid, "GPU-", name);
	bool known = fns.handle_by_uuid(name, &h) == CUMEMCAP_NVML_SUCCESS;
	if (!known) {
		cumemcap_nvml_format_uuid(uuid, "MIG-", name);
		known = fns.handle_by_uuid(name, &h) == CUMEMCAP_NVML_SUCCESS;
	}
	if (handles_used < CUMEMCAP_MAX_DEVICES) {
		memcpy(handles[handles_used].uuid, uuid, 16);
		handles[handles_used].handle = h;
		handles[handles_used++].known = known;
	}
	*out = h;
	return known;
}

/* Sum pid's usedGpuMemory over the device's compute processes. A figure
 * NVML cannot give (VALUE_NOT_AVAILABLE) is unknown, not zero. */
static enum cumemcap_nvml_answer process_used(nvmlDevice_t h, unsigned pid, uint64_t *bytes)
{
	unsigned char *buf = NULL;
	unsigned cap = 0, count = 64;
	nvmlReturn_t r = NVML_ERROR_INSUFFICIENT_SIZE;
	/* Grow (with a margin) while NVML lists more processes than room. */
	for (int attempt = 0; attempt < 4 && r == NVML_ERROR_INSUFFICIENT_SIZE && count > cap; attempt++) {
		unsigned char *bigger = realloc(buf, (size_t)(count + 16) * proc_stride);
		if (!bigger)
			break;
		buf = bigger;
		cap = count + 16;
		count = cap;
		r = procs(h, &count, buf);
	}
	bool found = false, unknown = r != CUMEMCAP_NVML_SUCCESS;
	uint64_t sum = 0;
	for (unsigned i = 0; !unknown && i < count && i < cap; i++) {
		struct cumemcap_nvml_process p; /* the v1 record is its prefix */
		memcpy(&p, buf + (size_t)i * proc_stride, proc_stride);
		if (p.pid != pid)
			continue;
		found = true;
		unknown = p.usedGpuMemory == CUMEMCAP_NVML_VALUE_NOT_AVAILABLE;
		sum += p.usedGpuMemory;
	}
	free(buf);
	if (unknown)
		return CUMEMCAP_NVML_UNKNOWN;
	if (!found)
		return CUMEMCAP_NVML_UNLISTED;
	*bytes = sum;
	return CUMEMCAP_NVML_LISTED;
}

/* Under the lock: whether NVML is ready and, given a uuid, its handle in *h. */
static bool ready(const unsigned char *uuid, nvmlDevice_t *h)
{
	if (state == UNTRIED)
		state = load() ? READY : MISSING;
	return state == READY && (!uuid || handle_for(uuid, h));
}

enum cumemcap_nvml_answer cumemcap_nvml_process(const unsigned char uuid[16], unsigned pid, uint64_t *bytes)
{
	nvmlDevice_t h;
	cumemcap_xmutex_lock(&lock);
	enum cumemcap_nvml_answer a =
	    ready(uuid, &h) ? process_used(h, pid, bytes) : CUMEMCAP_NVML_UNKNOWN;
	cumemcap_xmutex_unlock(&lock);
	return a;
}

bool cumemcap_nvml_device_used(const unsigned char uuid[16], uint64_t *used)
{
	nvmlDevice_t h;
	struct cumemcap_nvml_memory m;
	cumemcap_xmutex_lock(&lock);
	bool ok =
	    ready(uuid, &h) && fns.memory_info && fns.memory_info(h, &m) == CUMEMCAP_NVML_SUCCESS;
	cumemcap_xmutex_unlock(&lock);
	if (ok)
		*used = m.used;
	return ok;
}

bool cumemcap_nvml_index(const unsigned char uuid[16], unsigned *index)
{
	nvmlDevice_t h;
	cumemcap_xmutex_lock(&lock);
	bool ok = ready(uuid, &h) && fns.get_index && fns.get_index(h, index) == CUMEMCAP_NVML_SUCCESS;
	cumemcap_xmutex_unlock(&lock);
	return ok;
}

bool cumemcap_nvml_available(void)
{
	cumemcap_xmutex_lock(&lock);
	bool ok = ready(NULL, NULL);
	cumemcap_xmutex_unlock(&lock);
	return ok;
}

void cumemcap_nvml_fork_child(void)
{
	cumemcap_xmutex_fork_child(&lock);
}

bool cumemcap_nvml_host_pids(void)
{
	/* The initial PID namespace's inode (PROC_PID_INIT_INO, fixed). */
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 && st.st_ino == 0xEFFFFFFCu;
}

/* arena: see arena.h. (Being written: pooling is not in place yet.) */
#include "arena.h"

bool cumemcap_arena_alloc(CUdeviceptr *dptr, uint64_t bytes, const char *door, CUresult *r)
{
	(void)dptr; (void)bytes; (void)door; (void)r;
	return false;
}
bool cumemcap_arena_free(CUdeviceptr ptr, CUresult *r) { (void)ptr; (void)r; return false; }
enum cumemcap_arena_where cumemcap_arena_lookup(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size)
{
	(void)ptr; (void)base; (void)size;
	return CUMEMCAP_ARENA_NOT_OURS;
}
uint64_t cumemcap_arena_cached(int dev) { (void)dev; return 0; }
void cumemcap_arena_forget_ctx(CUcontext ctx) { (void)ctx; }
uint32_t cumemcap_arena_tick(uint64_t now_ms) { (void)now_ms; return UINT32_MAX; }
void cumemcap_arena_lock_all(void) {}
void cumemcap_arena_unlock_all(void) {}
void cumemcap_arena_fork_child(void) {}

/* log: see log.h. Not built yet: only the stderr lines of CUMEMCAP_LOG=stderr
 * exist (in account.c and shim.c). */
#include "log.h"

void cumemcap_log_init(void) {}
void cumemcap_log_device(int dev) { (void)dev; }
void cumemcap_log_segment(int dev, bool taken, uint64_t bytes) { (void)dev; (void)taken; (void)bytes; }
void cumemcap_log_refusal(int dev, const char *door, uint64_t requested) { (void)dev; (void)door; (void)requested; }
void cumemcap_log_driver_oom(int dev, const char *door, uint64_t requested) { (void)dev; (void)door; (void)requested; }
uint32_t cumemcap_log_tick(uint64_t now_ms) { (void)now_ms; return UINT32_MAX; }
void cumemcap_log_exit(int signo) { (void)signo; }
void cumemcap_log_fork_child(void) {}

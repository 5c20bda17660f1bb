/* hooks-nvml: the shim's NVML entry points, by name, for dlsym (lookup.c).
 *
 * Thread safety: an immutable table, read without locks (and without libc
 * calls: lookup.c asks it on every dlsym of a name starting with "nvml"). */
#pragma once

#include "driver/driver.h"

/* The shim's hook for the NVML function `name`, or NULL when the shim does
 * not hook that name. */
CUMEMCAP_DLSYM_SAFE void *cumemcap_nvml_hook(const char *name);

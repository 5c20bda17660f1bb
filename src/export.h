/* export: the one attribute that makes a symbol public. The library is
 * built with -fvisibility=hidden; only driver hooks, dlsym/dlvsym and the
 * API of include/cumemcap.h carry this. */
#pragma once

#define CUMEMCAP_EXPORT __attribute__((visibility("default")))

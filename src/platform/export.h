/* export: the one attribute that makes a symbol public. The library is
 * built with -fvisibility=hidden; only driver hooks, dlsym/dlvsym and the
 * API of include/cumemcap.h carry this. No state: thread-safe. */
#pragma once

#define CUMEMCAP_EXPORT __attribute__((visibility("default")))

/* Thread-local caches on the allocation path. The library is preloaded
 * (or linked), so its few bytes of TLS fit the static block and can be
 * read without a __tls_get_addr call each time. A late dlopen of the
 * library still works while glibc's static TLS surplus has room. */
#define CUMEMCAP_TLS _Thread_local __attribute__((tls_model("initial-exec")))

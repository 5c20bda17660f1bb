/* export: the attribute that makes a symbol public (the library is built
 * with -fvisibility=hidden). No state: thread-safe. */
#pragma once

#define CUMEMCAP_EXPORT __attribute__((visibility("default")))

/* Thread-local caches on the allocation path, read without __tls_get_addr
 * (a late dlopen works while glibc's static TLS surplus has room). */
#define CUMEMCAP_TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* setup: the first hook's setup (setup.c), as the library constructor
 * sees it. Thread safety: cumemcap_setup_defer_start is called by the
 * constructor, before any hook can run. */
#pragma once

#include <stdbool.h>

/* The constructor leaves the rest of its start to the first hook, which
 * runs `start` once, before it opens the driver. False when a hook came
 * first (another library's constructor used CUDA before this one ran):
 * the constructor then runs `start` itself, as it would have. */
bool cumemcap_setup_defer_start(void (*start)(void));

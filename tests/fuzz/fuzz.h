/* fuzz.h: the libFuzzer entry point, shared by fuzz-config.c and the replay
 * program (replay-main.c), which calls it without libFuzzer. */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

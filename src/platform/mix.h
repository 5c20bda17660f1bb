/* mix: the hash mixers of the shim's open-addressing tables (MurmurHash3's
 * 64-bit finalizer and its first half). Pure functions, so thread-safe. */
#pragma once

#include <stdint.h>

/* Two steps: enough for addresses and handles differing in middle bits. */
static inline uint64_t cumemcap_mix_short(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* The whole finalizer: every input bit reaches every output bit. */
static inline uint64_t cumemcap_mix(uint64_t x)
{
	x = cumemcap_mix_short(x);
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* parse: pure value parsers: sizes, shares, GPU selectors and lists, durations,
 * path templates. No I/O, no globals, no allocation: reentrant and
 * thread-safe. A parser that returns false leaves *out untouched. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A limit as the user wrote it: bytes, or a share of the GPU. */
enum cumemcap_amount_kind {
	CUMEMCAP_AMOUNT_NONE = 0, /* none given */
	CUMEMCAP_AMOUNT_BYTES,    /* .bytes is the limit */
	CUMEMCAP_AMOUNT_PERCENT,  /* .permille of the GPU's total memory */
};

struct cumemcap_amount {
	enum cumemcap_amount_kind kind;
	uint64_t bytes;    /* CUMEMCAP_AMOUNT_BYTES: > 0 */
	uint32_t permille; /* CUMEMCAP_AMOUNT_PERCENT: 1..100000, i.e. 0.001%..100% in 0.001% steps */
};

/* A size: bytes ("1073741824"), or a decimal number with a unit K/M/G/T/P
 * or KiB..PiB (powers of 1024), KB..PB (powers of 1000) or B, any case, no
 * blank ("1.5GiB", truncated to whole bytes); or a percentage in (0, 100]
 * with at most three decimals ("12.5%"). Not zero, nor a fraction of bytes,
 * nor above UINT64_MAX; cumemcap_amount_forms says so in a message. */
bool cumemcap_parse_amount(const char *text, struct cumemcap_amount *out);
extern const char cumemcap_amount_forms[];

/* A GPU selector, as in CUMEMCAP_DEVICE_LIMITS and [device SELECTOR]. */
enum cumemcap_selector_kind {
	CUMEMCAP_SEL_ORDINAL = 1, /* "0", "3": CUdevice ordinal as the process sees it */
	CUMEMCAP_SEL_UUID,        /* "GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f" */
	CUMEMCAP_SEL_PCI,         /* "0000:3b:00.0", "00000000:3B:00.0", "3b:00.0" */
};

struct cumemcap_selector {
	enum cumemcap_selector_kind kind;
	uint32_t ordinal;      /* SEL_ORDINAL: 0..1023 */
	unsigned char uuid[16]; /* SEL_UUID: the 16 bytes, as cuDeviceGetUuid gives them */
	uint32_t pci_domain;   /* SEL_PCI: domain (0 when omitted), bus, device, function */
	uint32_t pci_bus;
	uint32_t pci_device;
	uint32_t pci_function;
};

/* One selector: an ordinal, "GPU-" and 8-4-4-4-12 hex digits (any case), or
 * [DOMAIN:]BUS:DEVICE.FUNCTION in hex with 1..8, 1..2, 1..2 (<= 0x1f) and 1
 * (<= 7) digits; cumemcap_selector_forms says so in a message. */
bool cumemcap_parse_selector(const char *text, size_t len, struct cumemcap_selector *out);
extern const char cumemcap_selector_forms[];

/* Whether a selector names this GPU (pci_bus_id as cuDeviceGetPCIBusId gives it). */
bool cumemcap_selector_matches(const struct cumemcap_selector *sel, int ordinal,
			       const unsigned char uuid[16], const char *pci_bus_id);

/* Whether two selectors cumemcap_parse_selector made are of one kind and one value. */
bool cumemcap_selector_equal(const struct cumemcap_selector *a, const struct cumemcap_selector *b);

/* Format a selector back to text ("1", "GPU-...", "0000:3b:00.0"). */
void cumemcap_selector_format(const struct cumemcap_selector *sel, char *buf, size_t len);

#define CUMEMCAP_MAX_DEVICE_RULES 64

struct cumemcap_device_rule {
	struct cumemcap_selector selector;
	struct cumemcap_amount amount;
};

struct cumemcap_device_rules {
	size_t count;
	struct cumemcap_device_rule rule[CUMEMCAP_MAX_DEVICE_RULES];
};

/* "SEL=SIZE[,SEL=SIZE...]", e.g. "0=4GiB,GPU-<uuid>=12GiB,0000:3b:00.0=50%".
 * An empty entry, a missing '=', a bad selector or size, one GPU twice or
 * more than CUMEMCAP_MAX_DEVICE_RULES entries fail: err (may be NULL) gets
 * `entry 2 "foo=4GiB": "foo" is not a GPU selector; accepted: ...`. */
bool cumemcap_parse_device_rules(const char *text, struct cumemcap_device_rules *out,
				 char *err, size_t errlen);

/* The bytes an amount (BYTES or PERCENT) sets on a GPU of `total` bytes: a
 * share rounded down (but at least 1 byte), never above `total`. */
uint64_t cumemcap_amount_bytes(const struct cumemcap_amount *a, uint64_t total);

/* Seconds with at most three decimals ("30", "0.5", "2.125") into
 * milliseconds, accepted when min_ms <= value <= max_ms. */
bool cumemcap_parse_seconds(const char *text, uint32_t min_ms, uint32_t max_ms, uint32_t *out_ms);

/* A path template: 1 to max - 1 bytes, no control characters, '%' only in
 * %p (pid), %h (host), %n (program), %u (uid), %%; else why, to follow the value, in err. */
bool cumemcap_parse_template(const char *text, size_t max, char *err, size_t errlen);

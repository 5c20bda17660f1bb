/* fake-extra: helpers shared by the fake's newer files. Kept apart from
 * fake-internal.h so the two can change independently. Locking as in
 * fake-internal.h: everything under fake_lock unless said otherwise.
 */
#pragma once

#include "fake-internal.h"

/* The value of attribute a of device dev (fake-attr.c; no lock needed:
 * the answers depend only on the configuration). CUDA_ERROR_INVALID_VALUE
 * for an attribute outside 1 .. CU_DEVICE_ATTRIBUTE_MAX-1. dev must be a
 * valid ordinal. */
CUresult fake_device_attribute(int dev, CUdevice_attribute a, int *out);

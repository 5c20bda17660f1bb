/* fake-extra: helpers shared by the fake's newer files (attributes, misc
 * entry points, 2D/3D copies, modules, capture). Kept apart from
 * fake-internal.h so the two can change independently. Locking as in
 * fake-internal.h: everything under fake_lock unless said otherwise.
 */
#pragma once

#include "fake-internal.h"

#include <cudaGL.h>      /* GL/gl.h: gl-stub/ on the fake's include path */
#include <cudaProfiler.h>

/* The value of attribute a of device dev (fake-attr.c; no lock needed:
 * the answers depend only on the configuration). CUDA_ERROR_INVALID_VALUE
 * for an attribute outside 1 .. CU_DEVICE_ATTRIBUTE_MAX-1. dev must be a
 * valid ordinal. */
CUresult fake_device_attribute(int dev, CUdevice_attribute a, int *out);

/* Pinned (page-locked) host memory from cuMemHostRegister (fake-misc.c):
 * true when [p, p+n) lies in one registered range (lock held). */
bool fake_host_registered(uintptr_t p, size_t n);

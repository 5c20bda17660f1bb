/* gres: the shard counts of a node's GPUs, read from Slurm's gres.conf, and
 * a job's share of a GPU. Used by the SPANK plugin (cumemcap-spank.c).
 *
 * Pure functions on memory the caller owns: no globals, so they are
 * thread-safe; cumemcap_gres_read only reads the FILE it is given. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CUMEMCAP_GRES_MAX      64  /* devices kept per kind */
#define CUMEMCAP_GRES_PATH_LEN 256 /* a device file, as gres.conf names it */

struct cumemcap_gres {
	size_t gpus; /* the node's gpu files, in gres.conf's order */
	char gpu[CUMEMCAP_GRES_MAX][CUMEMCAP_GRES_PATH_LEN];
	size_t shard_files; /* the node's shard files and each one's count */
	char shard_file[CUMEMCAP_GRES_MAX][CUMEMCAP_GRES_PATH_LEN];
	unsigned shards[CUMEMCAP_GRES_MAX];
};

/* Read the Name=gpu and Name=shard lines of gres.conf that apply to `node`:
 * lines without NodeName=, and lines whose NodeName= is a comma-separated
 * list of names that holds `node` (a host range such as gpu[01-04] is not
 * expanded: such a line is skipped). Keys are case-insensitive, '#' starts
 * a comment. File=/dev/nvidia[0-3,5] is expanded, and a shard line's Count
 * is divided evenly among its files. Lines of other kinds are ignored. */
void cumemcap_gres_read(FILE *f, const char *node, struct cumemcap_gres *out);

/* The shard count of the node's GPU `index` (Slurm's number for it, as in
 * CUDA_VISIBLE_DEVICES): GPU i is the i-th gpu file (or, with no gpu
 * lines, the i-th shard file), and its count is its shard line's. 0 when
 * gres.conf gives none. */
unsigned cumemcap_gres_shards(const struct cumemcap_gres *g, unsigned long index);

/* A job's share of a GPU for `shards` of its `count` shards, in thousandths
 * of a percent (the shim's finest step): rounded down so that it is never
 * more than the shards, at least 1, at most 100000 (the whole GPU). */
uint32_t cumemcap_gres_share(unsigned long shards, unsigned count);

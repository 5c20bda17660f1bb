/* Unit tests for src/tools/slurm/gres.c: which shard count gres.conf gives
 * each GPU of a node, and a job's share of a GPU. Tables end in a sentinel
 * row (conf == NULL or count == 0). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/slurm/gres.h"
#include "test-common.h"

/* The shard counts of GPUs 0..3 of `node` under `conf`. */
static void counts(const char *conf, const char *node, unsigned out[4])
{
	static struct cumemcap_gres g;
	FILE *f = fmemopen((void *)conf, strlen(conf), "r");
	ck_assert_ptr_nonnull(f);
	cumemcap_gres_read(f, node, &g);
	fclose(f);
	for (unsigned long i = 0; i < 4; i++)
		out[i] = cumemcap_gres_shards(&g, i);
}

static const struct {
	const char *what;
	const char *conf;
	unsigned want[4]; /* GPUs 0..3 of node0; 0: no count */
} conf_rows[] = {
    {"the test cluster's",
     "AutoDetect=off\nName=gpu File=/dev/nvidia0\nName=shard Count=8 File=/dev/nvidia0\n",
     {8, 0, 0, 0}},
    {"a count per GPU",
     "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n"
     "Name=shard Count=8 File=/dev/nvidia0\nName=shard Count=4 File=/dev/nvidia1\n",
     {8, 4, 0, 0}},
    {"shard lines in another order than the gpu lines",
     "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n"
     "Name=shard Count=4 File=/dev/nvidia1\nName=shard Count=8 File=/dev/nvidia0\n",
     {8, 4, 0, 0}},
    {"a range, a count shared evenly",
     "Name=gpu File=/dev/nvidia[0-3]\nName=shard Count=16 File=/dev/nvidia[0-3]\n",
     {4, 4, 4, 4}},
    {"a list in the range",
     "Name=gpu File=/dev/nvidia[0,2-3]\nName=shard Count=6 File=/dev/nvidia[0,2-3]\n",
     {2, 2, 2, 0}},
    {"no gpu lines: the shard files in order",
     "Name=shard Count=8 File=/dev/nvidia0\nName=shard Count=2 File=/dev/nvidia1\n",
     {8, 2, 0, 0}},
    {"a GPU beyond the gpu lines has no count",
     "Name=gpu File=/dev/nvidia0\nName=shard Count=8 File=/dev/nvidia0\nName=shard Count=4 "
     "File=/dev/nvidia1\n",
     {8, 0, 0, 0}},
    {"another node's lines are not ours",
     "NodeName=node1 Name=gpu File=/dev/nvidia0\nNodeName=node1 Name=shard Count=8 "
     "File=/dev/nvidia0\n",
     {0, 0, 0, 0}},
    {"a list of names that holds ours",
     "NodeName=node1,node0 Name=gpu File=/dev/nvidia0\nNodeName=node1,node0 Name=shard Count=8 "
     "File=/dev/nvidia0\n",
     {8, 0, 0, 0}},
    {"a host range is not expanded",
     "NodeName=node[0-1] Name=gpu File=/dev/nvidia0\nNodeName=node[0-1] Name=shard Count=8 "
     "File=/dev/nvidia0\n",
     {0, 0, 0, 0}},
    {"keys in any case, comments, blanks",
     "# shards\n\n  name=GPU   file=/dev/nvidia0 # the card\n\tNAME=Shard COUNT=8 "
     "FILE=/dev/nvidia0\n",
     {8, 0, 0, 0}},
    {"a shard line without a count",
     "Name=gpu File=/dev/nvidia0\nName=shard File=/dev/nvidia0\n",
     {0, 0, 0, 0}},
    {"mps and other kinds are not shards",
     "Name=gpu File=/dev/nvidia0\nName=mps Count=100 File=/dev/nvidia0\n",
     {0, 0, 0, 0}},
    {NULL, NULL, {0}},
};

START_TEST(slurm_gres_counts)
{
	for (int i = 0; conf_rows[i].conf; i++) {
		unsigned got[4];
		counts(conf_rows[i].conf, "node0", got);
		for (int k = 0; k < 4; k++)
			ck_assert_msg(got[k] == conf_rows[i].want[k],
				      "%s: GPU %d has %u shards, expected %u", conf_rows[i].what, k,
				      got[k], conf_rows[i].want[k]);
	}
}
END_TEST

static const struct {
	unsigned long shards;
	unsigned count;
	uint32_t want; /* thousandths of a percent */
} share_rows[] = {
    {2, 8, 25000},   {3, 8, 37500},
    {8, 8, 100000},  {1, 3, 33333}, /* rounded down: never more than the shards */
    {16, 8, 100000},		    /* never more than the GPU */
    {1, 1000000, 1},		    /* never nothing */
    {0, 0, 0},
};

START_TEST(slurm_gres_share)
{
	for (int i = 0; share_rows[i].count; i++)
		ck_assert_msg(cumemcap_gres_share(share_rows[i].shards, share_rows[i].count) ==
				  share_rows[i].want,
			      "%lu of %u shards: %u, expected %u", share_rows[i].shards,
			      share_rows[i].count,
			      cumemcap_gres_share(share_rows[i].shards, share_rows[i].count),
			      share_rows[i].want);
	ck_assert_uint_eq(cumemcap_gres_share(2, 0), 0);
}
END_TEST

TEST_SUITE(slurm_gres)
{
	Suite *s = suite_create("slurm_gres");
	ADD_TEST(s, slurm_gres_counts);
	ADD_TEST(s, slurm_gres_share);
	return s;
}

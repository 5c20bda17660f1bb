/* gres: see gres.h (pure; thread-safe on the caller's memory). */
#include "tools/slurm/gres.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Expand "/dev/nvidia[0-3,5]" (one bracket of decimal numbers and ranges)
 * or a comma-separated list of plain paths into list; *n is how many. */
static void expand_files(const char *spec, char list[][CUMEMCAP_GRES_PATH_LEN], size_t max,
			 size_t *n)
{
	*n = 0;
	const char *open = strchr(spec, '[');
	const char *close = open ? strchr(open, ']') : NULL;
	if (!open || !close) {
		for (const char *p = spec; *p && *n < max;) {
			size_t len = strcspn(p, ",");
			snprintf(list[(*n)++], CUMEMCAP_GRES_PATH_LEN, "%.*s", (int)len, p);
			p += len + (p[len] == ',');
		}
		return;
	}
	for (const char *p = open + 1; p < close && *n < max;) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;
		if (end == p)
			return;
		if (*end == '-') {
			const char *q = end + 1;
			hi = strtoul(q, &end, 10);
			if (end == q)
				return;
		}
		for (unsigned long i = lo; i <= hi && *n < max; i++)
			snprintf(list[(*n)++], CUMEMCAP_GRES_PATH_LEN, "%.*s%lu%s",
				 (int)(open - spec), spec, i, close + 1);
		if (*end != ',')
			return;
		p = end + 1;
	}
}

/* Does a NodeName= value name this node? Exact names, comma-separated. */
static bool names_node(const char *names, const char *node)
{
	size_t nlen = strlen(node);
	for (const char *p = names; *p;) {
		size_t len = strcspn(p, ",");
		if (len == nlen && strncmp(p, node, len) == 0)
			return true;
		p += len + (p[len] == ',');
	}
	return false;
}

void cumemcap_gres_read(FILE *f, const char *node, struct cumemcap_gres *out)
{
	static const size_t max = CUMEMCAP_GRES_MAX;
	char line[4096];
	char list[CUMEMCAP_GRES_MAX][CUMEMCAP_GRES_PATH_LEN];
	memset(out, 0, sizeof(*out));
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char name[32] = "", file[CUMEMCAP_GRES_PATH_LEN] = "", nodes[512] = "";
		unsigned long count = 0;
		char *save = NULL;
		for (char *tok = strtok_r(line, " \t\r\n", &save); tok;
		     tok = strtok_r(NULL, " \t\r\n", &save)) {
			if (strncasecmp(tok, "Name=", 5) == 0)
				snprintf(name, sizeof(name), "%s", tok + 5);
			else if (strncasecmp(tok, "File=", 5) == 0)
				snprintf(file, sizeof(file), "%s", tok + 5);
			else if (strncasecmp(tok, "NodeName=", 9) == 0)
				snprintf(nodes, sizeof(nodes), "%s", tok + 9);
			else if (strncasecmp(tok, "Count=", 6) == 0)
				count = strtoul(tok + 6, NULL, 10);
		}
		if (!file[0] || (nodes[0] && !names_node(nodes, node)))
			continue;
		size_t n;
		expand_files(file, list, max, &n);
		for (size_t i = 0; i < n; i++) {
			if (strcasecmp(name, "gpu") == 0 && out->gpus < max) {
				memcpy(out->gpu[out->gpus++], list[i], CUMEMCAP_GRES_PATH_LEN);
			} else if (strcasecmp(name, "shard") == 0 && out->shard_files < max) {
				memcpy(out->shard_file[out->shard_files], list[i],
				       CUMEMCAP_GRES_PATH_LEN);
				out->shards[out->shard_files++] = (unsigned)(count / n);
			}
		}
	}
}

unsigned cumemcap_gres_shards(const struct cumemcap_gres *g, unsigned long index)
{
	const char *file = NULL;
	if (index < g->gpus)
		file = g->gpu[index];
	else if (g->gpus == 0 && index < g->shard_files)
		file = g->shard_file[index];
	for (size_t i = 0; file && i < g->shard_files; i++)
		if (strcmp(g->shard_file[i], file) == 0 && g->shards[i] > 0)
			return g->shards[i];
	return 0;
}

uint32_t cumemcap_gres_share(unsigned long shards, unsigned count)
{
	if (count == 0)
		return 0;
	uint64_t share = (uint64_t)shards * 100000u / count;
	if (share > 100000)
		share = 100000;
	return share == 0 ? 1 : (uint32_t)share;
}

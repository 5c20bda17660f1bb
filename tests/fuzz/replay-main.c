/* replay-main: run LLVMFuzzerTestOneInput once on each input, without
 * libFuzzer, so every build (gcc, clang, ASan+UBSan) replays the seed
 * corpus and the regression cases deterministically.
 *
 *   fuzz-replay PATH...
 *
 * A PATH that is a file is one input; a directory is every regular file in
 * it, in name order, except names starting with '.' or "README" (the
 * regressions directory explains itself in a README). A PATH that cannot be
 * read fails the run: a misplaced corpus must not pass as an empty one. A
 * broken invariant or a sanitizer report ends the process, failing the test;
 * the file's name is printed before it runs. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int read_file(const char *path, unsigned char **data, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "fuzz-replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, n = 0;
	unsigned char *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			fprintf(stderr, "fuzz-replay: %s: out of memory\n", path);
			fclose(f);
			return -1;
		}
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		cap *= 2;
		unsigned char *nbuf = realloc(buf, cap);
		if (!nbuf)
			free(buf);
		buf = nbuf;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		fprintf(stderr, "fuzz-replay: %s: read error\n", path);
		free(buf);
		return -1;
	}
	/* Exactly `n` bytes, so a read past the end is one ASan sees. */
	unsigned char *exact = malloc(n ? n : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, n);
	free(buf);
	*data = exact;
	*size = n;
	return 0;
}

static int run_file(const char *path)
{
	unsigned char *data;
	size_t size;
	if (read_file(path, &data, &size) != 0)
		return -1;
	fprintf(stderr, "fuzz-replay: %s (%zu bytes)\n", path, size);
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

static int wanted(const struct dirent *e)
{
	return e->d_name[0] != '.' && strncmp(e->d_name, "README", 6) != 0;
}

/* Runs every input of `dir`; returns how many, or -1. */
static int run_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, wanted, alphasort);
	if (n < 0) {
		fprintf(stderr, "fuzz-replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	int count = 0, status = 0;
	for (int i = 0; i < n; i++) {
		size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
		char *path = malloc(len);
		struct stat st;
		if (!path) {
			status = -1;
		} else {
			snprintf(path, len, "%s/%s", dir, names[i]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				if (run_file(path) != 0)
					status = -1;
				else
					count++;
			}
		}
		free(path);
		free(names[i]);
	}
	free(names);
	return status < 0 ? -1 : count;
}

int main(int argc, char **argv)
{
	int total = 0, status = 0;
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "fuzz-replay: %s: %s\n", argv[i], strerror(errno));
			status = 1;
		} else if (S_ISDIR(st.st_mode)) {
			int n = run_dir(argv[i]);
			if (n < 0)
				status = 1;
			else
				total += n;
		} else if (run_file(argv[i]) != 0) {
			status = 1;
		} else {
			total++;
		}
	}
	if (status == 0)
		printf("fuzz-replay: %d inputs, every invariant held\n", total);
	return status;
}

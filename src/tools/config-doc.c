/* config-doc: see config-doc.h. The example files say the same as --help
 * because both are printed here from the one table. conf/cumemcap.conf is
 * also the source of the cumemcap.conf(5) man page, so its text is written
 * for users: how it is made is said here and in the tests, not in it. */
#include "config.h"
#include "tools/config-doc.h"

#include <stdbool.h>
#include <string.h>

#include "config/settings.h"

#define HELP_COLUMN 26 /* where --help's descriptions start */
#define WIDTH 80

void cumemcap_setting_flag(const struct cumemcap_setting *s, char *buf, size_t len)
{
	if (!len)
		return;
	size_t o = (size_t)snprintf(buf, len, "--");
	for (const char *k = s->key; *k && o + 1 < len; k++)
		buf[o++] = *k == '_' ? '-' : *k;
	buf[o < len ? o : len - 1] = '\0';
}

const struct cumemcap_setting *cumemcap_setting_by_flag(const char *flag)
{
	size_t n = strcspn(flag, "=");
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		char f[64];
		cumemcap_setting_flag(&cumemcap_settings[i], f, sizeof(f));
		if (strlen(f) == n && strncmp(f, flag, n) == 0)
			return &cumemcap_settings[i];
	}
	return NULL;
}

void cumemcap_doc_wrap(FILE *f, const char *text, int first, int indent, int width, const char *prefix)
{
	int col = first;
	const char *p = text;
	bool line_empty = true;
	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		size_t n = strcspn(p, " ");
		if (!line_empty && col + 1 + (int)n > width) {
			fprintf(f, "\n%s%*s", prefix, indent, "");
			col = (int)strlen(prefix) + indent;
			line_empty = true;
		}
		if (!line_empty) {
			fputc(' ', f);
			col++;
		}
		fwrite(p, 1, n, f);
		col += (int)n;
		line_empty = false;
		p += n;
	}
	fputc('\n', f);
}

/* "  NAME" and the text from column HELP_COLUMN, or on the next line when
 * NAME does not leave two blanks before it. */
static void help_entry(FILE *f, const char *name, const char *text)
{
	int n = fprintf(f, "  %s", name);
	if (n + 2 > HELP_COLUMN) {
		fprintf(f, "\n%*s", HELP_COLUMN, "");
	} else {
		fprintf(f, "%*s", HELP_COLUMN - n, "");
	}
	cumemcap_doc_wrap(f, text, HELP_COLUMN, HELP_COLUMN, WIDTH, "");
}

int cumemcap_doc_help(FILE *f, const char *what)
{
	char name[128], text[1024];
	bool options = strcmp(what, "options") == 0;
	if (!options && strcmp(what, "variables") != 0)
		return 2;
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const struct cumemcap_setting *s = &cumemcap_settings[i];
		if (!(s->scope & CUMEMCAP_IN_ENV))
			continue;
		if (options) {
			char flag[64];
			cumemcap_setting_flag(s, flag, sizeof(flag));
			snprintf(name, sizeof(name), "%s %s", flag, s->arg);
			snprintf(text, sizeof(text), "%s: %s", s->variable, s->summary);
		} else {
			snprintf(name, sizeof(name), "%s", s->variable);
			snprintf(text, sizeof(text), "%s Default: %s.", s->doc, s->default_text);
		}
		help_entry(f, name, text);
	}
	return 0;
}

static void comment(FILE *f, const char *text)
{
	fputs("# ", f);
	cumemcap_doc_wrap(f, text, 2, 0, 78, "# ");
}

static const char conf_head[] =
	"# cumemcap.conf: rules for programs run under libcumemcap.so.\n"
	"#\n"
	"# Every key is here with its default (or an example where the default cannot\n"
	"# be written), commented out: as installed, this file changes nothing. Remove\n"
	"# the `#` before a key to set it.\n"
	"#\n"
	"# Read from $CUMEMCAP_CONFIG, else from /etc/cumemcap.conf when it exists.\n"
	"# Check a file with `cumemcap --check-config FILE`; see what a program would\n"
	"# get on this machine with `cumemcap --print-config -- PROGRAM ARGS`.\n"
	"#\n"
	"# Format: `key = value` lines; `#` starts a comment (at the start of a line\n"
	"# or after a blank); [device SELECTOR] and [program GLOB] sections. A key\n"
	"# before the first section applies to every program and every GPU.\n"
	"#\n"
	"# Precedence, highest first:\n"
	"#   1. environment variables (CUMEMCAP_DEVICE_LIMITS, then CUMEMCAP_LIMIT, ...)\n"
	"#   2. the first [program GLOB] section that matches the program\n"
	"#   3. the first [device SELECTOR] section that matches the GPU (limit only)\n"
	"#   4. the keys before the first section (device_limits, then limit)\n"
	"#   5. the defaults shown below\n"
	"# A wrong line stops every program before it starts, naming this file and\n"
	"# the line. A GPU selector that matches no GPU of a machine is reported once\n"
	"# and skipped: one file can serve nodes with different cards.\n";

static const char conf_tail[] =
	"\n"
	"# Sections. A [device SELECTOR] section (an ordinal, a GPU-<uuid> or a PCI bus\n"
	"# id) may set limit for that GPU; a [program GLOB] section (matched against\n"
	"# the program's name: the executable's base name, or for an interpreter the\n"
	"# script or module it runs) may set any key, and its limit and device_limits\n"
	"# beat [device] sections. For example:\n"
	"#[device GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f]\n"
	"#limit = 50%\n"
	"#\n"
	"#[program train*.py]\n"
	"#limit = 20GiB\n"
	"#log = stderr\n";

static const char env_head[] =
	"# cumemcap.env: the variables cumemcap reads, in KEY=VALUE form, usable as a\n"
	"# systemd EnvironmentFile=, a `docker run --env-file`, or a Kubernetes\n"
	"# ConfigMap read with envFrom.\n"
	"#\n"
	"# Generated from the table of settings (src/config/settings-table.c) by\n"
	"# `cumemcap-config --print-example env`; the test suite checks that they\n"
	"# match, and that every line, uncommented, is accepted. Every variable is\n"
	"# here with its default (or an example where the default cannot be written),\n"
	"# commented out: as it is, this file changes nothing. A variable beats the\n"
	"# configuration file (conf/cumemcap.conf: the same settings as keys, with\n"
	"# [device SELECTOR] and [program GLOB] sections).\n";

static const char env_tail[] =
	"\n"
	"# CUMEMCAP_CONFIG: the configuration file. Default: /etc/cumemcap.conf when it\n"
	"# exists; empty: no file.\n"
	"#CUMEMCAP_CONFIG=/etc/cumemcap.conf\n";

int cumemcap_doc_example(FILE *f, const char *what)
{
	bool conf = strcmp(what, "conf") == 0;
	if (!conf && strcmp(what, "env") != 0)
		return 2;
	fputs(conf ? conf_head : env_head, f);
	char text[1536];
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const struct cumemcap_setting *s = &cumemcap_settings[i];
		if (!(s->scope & (conf ? CUMEMCAP_IN_GLOBAL : CUMEMCAP_IN_ENV)))
			continue;
		const char *value = s->example ? s->example : s->default_value;
		snprintf(text, sizeof(text), "%s: %s Default: %s.%s", conf ? s->key : s->variable, s->doc,
			 s->default_text, s->example ? " For example:" : "");
		fputc('\n', f);
		comment(f, text);
		if (conf)
			fprintf(f, "#%s = %s\n", s->key, value);
		else
			fprintf(f, "#%s=%s\n", s->variable, value);
	}
	fputs(conf ? conf_tail : env_tail, f);
	return 0;
}

/* The headings are the variables, so that GitHub's anchors are the
 * variables in lower case (#cumemcap_limit). */

/* Where in a configuration file a setting may stand, in words. */
static void scope_text(FILE *f, unsigned scope)
{
	const char *where[3];
	int n = 0;
	if (scope & CUMEMCAP_IN_GLOBAL)
		where[n++] = "before the first section";
	if (scope & CUMEMCAP_IN_PROGRAM)
		where[n++] = "in a `[program GLOB]` section";
	if (scope & CUMEMCAP_IN_DEVICE)
		where[n++] = "in a `[device SELECTOR]` section";
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", where[i]);
}

static const char reference_head[] =
	"# Settings\n"
	"\n"
	"<!-- Made by `cumemcap-config --print-reference > docs/settings.md` from the\n"
	"     table of settings; the docs suite fails when this file differs. -->\n"
	"\n"
	"Every setting can be given three ways: as an environment variable, as a key\n"
	"of the configuration file ([the file's format](configuration.md#the-configuration-file)),\n"
	"or as an option of the `cumemcap` launcher (`--NAME VALUE` or `--NAME=VALUE`),\n"
	"which sets the variable. A variable beats the file. A wrong value stops the\n"
	"program before its `main` with one line naming the variable, the option or\n"
	"the file and line, and exit status 125.\n"
	"\n"
	"| variable | file key | launcher option | what it sets |\n"
	"|---|---|---|---|\n";

int cumemcap_doc_reference(FILE *f)
{
	char flag[64];
	fputs(reference_head, f);
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const struct cumemcap_setting *s = &cumemcap_settings[i];
		cumemcap_setting_flag(s, flag, sizeof(flag));
		fprintf(f, "| [`%s`](#cumemcap_%s) | `%s` | `%s` | %s |\n", s->variable, s->key, s->key, flag,
			s->summary);
	}
	fputs("| [`CUMEMCAP_CONFIG`](#cumemcap_config) | | `--config` | the configuration file. |\n", f);
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const struct cumemcap_setting *s = &cumemcap_settings[i];
		cumemcap_setting_flag(s, flag, sizeof(flag));
		fprintf(f, "\n## `%s`\n\n", s->variable);
		fprintf(f, "File key `%s`; launcher option `%s %s`.\n\n", s->key, flag, s->arg);
		cumemcap_doc_wrap(f, s->doc, 0, 0, WIDTH, "");
		fprintf(f, "\nDefault: %s.", s->default_text);
		if (s->scope & CUMEMCAP_IN_ENV) {
			fprintf(f, " Example: `%s=%s`.", s->variable, s->example ? s->example : s->default_value);
		}
		fputs(" In a file: ", f);
		scope_text(f, s->scope);
		fputs(".\n", f);
	}
	fputs("\n## `CUMEMCAP_CONFIG`\n\n"
	      "Launcher option `--config FILE`. The configuration file. Default: `/etc/cumemcap.conf`\n"
	      "when it exists (set at build time with `-Ddefault-config=PATH`); empty: no file.\n"
	      "Not read under secure execution (setuid and setgid programs), which read only\n"
	      "the default file ([secure execution](configuration.md#the-configuration-file)).\n", f);
	return 0;
}

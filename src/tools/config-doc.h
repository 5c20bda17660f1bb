/* config-doc: what cumemcap-config prints from the table of settings
 * (config/settings.h): the launcher's generated --help sections and the
 * example files conf/cumemcap.conf and conf/cumemcap.env, and the reference
 * docs/settings.md; and the launcher's option of each setting.
 * Thread safety: single-threaded tool code; no state. */
#pragma once

#include <stdio.h>

#include "config/settings.h"

/* The launcher's option of a setting: "--" and the key with '-' for '_'. */
void cumemcap_setting_flag(const struct cumemcap_setting *s, char *buf, size_t len);

/* "--limit" or "--limit=..." (the part before '='); NULL for none. */
const struct cumemcap_setting *cumemcap_setting_by_flag(const char *flag);

/* --print-help options|variables: the launcher's "Options" lines for the
 * settings and its "Variables" entries. 0, or 2 for another word. */
int cumemcap_doc_help(FILE *f, const char *what);

/* --print-example conf|env: the example configuration file or the
 * example environment file. 0, or 2 for another word. */
int cumemcap_doc_example(FILE *f, const char *what);

/* --print-reference: docs/settings.md, every setting in Markdown. */
int cumemcap_doc_reference(FILE *f);

/* Text wrapped to `width` columns: the first line after `first` columns
 * already used, the others indented by `indent` spaces. */
void cumemcap_doc_wrap(FILE *f, const char *text, int first, int indent, int width, const char *prefix);

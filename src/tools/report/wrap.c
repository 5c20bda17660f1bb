/* wrap: text wrapped between clauses (see wrap.h). No state: thread-safe. */
#include "config.h"

#include "wrap.h"

#include <stdlib.h>
#include <string.h>

#include "text.h"

static void add_line(struct report_wrapped *t, const char *s, size_t len)
{
	t->lines = report_xrealloc(t->lines, (t->n + 1) * sizeof(*t->lines));
	t->lines[t->n] = report_xmalloc(len + 1);
	memcpy(t->lines[t->n], s, len);
	t->lines[t->n][len] = '\0';
	t->n++;
}

/* Bytes of the first `cols` code points of s (at most its length). */
static size_t cut_at(const char *s, size_t cols)
{
	size_t i = 0, c = 0;
	for (; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80 && c++ == cols)
			break;
	}
	return i;
}

/* The length of the clause at s: up to and with the next ", " outside
 * parentheses (the comma kept, the space not), else the rest. */
static size_t clause_len(const char *s)
{
	int depth = 0;

	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '(')
			depth++;
		else if (s[i] == ')' && depth > 0)
			depth--;
		else if (s[i] == ',' && s[i + 1] == ' ' && depth == 0)
			return i + 1;
	}
	return strlen(s);
}

void report_wrap(struct report_wrapped *t, const char *text, size_t width)
{
	const char *s = text ? text : "";

	t->lines = NULL;
	t->n = 0;
	struct report_buf line = { 0 };

	while (*s) {
		/* A whole clause, when it fits on this line or a line of its own. */
		size_t clause = clause_len(s);
		char *c = report_xmalloc(clause + 1);
		memcpy(c, s, clause);
		c[clause] = '\0';
		size_t cols = report_text_width(c);
		free(c);
		if (cols <= width) {
			size_t have = line.s ? report_text_width(line.s) : 0;
			if (have && have + 1 + cols > width) {
				add_line(t, line.s, line.len);
				line.len = 0;
				line.s[0] = '\0';
				have = 0;
			}
			if (have)
				report_buf_puts(&line, " ");
			report_buf_add(&line, s, clause);
			s += clause;
			while (*s == ' ')
				s++;
			continue;
		}
		size_t word = strcspn(s, " ");
		char *w = report_xmalloc(word + 1);
		memcpy(w, s, word);
		w[word] = '\0';
		size_t have = line.s ? report_text_width(line.s) : 0;
		size_t need = report_text_width(w);
		if (have && have + 1 + need > width) {
			add_line(t, line.s, line.len);
			line.len = 0;
			line.s[0] = '\0';
			have = 0;
		}
		const char *rest = w;
		while (report_text_width(rest) > width - have) {
			size_t cut = cut_at(rest, width - have);
			if (have)
				report_buf_puts(&line, " ");
			report_buf_add(&line, rest, cut);
			add_line(t, line.s, line.len);
			line.len = 0;
			line.s[0] = '\0';
			have = 0;
			rest += cut;
		}
		if (*rest) {
			if (have)
				report_buf_puts(&line, " ");
			report_buf_puts(&line, rest);
		}
		free(w);
		s += word;
		while (*s == ' ')
			s++;
	}
	if (line.len || t->n == 0)
		add_line(t, line.s ? line.s : "", line.len);
	free(line.s);
}

void report_wrapped_free(struct report_wrapped *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->lines[i]);
	free(t->lines);
	t->lines = NULL;
	t->n = 0;
}

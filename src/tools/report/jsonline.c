/* jsonline: a log line as one JSON value through json-c (see jsonline.h). */
#include "config.h"

#include "jsonline.h"

#include <string.h>

struct json_object *report_json_member(struct json_object *obj, const char *key)
{
	struct json_object *v = NULL;

	if (!json_object_is_type(obj, json_type_object) || !json_object_object_get_ex(obj, key, &v))
		return NULL;
	return v;
}

bool report_json_has_member(struct json_object *obj, const char *key)
{
	return json_object_is_type(obj, json_type_object) &&
	       json_object_object_get_ex(obj, key, NULL);
}

bool report_json_is_null(struct json_object *v)
{
	return !v;
}

bool report_json_is_u64(struct json_object *v, uint64_t *out)
{
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
		return false;
	*out = json_object_get_uint64(v);
	return true;
}

bool report_json_is_number(struct json_object *v)
{
	return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
}

bool report_json_is_string(struct json_object *v)
{
	return json_object_is_type(v, json_type_string);
}

size_t report_json_length(struct json_object *v)
{
	return json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
}

struct json_object *report_json_element(struct json_object *array, size_t i)
{
	return json_object_array_get_idx(array, i);
}

/* Whether every number in v is written as JSON writes one: json-c also
 * reads NaN and Infinity, and keeps the text of each non-integer. */
static bool numbers_are_json(struct json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_double: {
		const char *text = json_object_get_string(v);
		return text[0] && strspn(text, "-0123456789.eE+") == strlen(text);
	}
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			if (!numbers_are_json(json_object_array_get_idx(v, i)))
				return false;
		}
		return true;
	case json_type_object: {
		json_object_object_foreach(v, key, value)
		{
			(void)key;
			if (!numbers_are_json(value))
				return false;
		}
		return true;
	}
	default:
		return true;
	}
}

struct json_object *report_json_line(struct json_tokener *tok, const char *text, size_t len)
{
	while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\r' ||
			   text[len - 1] == '\n'))
		len--;
	if (len == 0 || len > INT32_MAX)
		return NULL;
	json_tokener_reset(tok);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	struct json_object *v = json_tokener_parse_ex(tok, text, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len || !numbers_are_json(v)) {
		json_object_put(v);
		return NULL;
	}
	return v;
}

/* jsonline: one line of a footprint log as one JSON value, through json-c
 * (cumemcap report), and the few questions the reader asks of a value.
 *
 * Owns the syntax of a line and nothing of the log's schema. json-c reads
 * with JSON_TOKENER_STRICT (no comments, trailing commas or unquoted
 * names), nothing but whitespace may follow the value, and a number must
 * be written as RFC 8259 writes one (json-c alone also takes NaN and
 * Infinity). json-c reads a non-negative integer literal up to 2^64-1
 * exactly into a uint64 (byte counts above 2^53 do not survive a double);
 * a larger one reads as 2^64-1. Nesting deeper than json-c's default (32)
 * is not a line. A record is an object: a bare number or literal as the
 * whole line is not read (json-c waits for more input after it). A JSON null is a NULL object, as an absent member is;
 * report_json_has_member tells them apart. Strings are as json-c decodes
 * them, bytes as they came: keep one past its record with
 * report_xstrdup_utf8 (text.h).
 *
 * Single-threaded: one tokener per reader, no global state. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* text[0..len) as one JSON value, trailing blanks allowed; NULL when it is
 * not one. The caller releases it with json_object_put. */
struct json_object *report_json_line(struct json_tokener *tok, const char *text, size_t len);

/* The member `key` of an object (the last one, when a name repeats); NULL
 * when null, absent, or `obj` is not an object. */
struct json_object *report_json_member(struct json_object *obj, const char *key);

/* Whether the object has the member `key`, null or not. */
bool report_json_has_member(struct json_object *obj, const char *key);

/* JSON null, or no value at all. */
bool report_json_is_null(struct json_object *v);

/* A non-negative integer literal: its exact value into *out. */
bool report_json_is_u64(struct json_object *v, uint64_t *out);

/* A number of any form (a time). */
bool report_json_is_number(struct json_object *v);

bool report_json_is_string(struct json_object *v);

/* Elements of an array; 0 for anything else. */
size_t report_json_length(struct json_object *v);

/* Element i of an array, i < report_json_length. */
struct json_object *report_json_element(struct json_object *array, size_t i);

/* JSON: the testee wire (conformance/TESTEE.md, one object per line) and the EncodedObjectKey
 * text (KEY-ENCODED-FIELDS). The reader decodes every escape and keeps integers of any size
 * (saturated, see lk_int); the writer streams to a FILE so no response is held in memory. */
#ifndef LK_JSON_H
#define LK_JSON_H

#include <stdio.h>

#include "lk_arena.h"
#include "lk_bytes.h"
#include "lk_int.h"

typedef enum {
    LK_J_NULL,
    LK_J_BOOL,
    LK_J_INT,
    LK_J_FLOAT, /* a number with a fraction or exponent, NaN, Infinity (value not kept) */
    LK_J_STR,
    LK_J_ARRAY,
    LK_J_OBJECT
} lk_jtype;

struct lk_jfield;

typedef struct lk_jvalue {
    lk_jtype type;
    union {
        int boolean;
        lk_int integer;
        lk_span str; /* decoded bytes (UTF-8; lone surrogates keep their 3-byte form) */
        struct {
            size_t n;
            struct lk_jvalue *items;
        } array;
        struct {
            size_t n;
            struct lk_jfield *fields;
        } object;
    } u;
} lk_jvalue;

typedef struct lk_jfield {
    lk_span name;
    lk_jvalue value;
} lk_jfield;

/* Containers nest at most this deep. */
#define LK_JSON_MAX_DEPTH 64

/* Parse one JSON text whose top level is a value of any type, as Python's json.loads reads
 * it: NaN and Infinity are numbers, a repeated member name keeps the last value (see
 * lk_json_get). On failure returns -1 with a reason in `why`. */
int lk_json_parse(lk_span text, lk_arena *arena, lk_jvalue *out, char *why, size_t why_size);

/* The member `name` of an object (the last one when repeated), or NULL. */
const lk_jvalue *lk_json_get(const lk_jvalue *obj, const char *name);

/* Streaming writer of one response object. */
typedef struct {
    FILE *f;
    int fields; /* written so far */
} lk_jwriter;

void lk_jw_begin(lk_jwriter *w, FILE *f);
void lk_jw_key(lk_jwriter *w, const char *name);
void lk_jw_null(lk_jwriter *w);
void lk_jw_bool(lk_jwriter *w, int v);
void lk_jw_int(lk_jwriter *w, int64_t v);
void lk_jw_uint(lk_jwriter *w, uint64_t v);
/* A JSON string of `s`, pure ASCII: control bytes and bytes >= 0x7F are written as \u00XX
 * (names and messages are ASCII; this only keeps a stray byte from breaking the line). */
void lk_jw_str(lk_jwriter *w, lk_span s);
void lk_jw_cstr(lk_jwriter *w, const char *s);
/* A JSON string holding the lowercase hex of `s`. */
void lk_jw_hex(lk_jwriter *w, lk_span s);
/* Pieces of one string: open, hex of several spans (optionally comma-separated), close. */
void lk_jw_raw(lk_jwriter *w, const char *text);
void lk_jw_hex_part(lk_jwriter *w, lk_span s);
void lk_jw_end(lk_jwriter *w);

#endif

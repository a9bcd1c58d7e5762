/* Typed access to the fields of one testee request (conformance/TESTEE.md "Field types"):
 * INT and BOOL are JSON integers and booleans, BYTES and TEXT lowercase hex strings, lists
 * of them comma-joined hex, NAME a JSON string, INTS and NAMES JSON arrays. */
#ifndef LK_REQUEST_H
#define LK_REQUEST_H

#include "lk_arena.h"
#include "lk_err.h"
#include "lk_int.h"
#include "lk_json.h"

/* Error class of a request that breaks the wire protocol itself (a missing or mistyped
 * field): the suite's driver reports it as a protocol failure, not as a result. */
#define LK_BAD_REQUEST "BadRequest"

typedef struct {
    const lk_jvalue *obj; /* the request object */
    lk_arena *arena;
} lk_request;

typedef struct {
    size_t n;
    lk_span *items;
} lk_span_list;

typedef struct {
    size_t n;
    lk_int *items;
} lk_int_list;

/* Each getter: `present` (may be NULL) is set to 0 when the field is absent or null, and
 * then the value is the default; a required field that is absent or null fails. */
int lk_req_int(const lk_request *r, const char *name, int required, int64_t dflt, lk_int *out,
               int *present, lk_err *err);
int lk_req_bool(const lk_request *r, const char *name, int dflt, int *out, lk_err *err);
/* BYTES or TEXT: the decoded bytes. When absent or null, p is NULL. */
int lk_req_hex(const lk_request *r, const char *name, int required, lk_span *out, lk_err *err);
/* NAME: the string. When absent or null, p is NULL. */
int lk_req_name(const lk_request *r, const char *name, int required, lk_span *out,
                lk_err *err);
int lk_req_ints(const lk_request *r, const char *name, int required, lk_int_list *out,
                lk_err *err);
/* NAMES: null items give {NULL, 0}. */
int lk_req_names(const lk_request *r, const char *name, int required, lk_span_list *out,
                 lk_err *err);
/* BYTES_LIST or TEXT_LIST. */
int lk_req_hex_list(const lk_request *r, const char *name, int required, lk_span_list *out,
                    lk_err *err);

/* Lowercase or uppercase hex -> bytes; -1 for odd length or a non-hex character. */
int lk_unhex(lk_span hex, lk_arena *arena, lk_span *out);

#endif

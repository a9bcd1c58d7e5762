/* The operations of conformance/TESTEE.md that this testee implements, and its capability
 * list. Each operation validates and computes everything first; only then does it write its
 * result fields (after "ok": true), so a failure never leaves a half-written response. */
#ifndef LK_OPS_H
#define LK_OPS_H

#include "lk_err.h"
#include "lk_json.h"
#include "lk_request.h"

#define LK_UNSUPPORTED_OP "UnsupportedOperation"

typedef int (*lk_op_fn)(const lk_request *r, lk_jwriter *w, lk_err *err);

typedef struct {
    const char *name; /* operation and capability name */
    lk_op_fn fn;      /* NULL: a flag capability of another operation */
} lk_op;

/* Every capability this testee declares, in the order it declares them. */
extern const lk_op LK_OPS[];
extern const size_t LK_NOPS;

/* The operation named `name`, or NULL. */
lk_op_fn lk_find_op(lk_span name);

#endif

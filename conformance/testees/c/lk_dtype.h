/* Dtypes: the numeric ids of the blob header and the protocol messages (SPEC.md "Dtype table",
 * PROTO-DTYPE-ID), the names the testee protocol uses (PyTorch's names, without "torch."),
 * and the names of CacheEngineKey strings (KEY-CACHE-DTYPE). */
#ifndef LK_DTYPE_H
#define LK_DTYPE_H

#include "lk_bytes.h"

typedef struct {
    const char *name;      /* canonical name on the testee wire, e.g. "float16" */
    const char *alias;     /* PyTorch's other attribute name ("half"), or NULL */
    int wire_id;           /* id a writer emits (float16 -> 2), -1 when the table has none */
    const char *key_name;  /* KEY-CACHE-DTYPE name ("half"), or NULL */
    int itemsize;          /* bytes per element */
} lk_dtype;

/* The dtype a reader gets for wire id `id` (1 and 2 are float16), or NULL for an id outside
 * the table; id 0 ("no dtype") also gives NULL, with *is_none set. */
const lk_dtype *lk_dtype_from_id(int64_t id, int *is_none);

/* The dtype a testee request names (canonical name or alias), or NULL. */
const lk_dtype *lk_dtype_from_name(lk_span name);

/* The dtype a CacheEngineKey string names, or NULL. */
const lk_dtype *lk_dtype_from_key_name(lk_span name);

#endif

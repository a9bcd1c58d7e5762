/* An integer from a testee request. JSON integers have no size limit; values outside int64
 * are kept saturated with `big` set, so every range check still refuses them. */
#ifndef LK_INT_H
#define LK_INT_H

#include <stdint.h>

typedef struct {
    int64_t v;
    int big; /* 1: above INT64_MAX, -1: below INT64_MIN, 0: exact */
} lk_int;

static inline int lk_int_in(lk_int x, int64_t lo, int64_t hi)
{
    return x.big == 0 && x.v >= lo && x.v <= hi;
}

#endif

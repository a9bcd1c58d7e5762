/* A set of byte strings (open addressing, FNV-1a) for the duplicate checks of KV-HASHES and
 * KEY-CACHE-TAG: linear time, so a header or key with thousands of entries stays fast. */
#ifndef LK_SPANSET_H
#define LK_SPANSET_H

#include "lk_arena.h"
#include "lk_bytes.h"

typedef struct {
    lk_span *keys;
    size_t *values; /* caller's index of each key */
    size_t mask;
} lk_spanset;

/* A set for up to `capacity` keys. */
void lk_spanset_init(lk_spanset *set, lk_arena *arena, size_t capacity);

/* Insert `key` with `value`; returns 1 and the stored value in *existing when the key was
 * already present (nothing changes then), 0 after inserting it. */
int lk_spanset_insert(lk_spanset *set, lk_span key, size_t value, size_t *existing);

#endif

/* CacheEngineKey and LayerCacheEngineKey strings (spec "CacheEngineKey strings",
 * KEY-CACHE-FORM .. KEY-CACHE-TAG):
 *   model@world_size@worker_id@hash@dtype[@layer_id][@tag%value...] */
#ifndef LK_CACHE_KEY_H
#define LK_CACHE_KEY_H

#include "lk_arena.h"
#include "lk_bytes.h"
#include "lk_dtype.h"
#include "lk_err.h"

typedef struct {
    lk_span model;
    int64_t world_size, worker_id;
    lk_span hash; /* canonical: lowercase hex without leading zeros, "-" for negative */
    const lk_dtype *dtype;
    int has_layer; /* LayerCacheEngineKey */
    int64_t layer_id;
    size_t n_tags;
    lk_span *tag_names, *tag_values;
} lk_cache_key;

/* Read a key string. Errors: CacheKeyError. Spans point into `text` or the arena. */
int lk_cache_key_parse(lk_span text, lk_arena *arena, lk_cache_key *out, lk_err *err);

/* Write a key string, refusing what a reader could not read back (KEY-CACHE-MODEL,
 * KEY-CACHE-LAYER, KEY-CACHE-TAG). Errors: CacheKeyError. */
int lk_cache_key_render(const lk_cache_key *key, lk_arena *arena, lk_span *out, lk_err *err);

/* `hex` (an integer in hexadecimal, as Python's int(text, 16) reads it: optional spaces,
 * sign, 0x prefix and underscores between digits) in the canonical form of KEY-CACHE-HASH.
 * Errors: CacheKeyError. */
int lk_cache_key_hash_from_int_text(lk_span text, lk_arena *arena, lk_span *out, lk_err *err);

/* Tags from request configs: a repeated name keeps its first position and its last value,
 * as a dictionary would. Reorders in place; returns the new count. */
size_t lk_cache_key_merge_tags(lk_span *names, lk_span *values, size_t n, lk_arena *arena);

#endif

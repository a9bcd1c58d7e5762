/* Per-request bump arena with a hard cap. Every allocation the testee makes while serving a
 * request comes from here, and the cap is a small multiple of the request line's length: an
 * allocation sized by an untrusted field (instead of by the input) aborts the process, which
 * the fuzzer reports as a failure. */
#ifndef LK_ARENA_H
#define LK_ARENA_H

#include <stddef.h>

typedef struct lk_arena_block lk_arena_block;

typedef struct {
    lk_arena_block *head;
    size_t used; /* bytes handed out since the last reset */
    size_t cap;  /* lk_arena_alloc aborts past this */
} lk_arena;

/* Multiplier and constant of the cap: cap = LK_ARENA_FACTOR * input bytes + LK_ARENA_SLACK. */
#define LK_ARENA_FACTOR 16u
#define LK_ARENA_SLACK 65536u

void lk_arena_init(lk_arena *a);
/* Free everything and set the cap for the next request from its input size. */
void lk_arena_reset(lk_arena *a, size_t input_bytes);
/* n bytes, zeroed, aligned for any scalar; aborts (with a message on stderr) past the cap. */
void *lk_arena_alloc(lk_arena *a, size_t n);
/* count * size bytes with an overflow check. */
void *lk_arena_array(lk_arena *a, size_t count, size_t size);
void lk_arena_free(lk_arena *a);

#endif

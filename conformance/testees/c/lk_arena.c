#include "lk_arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lk_arena_block {
    lk_arena_block *next;
    /* followed by the payload, aligned like the union below */
};

typedef union {
    long double ld;
    void *p;
    long long ll;
} lk_max_align;

#define LK_HDR (((sizeof(lk_arena_block) + sizeof(lk_max_align) - 1) / sizeof(lk_max_align)) \
                * sizeof(lk_max_align))

void lk_arena_init(lk_arena *a)
{
    a->head = NULL;
    a->used = 0;
    a->cap = LK_ARENA_SLACK;
}

void lk_arena_free(lk_arena *a)
{
    while (a->head != NULL) {
        lk_arena_block *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->used = 0;
}

void lk_arena_reset(lk_arena *a, size_t input_bytes)
{
    lk_arena_free(a);
    if (input_bytes > ((size_t)-1 - LK_ARENA_SLACK) / LK_ARENA_FACTOR)
        a->cap = (size_t)-1;
    else
        a->cap = LK_ARENA_FACTOR * input_bytes + LK_ARENA_SLACK;
}

static void lk_arena_abort(const lk_arena *a, size_t n)
{
    fprintf(stderr,
            "lmckv-testee: allocation cap exceeded: %lu bytes requested, %lu already used, "
            "cap %lu\n",
            (unsigned long)n, (unsigned long)a->used, (unsigned long)a->cap);
    abort();
}

void *lk_arena_alloc(lk_arena *a, size_t n)
{
    lk_arena_block *block;
    if (n > a->cap || a->used > a->cap - n)
        lk_arena_abort(a, n);
    block = malloc(LK_HDR + (n ? n : 1));
    if (block == NULL) {
        fprintf(stderr, "lmckv-testee: out of memory (%lu bytes)\n", (unsigned long)n);
        abort();
    }
    block->next = a->head;
    a->head = block;
    a->used += n;
    memset((unsigned char *)block + LK_HDR, 0, n ? n : 1);
    return (unsigned char *)block + LK_HDR;
}

void *lk_arena_array(lk_arena *a, size_t count, size_t size)
{
    if (size != 0 && count > (size_t)-1 / size)
        lk_arena_abort(a, (size_t)-1);
    return lk_arena_alloc(a, count * size);
}

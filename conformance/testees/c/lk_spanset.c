#include "lk_spanset.h"

static const uint8_t lk_empty_marker[1] = {0};

static uint32_t lk_fnv1a(lk_span s)
{
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < s.n; i++)
        h = (h ^ s.p[i]) * 16777619u;
    return h;
}

void lk_spanset_init(lk_spanset *set, lk_arena *arena, size_t capacity)
{
    size_t slots = 16;
    while (slots < 2 * capacity)
        slots *= 2;
    set->keys = lk_arena_array(arena, slots, sizeof *set->keys);
    set->values = lk_arena_array(arena, slots, sizeof *set->values);
    set->mask = slots - 1;
}

int lk_spanset_insert(lk_spanset *set, lk_span key, size_t value, size_t *existing)
{
    size_t j;
    for (j = lk_fnv1a(key) & set->mask; set->keys[j].p != NULL; j = (j + 1) & set->mask) {
        if (lk_span_eq(set->keys[j], key)) {
            *existing = set->values[j];
            return 1;
        }
    }
    /* a non-NULL pointer marks the slot used, also for the empty string */
    set->keys[j] = key.n ? key : lk_span_of(lk_empty_marker, 0);
    set->values[j] = value;
    return 0;
}

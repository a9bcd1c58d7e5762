#include "lk_cache_key.h"

#include "lk_spanset.h"

#include <stdio.h>

#define LK_INT64_DIGITS 20

static int lk_is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static int lk_is_hexlow(uint8_t c)
{
    return lk_is_digit(c) || (c >= 'a' && c <= 'f');
}

static int lk_has_byte(lk_span s, uint8_t c)
{
    return s.n != 0 && memchr(s.p, c, s.n) != NULL;
}

/* KEY-CACHE-INT / KEY-CACHE-LAYER: "0" / ["-"] nonzero *digit, fitting int64. */
static int lk_read_decimal(lk_span s, int allow_negative, int64_t *out)
{
    size_t i = 0;
    int negative = 0;
    uint64_t mag = 0, limit;
    if (s.n == 0 || s.n > LK_INT64_DIGITS)
        return -1;
    if (s.p[0] == '-') {
        if (!allow_negative)
            return -1;
        negative = 1;
        i = 1;
    }
    if (i == s.n || !lk_is_digit(s.p[i]) || (s.p[i] == '0' && (negative || s.n > 1)))
        return -1;
    limit = negative ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    for (; i < s.n; i++) {
        unsigned d;
        if (!lk_is_digit(s.p[i]))
            return -1;
        d = (unsigned)(s.p[i] - '0');
        if (mag > (limit - d) / 10)
            return -1;
        mag = mag * 10 + d;
    }
    if (negative)
        *out = mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag;
    else
        *out = (int64_t)mag;
    return 0;
}

/* KEY-CACHE-HASH: 1*hexlow / "-" nonzerohex *hexlow; canonical form drops leading zeros. */
static int lk_read_hash(lk_span s, lk_span *out)
{
    size_t i;
    if (s.n == 0)
        return -1;
    if (s.p[0] == '-') {
        if (s.n < 2 || s.p[1] == '0')
            return -1;
        for (i = 1; i < s.n; i++)
            if (!lk_is_hexlow(s.p[i]))
                return -1;
        *out = s;
        return 0;
    }
    for (i = 0; i < s.n; i++)
        if (!lk_is_hexlow(s.p[i]))
            return -1;
    for (i = 0; i + 1 < s.n && s.p[i] == '0'; i++)
        continue;
    *out = lk_span_of(s.p + i, s.n - i);
    return 0;
}

int lk_cache_key_parse(lk_span text, lk_arena *arena, lk_cache_key *out, lk_err *err)
{
    size_t nparts = 1, i, start, k, fixed, first;
    lk_span *parts;
    lk_spanset seen;
    memset(out, 0, sizeof *out);
    for (i = 0; i < text.n; i++)
        if (text.p[i] == '@')
            nparts++;
    parts = lk_arena_array(arena, nparts, sizeof *parts);
    for (i = 0, start = 0, k = 0; i <= text.n; i++) {
        if (i == text.n || text.p[i] == '@') {
            parts[k++] = lk_span_of(text.p + start, i - start);
            start = i + 1;
        }
    }
    out->has_layer = nparts >= 6 && !lk_has_byte(parts[5], '%');
    fixed = out->has_layer ? 6 : 5;
    if (nparts < fixed)
        return lk_fail(err, LK_CACHE_KEY, "key string has %lu fields, needs %lu",
                       (unsigned long)nparts, (unsigned long)fixed);
    out->model = parts[0];
    if (lk_read_hash(parts[3], &out->hash))
        return lk_fail(err, LK_CACHE_KEY, "bad chunk hash field");
    out->dtype = lk_dtype_from_key_name(parts[4]);
    if (out->dtype == NULL)
        return lk_fail(err, LK_CACHE_KEY, "unknown dtype name in key string");
    if (lk_read_decimal(parts[1], 1, &out->world_size))
        return lk_fail(err, LK_CACHE_KEY, "bad world_size field");
    if (lk_read_decimal(parts[2], 1, &out->worker_id))
        return lk_fail(err, LK_CACHE_KEY, "bad worker_id field");
    out->n_tags = nparts - fixed;
    out->tag_names = lk_arena_array(arena, out->n_tags, sizeof(lk_span));
    out->tag_values = lk_arena_array(arena, out->n_tags, sizeof(lk_span));
    lk_spanset_init(&seen, arena, out->n_tags);
    for (i = 0; i < out->n_tags; i++) {
        lk_span tag = parts[fixed + i];
        const uint8_t *pct = tag.n ? memchr(tag.p, '%', tag.n) : NULL;
        size_t name_len;
        if (pct == NULL)
            return lk_fail(err, LK_CACHE_KEY, "tag %lu has no '%%'", (unsigned long)i);
        name_len = (size_t)(pct - tag.p);
        out->tag_names[i] = lk_span_of(tag.p, name_len);
        out->tag_values[i] = lk_span_of(pct + 1, tag.n - name_len - 1);
        if (lk_spanset_insert(&seen, out->tag_names[i], i, &first))
            return lk_fail(err, LK_CACHE_KEY, "tag %lu repeats the name of tag %lu",
                           (unsigned long)i, (unsigned long)first);
    }
    if (out->has_layer && lk_read_decimal(parts[5], 0, &out->layer_id))
        return lk_fail(err, LK_CACHE_KEY, "bad layer_id field");
    return 0;
}

static size_t lk_put(uint8_t *dst, size_t off, lk_span s)
{
    if (s.n)
        memcpy(dst + off, s.p, s.n);
    return off + s.n;
}

static size_t lk_put_int(uint8_t *dst, size_t off, int64_t v)
{
    char tmp[24];
    int n = sprintf(tmp, "%lld", (long long)v);
    return lk_put(dst, off, lk_span_of(tmp, (size_t)n));
}

int lk_cache_key_render(const lk_cache_key *key, lk_arena *arena, lk_span *out, lk_err *err)
{
    size_t size, off = 0, i;
    uint8_t *p;
    lk_span at = lk_cstr("@"), pct = lk_cstr("%"), dtype;
    if (lk_has_byte(key->model, '@'))
        return lk_fail(err, LK_CACHE_KEY, "model_name must not contain '@'");
    if (key->hash.n == 0 || (key->hash.n == 1 && key->hash.p[0] == '-'))
        return lk_fail(err, LK_CACHE_KEY, "chunk_hash must not be empty");
    if (key->dtype == NULL || key->dtype->key_name == NULL)
        return lk_fail(err, LK_CACHE_KEY, "dtype has no CacheEngineKey name");
    if (key->has_layer && key->layer_id < 0)
        return lk_fail(err, LK_CACHE_KEY, "layer_id must be >= 0");
    for (i = 0; i < key->n_tags; i++) {
        if (lk_has_byte(key->tag_names[i], '@') || lk_has_byte(key->tag_names[i], '%'))
            return lk_fail(err, LK_CACHE_KEY, "tag name must not contain '@' or '%%'");
        if (lk_has_byte(key->tag_values[i], '@'))
            return lk_fail(err, LK_CACHE_KEY, "tag value must not contain '@'");
    }
    dtype = lk_cstr(key->dtype->key_name);
    size = key->model.n + 4 + 2 * 21 + key->hash.n + dtype.n + (key->has_layer ? 22 : 0);
    for (i = 0; i < key->n_tags; i++)
        size += 2 + key->tag_names[i].n + key->tag_values[i].n;
    p = lk_arena_alloc(arena, size);
    off = lk_put(p, off, key->model);
    off = lk_put(p, off, at);
    off = lk_put_int(p, off, key->world_size);
    off = lk_put(p, off, at);
    off = lk_put_int(p, off, key->worker_id);
    off = lk_put(p, off, at);
    off = lk_put(p, off, key->hash);
    off = lk_put(p, off, at);
    off = lk_put(p, off, dtype);
    if (key->has_layer) {
        off = lk_put(p, off, at);
        off = lk_put_int(p, off, key->layer_id);
    }
    for (i = 0; i < key->n_tags; i++) {
        off = lk_put(p, off, at);
        off = lk_put(p, off, key->tag_names[i]);
        off = lk_put(p, off, pct);
        off = lk_put(p, off, key->tag_values[i]);
    }
    *out = lk_span_of(p, off);
    return 0;
}

static int lk_is_space(uint8_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static int lk_hex_value(uint8_t c)
{
    if (lk_is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int lk_cache_key_hash_from_int_text(lk_span text, lk_arena *arena, lk_span *out, lk_err *err)
{
    size_t b = 0, e = text.n, i, n = 0;
    int negative = 0, last_digit = 0, nonzero = 0;
    uint8_t *digits;
    static const char hexchars[] = "0123456789abcdef";
    while (b < e && lk_is_space(text.p[b]))
        b++;
    while (e > b && lk_is_space(text.p[e - 1]))
        e--;
    if (b < e && (text.p[b] == '+' || text.p[b] == '-'))
        negative = text.p[b++] == '-';
    if (e - b >= 2 && text.p[b] == '0' && (text.p[b + 1] == 'x' || text.p[b + 1] == 'X')) {
        b += 2;
        last_digit = 1; /* "0x_1" is valid: an underscore may follow the prefix */
    }
    digits = lk_arena_alloc(arena, e - b + 1);
    digits[n++] = '-';
    for (i = b; i < e; i++) {
        int v = lk_hex_value(text.p[i]);
        if (text.p[i] == '_' && last_digit && i + 1 < e && text.p[i + 1] != '_') {
            last_digit = 0;
            continue;
        }
        if (v < 0)
            return lk_fail(err, LK_CACHE_KEY, "chunk_hash_int is not a hexadecimal integer");
        last_digit = 1;
        if (v == 0 && !nonzero)
            continue;
        nonzero = 1;
        digits[n++] = (uint8_t)hexchars[v];
    }
    if (i == b || !last_digit)
        return lk_fail(err, LK_CACHE_KEY, "chunk_hash_int is not a hexadecimal integer");
    if (!nonzero)
        digits[n++] = '0';
    *out = (negative && nonzero) ? lk_span_of(digits, n) : lk_span_of(digits + 1, n - 1);
    return 0;
}

size_t lk_cache_key_merge_tags(lk_span *names, lk_span *values, size_t n, lk_arena *arena)
{
    lk_spanset seen;
    size_t i, kept = 0, first;
    lk_spanset_init(&seen, arena, n);
    for (i = 0; i < n; i++) {
        if (lk_spanset_insert(&seen, names[i], kept, &first)) {
            values[first] = values[i];
            continue;
        }
        names[kept] = names[i];
        values[kept] = values[i];
        kept++;
    }
    return kept;
}

#include "lk_object_key.h"

#include "lk_utf8.h"

#include <stdio.h>

#define LK_KV_RANK_MAX 0xFFFFFFFFLL

static const char LK_HEXCHARS[] = "0123456789abcdef";
static const char LK_FS_EXT[] = ".data";
static const char LK_SEP_ESCAPE[] = "-SEP-";

static int lk_has_any(lk_span s, const char *bytes, size_t nbytes)
{
    size_t i;
    for (i = 0; i < nbytes; i++)
        if (s.n != 0 && memchr(s.p, bytes[i], s.n) != NULL)
            return 1;
    return 0;
}

int lk_object_key_make(const lk_object_key_input *in, lk_object_key *out, lk_err *err)
{
    static const char model_forbidden[2] = {'@', '\0'};
    static const char salt_forbidden[4] = {'@', '/', '\\', '\0'};
    if (lk_has_any(in->model_name, model_forbidden, 2))
        return lk_fail(err, LK_KEY_INVARIANT, "model_name must not contain '@' or NUL");
    if (!lk_utf8_valid(in->model_name) || !lk_utf8_valid(in->cache_salt))
        return lk_fail(err, LK_KEY_INVARIANT, "model_name and cache_salt must be UTF-8 text");
    if (!lk_int_in(in->kv_rank, 0, LK_KV_RANK_MAX))
        return lk_fail(err, LK_KEY_INVARIANT, "kv_rank must be in 0..2**32-1");
    if (in->object_group_id.big < 0 || (in->object_group_id.big == 0 && in->object_group_id.v < 0))
        return lk_fail(err, LK_KEY_INVARIANT, "object_group_id must be >= 0");
    if (in->object_group_id.big > 0)
        return lk_fail(err, LK_KEY_INVARIANT, "object_group_id above 2**63-1 is not supported");
    if (lk_has_any(in->cache_salt, salt_forbidden, 4))
        return lk_fail(err, LK_KEY_INVARIANT, "cache_salt must not contain '@', '/', '\\' "
                       "or NUL");
    if (lk_utf8_chars(in->cache_salt) > LK_SALT_MAX_CHARS)
        return lk_fail(err, LK_KEY_INVARIANT, "cache_salt exceeds %d characters",
                       LK_SALT_MAX_CHARS);
    out->chunk_hash = in->chunk_hash;
    out->model_name = in->model_name;
    out->kv_rank = in->kv_rank.v;
    out->object_group_id = in->object_group_id.v;
    out->cache_salt = in->cache_salt;
    return 0;
}

int lk_kv_rank(lk_int world_size, lk_int global_rank, lk_int local_world_size,
               lk_int local_rank, int64_t *out, lk_err *err)
{
    const lk_int fields[4] = {world_size, global_rank, local_world_size, local_rank};
    static const char *const names[4] = {"world_size", "global_rank", "local_world_size",
                                         "local_rank"};
    int i;
    *out = 0;
    for (i = 0; i < 4; i++) {
        if (!lk_int_in(fields[i], 0, 255))
            return lk_fail(err, LK_KVRANK_FIELD, "%s is outside 0..255", names[i]);
        *out = (*out << 8) | fields[i].v;
    }
    return 0;
}

lk_span lk_hex_of(lk_span bytes, lk_arena *arena)
{
    uint8_t *p = lk_arena_array(arena, bytes.n, 2);
    size_t i;
    for (i = 0; i < bytes.n; i++) {
        p[2 * i] = (uint8_t)LK_HEXCHARS[bytes.p[i] >> 4];
        p[2 * i + 1] = (uint8_t)LK_HEXCHARS[bytes.p[i] & 15];
    }
    return lk_span_of(p, 2 * bytes.n);
}

/* "<model>@<rank: prefix + 8 hex>@<group hex>@<hash hex>[@<salt>]" into the arena. */
static lk_span lk_render(lk_span model, const char *rank_prefix, const lk_object_key *key,
                         const char *suffix, lk_arena *arena)
{
    size_t size = model.n + strlen(rank_prefix) + 8 + 16 + 2 * key->chunk_hash.n +
                  key->cache_salt.n + strlen(suffix) + 4;
    char *p = lk_arena_alloc(arena, size + 1);
    size_t off = 0, i;
    memcpy(p, model.p, model.n);
    off = model.n;
    off += (size_t)sprintf(p + off, "@%s%08lx@%llx@", rank_prefix, (unsigned long)key->kv_rank,
                           (unsigned long long)key->object_group_id);
    for (i = 0; i < key->chunk_hash.n; i++) {
        p[off++] = LK_HEXCHARS[key->chunk_hash.p[i] >> 4];
        p[off++] = LK_HEXCHARS[key->chunk_hash.p[i] & 15];
    }
    if (key->cache_salt.n) {
        p[off++] = '@';
        memcpy(p + off, key->cache_salt.p, key->cache_salt.n);
        off += key->cache_salt.n;
    }
    memcpy(p + off, suffix, strlen(suffix));
    off += strlen(suffix);
    return lk_span_of(p, off);
}

int lk_object_key_to_string(const lk_object_key *key, lk_arena *arena, lk_span *out)
{
    *out = lk_render(key->model_name, "", key, "", arena);
    return 0;
}

static int lk_hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* KEY-HEX-CANONICAL: even-length lowercase hex -> bytes (into the arena). */
int lk_read_chunk_hash(lk_span hex, lk_arena *arena, lk_span *out, lk_err *err)
{
    uint8_t *p;
    size_t i;
    if (hex.n % 2 != 0)
        return lk_fail(err, LK_KEY_MALFORMED, "chunk hash hex has an odd length");
    p = lk_arena_alloc(arena, hex.n / 2);
    for (i = 0; i < hex.n; i += 2) {
        int hi = lk_hexval(hex.p[i]), lo = lk_hexval(hex.p[i + 1]);
        if (hi < 0 || lo < 0)
            return lk_fail(err, LK_KEY_MALFORMED, "chunk hash is not lowercase hex");
        p[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    *out = lk_span_of(p, hex.n / 2);
    return 0;
}

/* group = "0" / nonzerohex *hexlow; values above int64 are refused. */
static int lk_read_group(lk_span s, int64_t *out, lk_err *err)
{
    size_t i;
    uint64_t v = 0;
    if (s.n == 0 || (s.p[0] == '0' && s.n > 1))
        return lk_fail(err, LK_KEY_MALFORMED, "bad object group id");
    for (i = 0; i < s.n; i++) {
        int d = lk_hexval(s.p[i]);
        if (d < 0)
            return lk_fail(err, LK_KEY_MALFORMED, "bad object group id");
        if (v > ((uint64_t)INT64_MAX - (uint64_t)d) / 16)
            return lk_fail(err, LK_KEY_INVARIANT, "object group id above 2**63-1");
        v = v * 16 + (uint64_t)d;
    }
    *out = (int64_t)v;
    return 0;
}

/* rank8 = 8 hexlow */
static int lk_read_rank(lk_span s, int64_t *out, lk_err *err)
{
    size_t i;
    int64_t v = 0;
    if (s.n != 8)
        return lk_fail(err, LK_KEY_MALFORMED, "kv_rank is not 8 hex digits");
    for (i = 0; i < 8; i++) {
        int d = lk_hexval(s.p[i]);
        if (d < 0)
            return lk_fail(err, LK_KEY_MALFORMED, "kv_rank is not lowercase hex");
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* Four '@' fields and an optional non-empty salt (KEY-SALT-FIELD). */
static int lk_split_fields(lk_span s, lk_span fields[5], lk_err *err)
{
    size_t i, start = 0, k = 0;
    for (i = 0; i <= s.n; i++) {
        if (i == s.n || s.p[i] == '@') {
            if (k == 5)
                return lk_fail(err, LK_KEY_MALFORMED, "more than 5 '@' fields");
            fields[k++] = lk_span_of(s.p + start, i - start);
            start = i + 1;
        }
    }
    if (k < 4)
        return lk_fail(err, LK_KEY_MALFORMED, "%lu '@' fields, needs 4 or 5", (unsigned long)k);
    if (k == 5 && fields[4].n == 0)
        return lk_fail(err, LK_KEY_MALFORMED, "empty cache_salt field");
    if (k == 4)
        fields[4] = lk_span_of(s.p + s.n, 0);
    return 0;
}

/* Parsed fields -> key, through the ObjectKey invariants. */
static int lk_finish(lk_span hash_hex, lk_span model, int64_t rank, int64_t group, lk_span salt,
                     lk_arena *arena, lk_object_key *out, lk_err *err)
{
    lk_object_key_input in;
    if (lk_read_chunk_hash(hash_hex, arena, &in.chunk_hash, err))
        return -1;
    in.model_name = model;
    in.kv_rank.v = rank;
    in.kv_rank.big = 0;
    in.object_group_id.v = group;
    in.object_group_id.big = 0;
    in.cache_salt = salt;
    return lk_object_key_make(&in, out, err);
}

int lk_object_key_from_string(lk_span name, lk_arena *arena, lk_object_key *out, lk_err *err)
{
    lk_span f[5];
    int64_t rank, group;
    if (lk_split_fields(name, f, err) || lk_read_rank(f[1], &rank, err) ||
        lk_read_group(f[2], &group, err))
        return -1;
    return lk_finish(f[3], f[0], rank, group, f[4], arena, out, err);
}

/* Python's str.replace: every non-overlapping `from`, left to right, becomes `to`. */
static lk_span lk_replace(lk_span s, const char *from, const char *to, lk_arena *arena)
{
    size_t nf = strlen(from), nt = strlen(to), i = 0, off = 0, hits = 0;
    uint8_t *p;
    for (i = 0; i + nf <= s.n;)
        if (memcmp(s.p + i, from, nf) == 0) {
            hits++;
            i += nf;
        } else {
            i++;
        }
    p = lk_arena_alloc(arena, s.n + hits * nt);
    for (i = 0; i < s.n;) {
        if (i + nf <= s.n && memcmp(s.p + i, from, nf) == 0) {
            memcpy(p + off, to, nt);
            off += nt;
            i += nf;
        } else {
            p[off++] = s.p[i++];
        }
    }
    return lk_span_of(p, off);
}

int lk_object_key_to_filename(const lk_object_key *key, lk_arena *arena, lk_span *out,
                              lk_err *err)
{
    lk_span safe = lk_replace(key->model_name, "/", LK_SEP_ESCAPE, arena);
    if (!lk_span_eq(lk_replace(safe, LK_SEP_ESCAPE, "/", arena), key->model_name))
        return lk_fail(err, LK_KEY_UNREPRESENTABLE, "model_name has no unambiguous FS "
                       "filename: its '/' -> '-SEP-' escape would read back as another model");
    *out = lk_render(safe, "0x", key, LK_FS_EXT, arena);
    if (!lk_utf8_valid(*out))
        return lk_fail(err, LK_KEY_UNREPRESENTABLE, "filename is not encodable as UTF-8");
    if (out->n > LK_NAME_MAX_BYTES)
        return lk_fail(err, LK_KEY_UNREPRESENTABLE, "filename is %lu bytes; NAME_MAX is %d",
                       (unsigned long)out->n, LK_NAME_MAX_BYTES);
    return 0;
}

int lk_object_key_from_filename(lk_span filename, lk_arena *arena, lk_object_key *out,
                                lk_err *err)
{
    size_t ext = strlen(LK_FS_EXT);
    lk_span f[5], stem;
    int64_t rank, group;
    if (filename.n < ext || memcmp(filename.p + filename.n - ext, LK_FS_EXT, ext) != 0)
        return lk_fail(err, LK_KEY_MALFORMED, "filename lacks '.data'");
    stem = lk_span_of(filename.p, filename.n - ext);
    if (lk_split_fields(stem, f, err))
        return -1;
    if (f[0].n != 0 && memchr(f[0].p, '/', f[0].n) != NULL)
        return lk_fail(err, LK_KEY_MALFORMED, "raw '/' in the model field");
    if (f[1].n < 2 || f[1].p[0] != '0' || f[1].p[1] != 'x')
        return lk_fail(err, LK_KEY_MALFORMED, "kv_rank lacks '0x'");
    if (lk_read_rank(lk_span_of(f[1].p + 2, f[1].n - 2), &rank, err) ||
        lk_read_group(f[2], &group, err))
        return -1;
    return lk_finish(f[3], lk_replace(f[0], LK_SEP_ESCAPE, "/", arena), rank, group, f[4],
                     arena, out, err);
}

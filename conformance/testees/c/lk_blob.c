#include "lk_blob.h"

#include "lk_crc32.h"
#include "lk_spanset.h"
#include "lk_utf8.h"

const uint8_t LK_CODEC_MAGIC[LK_MAGIC_LEN] = {'L', 'M', 'C', 'K', 'V', 1, 0, 1};

const char *const LK_HASH_NAMES[LK_NHASHES] = {
    "model_id", "model_revision_hash", "tokenizer_hash",
    "rope_config_hash", "attention_backend", "kv_layout",
};

#define LK_LENS_LEN 24 /* k, v, scale payload lengths */

/* a * b for a, b >= 0; returns 1 (and leaves *out alone) when the product exceeds int64. */
static int lk_mul_overflows(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > INT64_MAX / a)
        return 1;
    *out = a * b;
    return 0;
}

/* x % m for x >= 0 and m > 0 where m may be "larger than int64" (overflowed): then the
 * remainder is x itself. */
static int64_t lk_mod(int64_t x, int64_t m, int m_overflowed)
{
    return m_overflowed ? x : x % m;
}

static int lk_k_itemsize(uint16_t id)
{
    return (id == 1 || id == 2 || id == 3) ? 2 : 0; /* KV-K-DTYPE */
}

static int lk_scale_itemsize(uint16_t id)
{
    switch (id) { /* KV-SCALE-DTYPE: float16 (1, 2), bfloat16, float32, float64 */
    case 1:
    case 2:
    case 3:
        return 2;
    case 4:
        return 4;
    case 5:
        return 8;
    default:
        return 0;
    }
}

static int lk_check_ids(const lk_blob *b, const char *cls, lk_err *err)
{
    if (b->scale_scope > LK_EXTERNAL)
        return lk_fail(err, cls, "unknown scale_scope id %u", (unsigned)b->scale_scope);
    if (lk_k_itemsize(b->k_dtype_id) == 0)
        return lk_fail(err, cls, "k_dtype id %u is not float16 or bfloat16",
                       (unsigned)b->k_dtype_id);
    if (b->v_dtype_id != 7)
        return lk_fail(err, cls, "v_dtype id %u is not float8_e4m3fn (7)",
                       (unsigned)b->v_dtype_id);
    if (lk_scale_itemsize(b->scale_dtype_id) == 0)
        return lk_fail(err, cls, "scale_dtype id %u is not a float dtype of the table",
                       (unsigned)b->scale_dtype_id);
    if (b->scale_shape_n < 0 || b->scale_shape_n > LK_MAX_SCALE_DIMS)
        return lk_fail(err, cls, "scale_shape_n %lld is outside 0..8",
                       (long long)b->scale_shape_n);
    return 0;
}

/* KV-SCALE-SHAPE for PER_PAGE_HEAD: shape (P, H). */
static int lk_check_page_head(const lk_blob *b, int64_t elems, const char *cls, lk_err *err)
{
    int64_t pages = b->scale_shape[0], sheads = b->scale_shape[1], ph = 0, sd = 0, want;
    int ph_over, sd_over;
    if (b->kv_head_count > 0 && sheads != b->kv_head_count)
        return lk_fail(err, cls, "PER_PAGE_HEAD scale_shape heads %lld != kv_head_count %lld",
                       (long long)sheads, (long long)b->kv_head_count);
    ph_over = lk_mul_overflows(pages, sheads, &ph);
    if (elems != 0 && !ph_over && ph == 0)
        return lk_fail(err, cls, "PER_PAGE_HEAD blob with data but no pages or heads");
    if ((ph_over || ph != 0) && lk_mod(elems, ph, ph_over) != 0)
        return lk_fail(err, cls, "%lld elements do not split over the (pages, heads) scales",
                       (long long)elems);
    if (b->head_dim > 0 && sheads > 0) {
        int64_t tokens;
        sd_over = lk_mul_overflows(sheads, b->head_dim, &sd);
        if (lk_mod(elems, sd, sd_over) != 0)
            return lk_fail(err, cls, "%lld elements are not whole tokens of heads x head_dim",
                           (long long)elems);
        tokens = sd_over ? 0 : elems / sd;
        if (pages != 0 && tokens % pages != 0)
            return lk_fail(err, cls, "%lld tokens do not split into %lld pages",
                           (long long)tokens, (long long)pages);
        if (b->page_size > 0 &&
            (lk_mul_overflows(pages, b->page_size, &want) || tokens != want))
            return lk_fail(err, cls, "%lld tokens != %lld pages x page_size %lld",
                           (long long)tokens, (long long)pages, (long long)b->page_size);
    }
    return 0;
}

int lk_blob_check_consistency(const lk_blob *b, const char *cls, lk_err *err)
{
    static const char *const id_names[2] = {"layer_id", "chunk_id"};
    static const char *const geo_names[4] = {"chunk_size", "page_size", "kv_head_count",
                                             "head_dim"};
    const int64_t ids[2] = {b->layer_id, b->chunk_id};
    const int64_t geo[4] = {b->chunk_size, b->page_size, b->kv_head_count, b->head_dim};
    const int64_t lens[3] = {b->k_payload_len, b->v_payload_len, b->scale_payload_len};
    int64_t k_elems, scale_elems = 1, scale_bytes, hd;
    int scale_over = 0, i;

    if (lk_check_ids(b, cls, err))
        return -1;
    for (i = 0; i < 2; i++) /* KV-IDS */
        if (ids[i] < -1)
            return lk_fail(err, cls, "%s = %lld is below -1", id_names[i], (long long)ids[i]);
    for (i = 0; i < 4; i++) /* KV-GEOMETRY */
        if (geo[i] != -1 && geo[i] < 1)
            return lk_fail(err, cls, "%s = %lld: must be -1 (unset) or positive", geo_names[i],
                           (long long)geo[i]);
    for (i = 0; i < b->scale_shape_n; i++)
        if (b->scale_shape[i] < 0)
            return lk_fail(err, cls, "negative dimension %lld in scale_shape",
                           (long long)b->scale_shape[i]);
    { /* KV-LEN: the shapes built from these fields fit int64, even for an empty payload */
        int64_t prod = 1, hd_prod;
        for (i = 0; i < b->scale_shape_n; i++)
            if (b->scale_shape[i] != 0 && lk_mul_overflows(prod, b->scale_shape[i], &prod))
                return lk_fail(err, cls, "scale_shape overflows int64");
        if (b->kv_head_count > 0 && b->head_dim > 0 &&
            lk_mul_overflows(b->kv_head_count, b->head_dim, &hd_prod))
            return lk_fail(err, cls, "kv_head_count x head_dim overflows int64");
    }
    for (i = 0; i < 3; i++) /* KV-LEN */
        if (lens[i] < 0)
            return lk_fail(err, cls, "payload length %lld is negative", (long long)lens[i]);
    if (b->k_payload_len % 2 != 0)
        return lk_fail(err, cls, "k_payload_len %lld is not a whole number of 16-bit elements",
                       (long long)b->k_payload_len);
    /* KV-LEN, KV-K-ABSENT: K holds V's elements, or none (a K-less blob) */
    if (b->k_payload_len != 0 && b->v_payload_len == 0)
        return lk_fail(err, cls, "K holds elements but V none: only K may be absent");
    if (b->k_payload_len != 0 && b->k_payload_len / 2 != b->v_payload_len)
        return lk_fail(err, cls, "K holds %lld elements but V holds %lld",
                       (long long)(b->k_payload_len / 2), (long long)b->v_payload_len);
    k_elems = b->v_payload_len; /* the element count, of V (and of K when present) */
    for (i = 0; i < b->scale_shape_n; i++) {
        if (b->scale_shape[i] == 0) {
            scale_elems = 0;
            scale_over = 0;
            break;
        }
        if (!scale_over && lk_mul_overflows(scale_elems, b->scale_shape[i], &scale_elems))
            scale_over = 1;
    }
    if (scale_over ||
        lk_mul_overflows(scale_elems, lk_scale_itemsize(b->scale_dtype_id), &scale_bytes) ||
        scale_bytes != b->scale_payload_len)
        return lk_fail(err, cls, "scale_payload_len %lld does not match scale_shape and dtype",
                       (long long)b->scale_payload_len);
    if (b->kv_head_count > 0 && b->head_dim > 0) {
        int over = lk_mul_overflows(b->kv_head_count, b->head_dim, &hd);
        if (lk_mod(k_elems, hd, over) != 0)
            return lk_fail(err, cls, "%lld elements are not whole tokens of %lld heads x %lld",
                           (long long)k_elems, (long long)b->kv_head_count,
                           (long long)b->head_dim);
    }
    switch (b->scale_scope) { /* KV-SCALE-SHAPE */
    case LK_PER_TENSOR:
        if (b->scale_shape_n != 0)
            return lk_fail(err, cls, "PER_TENSOR scale_shape must be ()");
        break;
    case LK_PER_LAYER_HEAD:
        if (b->scale_shape_n != 1)
            return lk_fail(err, cls, "PER_LAYER_HEAD scale_shape must be (H,)");
        if (b->kv_head_count > 0 && b->scale_shape[0] != b->kv_head_count)
            return lk_fail(err, cls, "PER_LAYER_HEAD scale_shape disagrees with kv_head_count");
        if (k_elems != 0 && b->scale_shape[0] == 0)
            return lk_fail(err, cls, "PER_LAYER_HEAD blob with data but zero heads");
        if (b->scale_shape[0] != 0 && k_elems % b->scale_shape[0] != 0)
            return lk_fail(err, cls, "%lld elements do not split over %lld heads",
                           (long long)k_elems, (long long)b->scale_shape[0]);
        break;
    case LK_PER_PAGE_HEAD:
        if (b->scale_shape_n != 2)
            return lk_fail(err, cls, "PER_PAGE_HEAD scale_shape must be (n_pages, H)");
        return lk_check_page_head(b, k_elems, cls, err);
    default: /* EXTERNAL: any shape (Q-EXTERNAL) */
        break;
    }
    return 0;
}

/* A u16-length-prefixed string at *off (KV-HASHES). */
static int lk_read_string(const uint8_t *buf, size_t len, size_t *off, lk_span *out,
                          const char *what, lk_err *err)
{
    size_t n;
    if (len - *off < 2)
        return lk_fail(err, LK_CORRUPT, "truncated %s length at offset %lu", what,
                       (unsigned long)*off);
    n = lk_rd_u16(buf + *off);
    *off += 2;
    if (len - *off < n)
        return lk_fail(err, LK_CORRUPT, "%s at offset %lu declares %lu bytes, %lu remain", what,
                       (unsigned long)*off, (unsigned long)n, (unsigned long)(len - *off));
    *out = lk_span_of(buf + *off, n);
    *off += n;
    if (!lk_utf8_valid(*out))
        return lk_fail(err, LK_CORRUPT, "%s is not UTF-8", what);
    return 0;
}

/* The hash section: u16 count, then pairs; duplicate keys are found in linear time. */
static int lk_read_hashes(const uint8_t *buf, size_t len, size_t *off, lk_arena *arena,
                          lk_blob *b, lk_err *err)
{
    size_t count, i, j, first;
    lk_spanset seen;
    if (len - *off < 2)
        return lk_fail(err, LK_CORRUPT, "truncated hash count at offset %lu",
                       (unsigned long)*off);
    count = lk_rd_u16(buf + *off);
    *off += 2;
    /* every pair takes at least 4 bytes: refuse early, before sizing anything by count */
    if (count > (len - *off) / 4)
        return lk_fail(err, LK_CORRUPT, "%lu hash pairs cannot fit in %lu bytes",
                       (unsigned long)count, (unsigned long)(len - *off));
    lk_spanset_init(&seen, arena, count);
    b->canonical = count == LK_NHASHES;
    for (i = 0; i < count; i++) {
        lk_span key, value;
        if (lk_read_string(buf, len, off, &key, "hash key", err) ||
            lk_read_string(buf, len, off, &value, "hash value", err))
            return -1;
        if (lk_spanset_insert(&seen, key, i, &first))
            return lk_fail(err, LK_CORRUPT, "hash key of pair %lu repeats pair %lu",
                           (unsigned long)i, (unsigned long)first);
        if (i >= LK_NHASHES || !lk_span_eq_cstr(key, LK_HASH_NAMES[i]))
            b->canonical = 0;
        for (j = 0; j < LK_NHASHES; j++)
            if (lk_span_eq_cstr(key, LK_HASH_NAMES[j]))
                b->hashes[j] = value;
    }
    return 0;
}

int lk_blob_parse(const uint8_t *buf, size_t len, int allow_trailing, lk_arena *arena,
                  lk_blob *out, lk_err *err)
{
    size_t off, remain, i;
    const int64_t *lens;
    memset(out, 0, sizeof *out);
    if (len < LK_FIXED_HEADER_LEN) /* KV-TRUNCATED */
        return lk_fail(err, LK_CORRUPT, "truncated fixed header: %lu of %d bytes",
                       (unsigned long)len, LK_FIXED_HEADER_LEN);
    if (memcmp(buf, LK_CODEC_MAGIC, LK_MAGIC_LEN) != 0) /* KV-MAGIC */
        return lk_fail(err, LK_CORRUPT, "bad magic");
    if (lk_rd_u16(buf + 8) != 1) /* KV-VERSION */
        return lk_fail(err, LK_CORRUPT, "unsupported header version %u",
                       (unsigned)lk_rd_u16(buf + 8));
    out->scale_scope = lk_rd_u16(buf + 10);
    out->k_dtype_id = lk_rd_u16(buf + 12);
    out->v_dtype_id = lk_rd_u16(buf + 14);
    out->scale_dtype_id = lk_rd_u16(buf + 16);
    if (lk_rd_u16(buf + 18) != 0) /* KV-RESERVED */
        return lk_fail(err, LK_CORRUPT, "reserved field is %u, must be 0",
                       (unsigned)lk_rd_u16(buf + 18));
    out->layer_id = lk_rd_i64(buf + 20);
    out->chunk_id = lk_rd_i64(buf + 28);
    out->chunk_size = lk_rd_i64(buf + 36);
    out->page_size = lk_rd_i64(buf + 44);
    out->kv_head_count = lk_rd_i64(buf + 52);
    out->head_dim = lk_rd_i64(buf + 60);
    out->scale_shape_n = lk_rd_i64(buf + 68);
    if (lk_check_ids(out, LK_CORRUPT, err)) /* scope, dtypes, KV-SCALE-SHAPE-N */
        return -1;
    off = LK_FIXED_HEADER_LEN;
    if (len - off < 8 * (size_t)out->scale_shape_n + LK_LENS_LEN)
        return lk_fail(err, LK_CORRUPT, "truncated scale_shape or payload lengths");
    for (i = 0; i < (size_t)out->scale_shape_n; i++, off += 8)
        out->scale_shape[i] = lk_rd_i64(buf + off);
    out->k_payload_len = lk_rd_i64(buf + off);
    out->v_payload_len = lk_rd_i64(buf + off + 8);
    out->scale_payload_len = lk_rd_i64(buf + off + 16);
    off += LK_LENS_LEN;
    if (lk_read_hashes(buf, len, &off, arena, out, err))
        return -1;
    if (len - off < 4)
        return lk_fail(err, LK_CORRUPT, "truncated payload CRC at offset %lu",
                       (unsigned long)off);
    out->payload_crc32 = lk_rd_u32(buf + off);
    off += 4;
    out->header_len = off;
    out->canonical = out->canonical && out->k_dtype_id != 1 && out->scale_dtype_id != 1;
    if (lk_blob_check_consistency(out, LK_CORRUPT, err))
        return -1;
    /* KV-LEN-SUM, KV-TRAILING: each length is >= 0 now; subtract without overflow */
    remain = len - off;
    lens = &out->k_payload_len;
    for (i = 0; i < 3; i++) {
        if ((uint64_t)lens[i] > (uint64_t)remain)
            return lk_fail(err, LK_CORRUPT, "payload truncated: buffer holds %lu bytes",
                           (unsigned long)len);
        remain -= (size_t)lens[i];
    }
    if (remain != 0 && !allow_trailing)
        return lk_fail(err, LK_CORRUPT, "%lu bytes follow the payload", (unsigned long)remain);
    out->payload = lk_span_of(buf + off, len - off - remain);
    if (lk_crc32(out->payload.p, out->payload.n) != out->payload_crc32) /* KV-CRC */
        return lk_fail(err, LK_CORRUPT, "payload CRC-32 mismatch");
    return 0;
}

int lk_blob_serialize_header(const lk_blob *b, lk_arena *arena, lk_span *out, lk_err *err)
{
    size_t size, off, i;
    uint8_t *p;
    uint64_t payload_len;
    if (lk_blob_check_consistency(b, LK_UNSUPPORTED, err)) /* KV-ENCODE-REFUSE */
        return -1;
    payload_len = (uint64_t)b->k_payload_len + (uint64_t)b->v_payload_len +
                  (uint64_t)b->scale_payload_len;
    if (payload_len != (uint64_t)b->payload.n)
        return lk_fail(err, LK_UNSUPPORTED, "payload is %lu bytes, the lengths declare more",
                       (unsigned long)b->payload.n);
    size = LK_FIXED_HEADER_LEN + 8 * (size_t)b->scale_shape_n + LK_LENS_LEN + 2 + 4;
    for (i = 0; i < LK_NHASHES; i++) {
        if (b->hashes[i].n > 0xFFFF || !lk_utf8_valid(b->hashes[i]))
            return lk_fail(err, LK_UNSUPPORTED, "hash %s is over 65535 bytes or not UTF-8",
                           LK_HASH_NAMES[i]);
        size += 4 + strlen(LK_HASH_NAMES[i]) + b->hashes[i].n;
    }
    p = lk_arena_alloc(arena, size);
    memcpy(p, LK_CODEC_MAGIC, LK_MAGIC_LEN);
    lk_wr_u16(p + 8, 1);
    lk_wr_u16(p + 10, b->scale_scope);
    lk_wr_u16(p + 12, b->k_dtype_id == 1 ? 2 : b->k_dtype_id); /* KV-DTYPE-ALIAS */
    lk_wr_u16(p + 14, b->v_dtype_id);
    lk_wr_u16(p + 16, b->scale_dtype_id == 1 ? 2 : b->scale_dtype_id);
    lk_wr_u16(p + 18, 0);
    lk_wr_i64(p + 20, b->layer_id);
    lk_wr_i64(p + 28, b->chunk_id);
    lk_wr_i64(p + 36, b->chunk_size);
    lk_wr_i64(p + 44, b->page_size);
    lk_wr_i64(p + 52, b->kv_head_count);
    lk_wr_i64(p + 60, b->head_dim);
    lk_wr_i64(p + 68, b->scale_shape_n);
    off = LK_FIXED_HEADER_LEN;
    for (i = 0; i < (size_t)b->scale_shape_n; i++, off += 8)
        lk_wr_i64(p + off, b->scale_shape[i]);
    lk_wr_i64(p + off, b->k_payload_len);
    lk_wr_i64(p + off + 8, b->v_payload_len);
    lk_wr_i64(p + off + 16, b->scale_payload_len);
    off += LK_LENS_LEN;
    lk_wr_u16(p + off, LK_NHASHES);
    off += 2;
    for (i = 0; i < LK_NHASHES; i++) {
        size_t name_len = strlen(LK_HASH_NAMES[i]);
        lk_wr_u16(p + off, (uint16_t)name_len);
        memcpy(p + off + 2, LK_HASH_NAMES[i], name_len);
        off += 2 + name_len;
        lk_wr_u16(p + off, (uint16_t)b->hashes[i].n);
        if (b->hashes[i].n)
            memcpy(p + off + 2, b->hashes[i].p, b->hashes[i].n);
        off += 2 + b->hashes[i].n;
    }
    lk_wr_u32(p + off, lk_crc32(b->payload.p, b->payload.n));
    *out = lk_span_of(p, size);
    return 0;
}

int lk_blob_check_roundtrip(const lk_blob *b, const uint8_t *buf, lk_arena *arena,
                            lk_err *err)
{
    lk_span header;
    lk_blob again;
    uint8_t *whole;
    size_t i;
    if (lk_blob_serialize_header(b, arena, &header, err))
        return -1;
    if (b->canonical && (header.n != b->header_len || memcmp(header.p, buf, header.n) != 0))
        return lk_fail(err, LK_UNSUPPORTED, "self-check: a canonical header re-serializes to "
                       "other bytes");
    whole = lk_arena_alloc(arena, header.n + b->payload.n);
    memcpy(whole, header.p, header.n);
    if (b->payload.n)
        memcpy(whole + header.n, b->payload.p, b->payload.n);
    if (lk_blob_parse(whole, header.n + b->payload.n, 0, arena, &again, err))
        return -1;
    for (i = 0; i < LK_NHASHES; i++)
        if (!lk_span_eq(again.hashes[i], b->hashes[i]))
            return lk_fail(err, LK_UNSUPPORTED, "self-check: hash %s changes on re-reading",
                           LK_HASH_NAMES[i]);
    if (again.scale_scope != b->scale_scope || again.layer_id != b->layer_id ||
        again.chunk_id != b->chunk_id || again.chunk_size != b->chunk_size ||
        again.page_size != b->page_size || again.kv_head_count != b->kv_head_count ||
        again.head_dim != b->head_dim || again.scale_shape_n != b->scale_shape_n ||
        memcmp(again.scale_shape, b->scale_shape, sizeof b->scale_shape) != 0 ||
        again.k_payload_len != b->k_payload_len || again.v_payload_len != b->v_payload_len ||
        again.scale_payload_len != b->scale_payload_len || again.v_dtype_id != b->v_dtype_id ||
        lk_k_itemsize(again.k_dtype_id) != lk_k_itemsize(b->k_dtype_id) ||
        lk_scale_itemsize(again.scale_dtype_id) != lk_scale_itemsize(b->scale_dtype_id))
        return lk_fail(err, LK_UNSUPPORTED, "self-check: header fields change on re-reading");
    return 0;
}

int lk_blob_hash_gate(const lk_blob *b, const lk_span expected[LK_NHASHES], lk_err *err)
{
    size_t i;
    for (i = 0; i < LK_NHASHES; i++) {
        if (expected[i].p == NULL || expected[i].n == 0 || b->hashes[i].n == 0)
            continue;
        if (!lk_span_eq(expected[i], b->hashes[i]))
            return lk_fail(err, LK_MISMATCH, "hash %s differs from the expected value",
                           LK_HASH_NAMES[i]);
    }
    return 0;
}

int lk_blob_logical_shape(const lk_blob *b, int64_t shape[4], int *rank, lk_err *err)
{
    lk_span layout = b->hashes[LK_NHASHES - 1];
    int head_major, hd_over;
    int64_t elems = b->v_payload_len, heads = b->kv_head_count, dim = b->head_dim;
    int64_t hd = 0, tokens, pages = 0;
    if (layout.n == 0 || lk_span_eq_cstr(layout, "NHD"))
        head_major = 0;
    else if (lk_span_eq_cstr(layout, "HND"))
        head_major = 1;
    else
        return lk_fail(err, LK_UNSUPPORTED, "kv_layout is not NHD or HND");
    if (heads <= 0 &&
        (b->scale_scope == LK_PER_LAYER_HEAD || b->scale_scope == LK_PER_PAGE_HEAD))
        heads = b->scale_shape[b->scale_shape_n - 1];
    /* H x D may exceed int64 only when there are no elements: then tokens = 0 */
    hd_over = heads > 0 && dim > 0 ? lk_mul_overflows(heads, dim, &hd) : 0;
    if (heads <= 0 || dim <= 0 || lk_mod(elems, hd, hd_over) != 0) {
        *rank = 1;
        shape[0] = elems;
        return 0;
    }
    tokens = hd_over ? 0 : elems / hd;
    if (b->scale_scope == LK_PER_PAGE_HEAD && b->scale_shape[0] > 0)
        pages = b->scale_shape[0];
    else if (b->page_size > 0 && tokens % b->page_size == 0)
        pages = tokens / b->page_size;
    if (pages == 0) {
        *rank = 3;
        shape[0] = head_major ? heads : tokens;
        shape[1] = head_major ? tokens : heads;
        shape[2] = dim;
        return 0;
    }
    *rank = 4;
    shape[0] = pages;
    shape[1] = head_major ? heads : tokens / pages;
    shape[2] = head_major ? tokens / pages : heads;
    shape[3] = dim;
    return 0;
}

void lk_blob_logical_axes(const lk_blob *b, int rank, int *head, int *page)
{
    int head_major = lk_span_eq_cstr(b->hashes[LK_NHASHES - 1], "HND");
    *head = rank == 4 ? (head_major ? 1 : 2) : rank == 3 ? (head_major ? 0 : 1) : -1;
    *page = rank == 4 ? 0 : -1;
}

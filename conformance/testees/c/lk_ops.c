#include "lk_ops.h"

#include "lk_blob.h"
#include "lk_cache_key.h"
#include "lk_object_key.h"
#include "lk_proto.h"
#include "lk_quant.h"

#include <stdio.h>
#include <stdlib.h>

static void lk_ok(lk_jwriter *w)
{
    lk_jw_key(w, "ok");
    lk_jw_bool(w, 1);
}

static void lk_field_int(lk_jwriter *w, const char *name, int64_t v)
{
    lk_jw_key(w, name);
    lk_jw_int(w, v);
}

static void lk_field_hex(lk_jwriter *w, const char *name, lk_span s)
{
    lk_jw_key(w, name);
    lk_jw_hex(w, s);
}

static void lk_field_name(lk_jwriter *w, const char *name, const char *value)
{
    lk_jw_key(w, name);
    if (value == NULL)
        lk_jw_null(w);
    else
        lk_jw_cstr(w, value);
}

static void lk_field_ints64(lk_jwriter *w, const char *name, const int64_t *v, size_t n)
{
    size_t i;
    lk_jw_key(w, name);
    lk_jw_raw(w, "[");
    for (i = 0; i < n; i++) {
        if (i)
            lk_jw_raw(w, ",");
        lk_jw_int(w, v[i]);
    }
    lk_jw_raw(w, "]");
}

static void lk_field_shape(lk_jwriter *w, const char *name, const lk_shape *s)
{
    int64_t dims[LK_SHAPE_SLOTS];
    int i;
    for (i = 0; i < s->rank; i++)
        dims[i] = s->dims[i];
    lk_field_ints64(w, name, dims, (size_t)s->rank);
}

static void lk_field_hex_list(lk_jwriter *w, const char *name, const lk_span *items, size_t n)
{
    size_t i;
    lk_jw_key(w, name);
    lk_jw_raw(w, "\"");
    for (i = 0; i < n; i++) {
        if (i)
            lk_jw_raw(w, ",");
        lk_jw_hex_part(w, items[i]);
    }
    lk_jw_raw(w, "\"");
}

static const char *lk_dtype_name_of(int64_t id)
{
    int is_none;
    const lk_dtype *d = lk_dtype_from_id(id, &is_none);
    return d == NULL ? NULL : d->name;
}

/* -- codec ------------------------------------------------------------------------------- */

/* Parse the request's blob, then check this implementation's writer against its reader
 * (lk_blob_check_roundtrip): a difference is a bug here, reported on stderr and by abort(),
 * so that the suite and the fuzzer see it as a crash instead of a wrong answer. */
static int lk_parse_blob(const lk_request *r, int allow_trailing, lk_blob *b, lk_err *err)
{
    lk_span blob;
    lk_err self;
    if (lk_req_hex(r, "blob", 1, &blob, err) ||
        lk_blob_parse(blob.p, blob.n, allow_trailing, r->arena, b, err))
        return -1;
    if (lk_blob_check_roundtrip(b, blob.p, r->arena, &self)) {
        fprintf(stderr, "lmckv-testee: %s\n", self.msg);
        abort();
    }
    return 0;
}

static int op_codec_parse(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    static const char *const lens_names[3] = {"k_payload_len", "v_payload_len",
                                              "scale_payload_len"};
    static const char *const geo_names[6] = {"layer_id", "chunk_id", "chunk_size",
                                             "page_size", "kv_head_count", "head_dim"};
    lk_span expected[LK_NHASHES];
    char field[64];
    int allow_trailing, i, any = 0;
    lk_blob b;
    if (lk_req_bool(r, "allow_trailing", 0, &allow_trailing, err))
        return -1;
    for (i = 0; i < LK_NHASHES; i++) {
        sprintf(field, "expect_%s", LK_HASH_NAMES[i]);
        if (lk_req_hex(r, field, 0, &expected[i], err))
            return -1;
        any |= expected[i].p != NULL;
    }
    if (lk_parse_blob(r, allow_trailing, &b, err) ||
        (any && lk_blob_hash_gate(&b, expected, err)))
        return -1;
    lk_ok(w);
    lk_field_int(w, "scale_scope", b.scale_scope);
    lk_field_name(w, "k_dtype", lk_dtype_name_of(b.k_dtype_id));
    lk_field_name(w, "v_dtype", lk_dtype_name_of(b.v_dtype_id));
    lk_field_name(w, "scale_dtype", lk_dtype_name_of(b.scale_dtype_id));
    lk_field_ints64(w, "scale_shape", b.scale_shape, (size_t)b.scale_shape_n);
    lk_field_int(w, "header_len", (int64_t)b.header_len);
    for (i = 0; i < 6; i++)
        lk_field_int(w, geo_names[i], (&b.layer_id)[i]);
    for (i = 0; i < 3; i++)
        lk_field_int(w, lens_names[i], (&b.k_payload_len)[i]);
    for (i = 0; i < LK_NHASHES; i++)
        lk_field_hex(w, LK_HASH_NAMES[i], b.hashes[i]);
    return 0;
}

/* The dequantization output a codec.decode request names: 16-bit formats, float32 (out
 * NULL, 4 bytes) or float64 (8 bytes); 0 for any other name. */
static int lk_dequant_out(lk_span name, const lk_fmt **fmt)
{
    *fmt = NULL;
    if (lk_span_eq_cstr(name, "float16"))
        *fmt = &LK_FLOAT16;
    else if (lk_span_eq_cstr(name, "bfloat16"))
        *fmt = &LK_BFLOAT16;
    else if (lk_span_eq_cstr(name, "float32"))
        return 4;
    else if (lk_span_eq_cstr(name, "float64"))
        return 8;
    return *fmt != NULL ? 2 : 0;
}

/* The scale map that pairs a parsed blob's stored scales with V in its logical shape
 * (KV-LOGICAL-SHAPE), for Q-DEQUANT in every scope. */
static int lk_blob_scale_map(const lk_blob *b, const int64_t *shape, int rank,
                             lk_scale_map *m, lk_err *err)
{
    int head, page;
    lk_blob_logical_axes(b, rank, &head, &page);
    if (lk_shape_init(m, shape, rank, err))
        return -1;
    if (b->scale_scope == LK_EXTERNAL) {
        if (b->scale_payload_len == 0)
            return lk_fail(err, LK_UNSUPPORTED, "EXTERNAL blob stores no scales");
        return lk_broadcast_map(m, b->scale_shape, (int)b->scale_shape_n, err);
    }
    if (b->scale_scope == LK_PER_TENSOR)
        return lk_scope_map(m, b->scale_scope, 0, 0, err);
    if (head < 0 || (b->scale_scope == LK_PER_PAGE_HEAD && page < 0))
        return lk_fail(err, LK_UNSUPPORTED, "the header gives no head or page axis to "
                       "dequantize by (kv_head_count, head_dim or pages unknown)");
    if (lk_scope_map(m, b->scale_scope, head, page, err))
        return -1;
    if (m->scale_shape[0] != b->scale_shape[0] ||
        (m->scale_n == 2 && m->scale_shape[1] != b->scale_shape[1]))
        return lk_fail(err, LK_UNSUPPORTED, "the stored scales do not fit V's groups");
    return 0;
}

static int op_codec_decode(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_span out_v, v_out;
    lk_blob b;
    int64_t shape[4];
    int rank, out_size = 1;
    size_t k_len, v_len;
    const lk_fmt *out_fmt = NULL;
    if (lk_req_name(r, "out_v_dtype", 0, &out_v, err) || lk_parse_blob(r, 0, &b, err) ||
        lk_blob_logical_shape(&b, shape, &rank, err))
        return -1;
    k_len = (size_t)b.k_payload_len;
    v_len = (size_t)b.v_payload_len;
    v_out = lk_span_of(b.payload.p + k_len, v_len);
    if (out_v.p == NULL || lk_span_eq_cstr(out_v, "float8_e4m3fn")) {
        out_v = lk_cstr("float8_e4m3fn");
    } else { /* Q-DEQUANT */
        lk_scale_map m;
        const uint8_t *stored = b.payload.p + k_len + v_len;
        float *scales;
        uint8_t *dst;
        out_size = lk_dequant_out(out_v, &out_fmt);
        if (out_size == 0)
            return lk_fail(err, LK_UNSUPPORTED, "cannot dequantize into that dtype");
        dst = lk_arena_array(r->arena, v_len, (size_t)out_size);
        if (v_len != 0) {
            if (lk_blob_scale_map(&b, shape, rank, &m, err))
                return -1;
            scales = lk_arena_array(r->arena, (size_t)m.groups, sizeof *scales);
            lk_load_scales(stored, m.groups, b.scale_dtype_id, scales);
            lk_dequantize(&m, b.payload.p + k_len, scales, out_fmt, out_size, dst);
        }
        v_out = lk_span_of(dst, v_len * (size_t)out_size);
    }
    lk_ok(w);
    lk_field_hex(w, "k", lk_span_of(b.payload.p, k_len));
    lk_field_name(w, "k_dtype", lk_dtype_name_of(b.k_dtype_id));
    if (k_len == 0 && v_len != 0) { /* KV-K-ABSENT: no K, an empty 1-D K */
        int64_t none = 0;
        lk_field_ints64(w, "k_shape", &none, 1);
    } else {
        lk_field_ints64(w, "k_shape", shape, (size_t)rank);
    }
    lk_field_hex(w, "v", v_out);
    lk_jw_key(w, "v_dtype");
    lk_jw_str(w, out_v);
    lk_field_ints64(w, "v_shape", shape, (size_t)rank);
    lk_field_hex(w, "scales", lk_span_of(b.payload.p + k_len + v_len, b.payload.n - k_len - v_len));
    lk_field_name(w, "scales_dtype", lk_dtype_name_of(b.scale_dtype_id));
    lk_field_ints64(w, "scales_shape", b.scale_shape, (size_t)b.scale_shape_n);
    return 0;
}

/* The encode request's fields, checked: dims of V, dtypes, scope and axes. */
typedef struct {
    lk_span k, v, v_scales;
    const lk_fmt *fmt;
    int k_dtype_id, scale_dtype_id, scope, head, page;
    int has_scales;
    int scale_n;
    int64_t scale_shape[LK_MAX_SCALE_DIMS];
    int64_t scale_count;
} lk_encode_in;

static int lk_scale_dtype_id(lk_span name)
{
    static const char *const names[4] = {"float32", "float16", "bfloat16", "float64"};
    static const int ids[4] = {4, 2, 3, 5};
    int i;
    if (name.p == NULL)
        return 4;
    for (i = 0; i < 4; i++)
        if (lk_span_eq_cstr(name, names[i]))
            return ids[i];
    return 0;
}

/* v_scales and scales_shape: float32 caller scales, at most 8 axes (KV-SCALE-SHAPE-N). */
static int lk_encode_scales_in(const lk_request *r, lk_encode_in *in, lk_err *err)
{
    lk_int_list dims;
    int j;
    if (lk_req_hex(r, "v_scales", 0, &in->v_scales, err) ||
        lk_req_ints(r, "scales_shape", 0, &dims, err))
        return -1;
    in->has_scales = in->v_scales.p != NULL;
    if (!in->has_scales)
        return 0;
    if (dims.n > LK_MAX_SCALE_DIMS)
        return lk_fail(err, LK_UNSUPPORTED, "scales have %lu axes, a blob holds 8",
                       (unsigned long)dims.n);
    in->scale_n = (int)dims.n;
    in->scale_count = 1;
    for (j = 0; j < in->scale_n; j++) {
        if (!lk_int_in(dims.items[j], 0, INT64_MAX))
            return lk_fail(err, LK_UNSUPPORTED, "scale dimension out of range");
        in->scale_shape[j] = dims.items[j].v;
        if (in->scale_count != 0 && in->scale_shape[j] > INT64_MAX / 4 / in->scale_count)
            return lk_fail(err, LK_UNSUPPORTED, "scales_shape holds too many scales");
        in->scale_count *= in->scale_shape[j];
    }
    if ((uint64_t)in->v_scales.n != 4 * (uint64_t)in->scale_count)
        return lk_fail(err, LK_UNSUPPORTED, "v_scales holds %lu bytes, scales_shape needs %lld",
                       (unsigned long)in->v_scales.n, (long long)(4 * in->scale_count));
    return 0;
}

static int lk_encode_in_read(const lk_request *r, lk_encode_in *in, lk_scale_map *m,
                             lk_err *err)
{
    lk_span dtype, scale_dtype;
    lk_int_list shape;
    lk_int scope, head_axis, page_axis;
    int has_page, i;
    int64_t dims[LK_MAX_RANK];
    memset(in, 0, sizeof *in);
    if (lk_req_hex(r, "k", 1, &in->k, err) || lk_req_hex(r, "v", 1, &in->v, err) ||
        lk_req_name(r, "dtype", 1, &dtype, err) || lk_req_ints(r, "shape", 1, &shape, err) ||
        lk_req_int(r, "scale_scope", 1, 0, &scope, NULL, err) ||
        lk_req_int(r, "head_axis", 0, -2, &head_axis, NULL, err) ||
        lk_req_int(r, "page_axis", 0, 0, &page_axis, &has_page, err) ||
        lk_req_name(r, "scale_dtype", 0, &scale_dtype, err) || lk_encode_scales_in(r, in, err))
        return -1;
    in->k_dtype_id = lk_span_eq_cstr(dtype, "float16") ? 2 : lk_span_eq_cstr(dtype, "bfloat16") ? 3 : 0;
    if (in->k_dtype_id == 0) /* KV-K-DTYPE */
        return lk_fail(err, LK_UNSUPPORTED, "K and V must be float16 or bfloat16");
    in->fmt = in->k_dtype_id == 2 ? &LK_FLOAT16 : &LK_BFLOAT16;
    in->scale_dtype_id = lk_scale_dtype_id(scale_dtype);
    if (in->scale_dtype_id == 0) /* KV-SCALE-DTYPE */
        return lk_fail(err, LK_UNSUPPORTED, "scale_dtype must be float32, float16, bfloat16 "
                       "or float64");
    if (!lk_int_in(scope, 0, LK_EXTERNAL)) /* KV-SCOPE */
        return lk_fail(err, LK_UNSUPPORTED, "unknown scale scope");
    in->scope = (int)scope.v;
    if (shape.n > LK_MAX_RANK)
        return lk_fail(err, LK_UNSUPPORTED, "V has more than %d axes", LK_MAX_RANK);
    for (i = 0; i < (int)shape.n; i++) {
        if (!lk_int_in(shape.items[i], 0, INT64_MAX))
            return lk_fail(err, LK_UNSUPPORTED, "shape dimension out of range");
        dims[i] = shape.items[i].v;
    }
    if (lk_shape_init(m, dims, (int)shape.n, err))
        return -1;
    if ((uint64_t)m->n > (uint64_t)in->k.n / 2 || (uint64_t)in->k.n != 2 * (uint64_t)m->n ||
        in->v.n != in->k.n)
        return lk_fail(err, LK_UNSUPPORTED, "k and v must hold 2 bytes per element of shape");
    if (in->scope == LK_PER_LAYER_HEAD || in->scope == LK_PER_PAGE_HEAD) {
        if (!lk_int_in(head_axis, INT64_MIN, INT64_MAX) ||
            lk_norm_axis(head_axis.v, m->rank, &in->head, err))
            return lk_fail(err, LK_UNSUPPORTED, "head_axis is out of range");
    }
    if (in->scope == LK_PER_PAGE_HEAD) {
        if (!has_page)
            return lk_fail(err, LK_UNSUPPORTED, "PER_PAGE_HEAD needs page_axis");
        if (!lk_int_in(page_axis, INT64_MIN, INT64_MAX) ||
            lk_norm_axis(page_axis.v, m->rank, &in->page, err))
            return lk_fail(err, LK_UNSUPPORTED, "page_axis is out of range");
        if (in->page == in->head)
            return lk_fail(err, LK_UNSUPPORTED, "page_axis and head_axis are the same axis");
    }
    return 0;
}

/* The scale map and the scales to quantize with, before their conversion to scale_dtype:
 * the caller's (static or EXTERNAL scales, Q-EXTERNAL) or Q-SCALE's. */
static int lk_encode_scales(const lk_request *r, lk_encode_in *in, lk_scale_map *m,
                            float **scales, lk_err *err)
{
    int64_t i;
    if (in->scope == LK_EXTERNAL) {
        if (!in->has_scales)
            return lk_fail(err, LK_UNSUPPORTED, "EXTERNAL scope needs v_scales");
        if (lk_broadcast_map(m, in->scale_shape, in->scale_n, err))
            return -1;
    } else {
        if (lk_scope_map(m, in->scope, in->head, in->page, err))
            return -1;
        if (in->has_scales && in->scope != LK_PER_TENSOR &&
            (in->scale_n != m->scale_n || in->scale_shape[0] != m->scale_shape[0] ||
             (m->scale_n == 2 && in->scale_shape[1] != m->scale_shape[1])))
            return lk_fail(err, LK_UNSUPPORTED, "static scales do not have the scope's shape");
        if (in->has_scales && in->scope == LK_PER_TENSOR && in->scale_count != 1)
            return lk_fail(err, LK_UNSUPPORTED, "PER_TENSOR takes one static scale");
    }
    if (!in->has_scales) {
        in->scale_n = m->scale_n;
        in->scale_shape[0] = m->scale_shape[0];
        in->scale_shape[1] = m->scale_shape[1];
        in->scale_count = m->groups;
    }
    *scales = lk_arena_array(r->arena, (size_t)in->scale_count, sizeof **scales);
    if (in->has_scales)
        for (i = 0; i < in->scale_count; i++)
            (*scales)[i] = lk_f32_from_bits(lk_rd_u32(in->v_scales.p + 4 * i));
    else
        lk_group_scales(m, in->fmt, in->v.p, *scales);
    return 0;
}

static int op_codec_encode(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    static const char *const meta_names[6] = {"layer_id", "chunk_id", "chunk_size",
                                              "page_size", "kv_head_count", "head_dim"};
    lk_encode_in in;
    lk_scale_map m;
    lk_blob b;
    lk_int meta;
    lk_span header;
    float *scales = NULL, *used;
    uint8_t *payload;
    size_t n, scale_bytes;
    int i, itemsize;
    if (lk_encode_in_read(r, &in, &m, err) || lk_encode_scales(r, &in, &m, &scales, err))
        return -1;
    memset(&b, 0, sizeof b);
    for (i = 0; i < 6; i++) {
        if (lk_req_int(r, meta_names[i], 0, -1, &meta, NULL, err))
            return -1;
        if (!lk_int_in(meta, INT64_MIN, INT64_MAX)) /* KV-ENCODE-REFUSE */
            return lk_fail(err, LK_UNSUPPORTED, "%s does not fit in 64 bits", meta_names[i]);
        (&b.layer_id)[i] = meta.v;
    }
    for (i = 0; i < LK_NHASHES; i++)
        if (lk_req_hex(r, LK_HASH_NAMES[i], 0, &b.hashes[i], err))
            return -1;
    n = (size_t)m.n;
    itemsize = in.scale_dtype_id == 4 ? 4 : in.scale_dtype_id == 5 ? 8 : 2;
    scale_bytes = (size_t)in.scale_count * (size_t)itemsize;
    payload = lk_arena_alloc(r->arena, 3 * n + scale_bytes);
    used = lk_arena_array(r->arena, (size_t)in.scale_count, sizeof *used);
    lk_store_scales(scales, in.scale_count, in.scale_dtype_id, payload + 3 * n, used);
    if (in.k.n)
        memcpy(payload, in.k.p, 2 * n);
    lk_quantize(&m, in.fmt, in.v.p, used, payload + 2 * n); /* Q-ROUND */
    b.scale_scope = (uint16_t)in.scope;
    b.k_dtype_id = (uint16_t)in.k_dtype_id;
    b.v_dtype_id = 7;
    b.scale_dtype_id = (uint16_t)in.scale_dtype_id;
    b.scale_shape_n = in.scale_n;
    memcpy(b.scale_shape, in.scale_shape, sizeof b.scale_shape);
    b.k_payload_len = (int64_t)(2 * n);
    b.v_payload_len = (int64_t)n;
    b.scale_payload_len = (int64_t)scale_bytes;
    b.payload = lk_span_of(payload, 3 * n + scale_bytes);
    if (lk_blob_serialize_header(&b, r->arena, &header, err)) /* KV-ENCODE-REFUSE */
        return -1;
    lk_ok(w);
    lk_jw_key(w, "blob");
    lk_jw_raw(w, "\"");
    lk_jw_hex_part(w, header);
    lk_jw_hex_part(w, b.payload);
    lk_jw_raw(w, "\"");
    return 0;
}

/* -- protocol ---------------------------------------------------------------------------- */

static int lk_msg_input_of(const lk_request *r, lk_msg_input *in, lk_int_list *shape,
                           lk_err *err)
{
    if (lk_req_int(r, "length", 1, 0, &in->length, NULL, err) ||
        lk_req_int(r, "fmt", 1, 0, &in->fmt, NULL, err) ||
        lk_req_name(r, "dtype", 0, &in->dtype_name, err) ||
        lk_req_name(r, "location", 0, &in->location, err) ||
        lk_req_ints(r, "shape", 1, shape, err))
        return -1;
    in->dims = shape->items;
    in->rank = shape->n;
    return 0;
}

static void lk_write_msg_fields(lk_jwriter *w, const lk_msg_fields *f)
{
    lk_field_int(w, "length", f->length);
    lk_field_int(w, "fmt", f->fmt);
    lk_field_name(w, "dtype", f->dtype == NULL ? NULL : f->dtype->name);
    lk_field_name(w, "location", lk_location_name(f->location));
    lk_field_shape(w, "shape", &f->shape);
}

static int op_proto_client_write(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_int command;
    lk_span key;
    lk_msg_input in;
    lk_int_list shape;
    uint8_t msg[LK_CLIENT_MSG_LEN];
    if (lk_req_int(r, "command", 1, 0, &command, NULL, err) ||
        lk_req_hex(r, "key", 1, &key, err) || lk_msg_input_of(r, &in, &shape, err) ||
        lk_client_msg_write(command, key, &in, r->arena, msg, err))
        return -1;
    lk_ok(w);
    lk_field_hex(w, "msg", lk_span_of(msg, sizeof msg));
    return 0;
}

static int op_proto_client_read(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_span msg, key;
    lk_client_msg m;
    if (lk_req_hex(r, "msg", 1, &msg, err) || lk_client_msg_read(msg, r->arena, &m, err) ||
        lk_cache_key_render(&m.key, r->arena, &key, err))
        return -1;
    lk_ok(w);
    lk_field_int(w, "command", m.command);
    lk_field_hex(w, "key", key);
    lk_field_name(w, "key_kind", m.key.has_layer ? "LayerCacheEngineKey" : "CacheEngineKey");
    lk_write_msg_fields(w, &m.f);
    return 0;
}

static int op_proto_server_write(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_int code;
    lk_msg_input in;
    lk_int_list shape;
    uint8_t msg[LK_SERVER_MSG_LEN];
    if (lk_req_int(r, "code", 1, 0, &code, NULL, err) || lk_msg_input_of(r, &in, &shape, err) ||
        lk_server_msg_write(code, &in, msg, err))
        return -1;
    lk_ok(w);
    lk_field_hex(w, "msg", lk_span_of(msg, sizeof msg));
    return 0;
}

static int op_proto_server_read(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_span msg;
    lk_server_msg m;
    if (lk_req_hex(r, "msg", 1, &msg, err) || lk_server_msg_read(msg, &m, err))
        return -1;
    lk_ok(w);
    lk_field_int(w, "code", m.code);
    lk_write_msg_fields(w, &m.f);
    return 0;
}

static int op_proto_remote_write(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_int groups, length, fmt;
    lk_span_list dtypes;
    lk_int_list ranks, dims;
    lk_msg_input *shapes;
    lk_span msg;
    size_t g, pos = 0;
    if (lk_req_int(r, "num_groups", 1, 0, &groups, NULL, err) ||
        lk_req_int(r, "length", 1, 0, &length, NULL, err) ||
        lk_req_int(r, "fmt", 1, 0, &fmt, NULL, err) || lk_req_names(r, "dtypes", 1, &dtypes, err) ||
        lk_req_ints(r, "shape_ranks", 1, &ranks, err) ||
        lk_req_ints(r, "shape_dims", 1, &dims, err))
        return -1;
    /* shapes are consecutive slices of shape_dims, cut as the suite's Python driver cuts
     * them: shape_dims[pos:pos + rank], pos += rank (a slice past the end is short) */
    shapes = lk_arena_array(r->arena, ranks.n, sizeof *shapes);
    for (g = 0; g < ranks.n; g++) {
        size_t start = pos < dims.n ? pos : dims.n, avail = dims.n - start;
        lk_int rank = ranks.items[g];
        if (!lk_int_in(rank, 0, INT64_MAX) && rank.big <= 0)
            return lk_fail(err, LK_SHAPE, "shape rank of group %lu is negative",
                           (unsigned long)g);
        shapes[g].dims = dims.items + start;
        shapes[g].rank = rank.big || (uint64_t)rank.v > avail ? avail : (size_t)rank.v;
        pos = rank.big || (uint64_t)rank.v > (uint64_t)(SIZE_MAX - pos) ? SIZE_MAX
                                                                       : pos + (size_t)rank.v;
    }
    if (lk_remote_meta_write(groups, length, fmt, dtypes.items, dtypes.n, shapes, ranks.n,
                             r->arena, &msg, err))
        return -1;
    lk_ok(w);
    lk_field_hex(w, "msg", msg);
    return 0;
}

static int op_proto_remote_read(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_int groups;
    lk_span msg;
    lk_remote_meta m;
    size_t g;
    int i;
    if (lk_req_int(r, "num_groups", 1, 0, &groups, NULL, err) ||
        lk_req_hex(r, "msg", 1, &msg, err) || lk_remote_meta_read(msg, groups, r->arena, &m, err))
        return -1;
    lk_ok(w);
    lk_field_int(w, "length", m.length);
    lk_field_int(w, "fmt", m.fmt);
    lk_jw_key(w, "dtypes");
    lk_jw_raw(w, "[");
    for (g = 0; g < m.groups; g++) {
        if (g)
            lk_jw_raw(w, ",");
        if (m.dtypes[g] == NULL) /* a byte object without dtype (PROTO-RMETA-DTYPE) */
            lk_jw_raw(w, "null");
        else
            lk_jw_cstr(w, m.dtypes[g]->name);
    }
    lk_jw_raw(w, "]");
    lk_jw_key(w, "shape_ranks");
    lk_jw_raw(w, "[");
    for (g = 0; g < m.groups; g++) {
        if (g)
            lk_jw_raw(w, ",");
        lk_jw_int(w, m.shapes[g].rank);
    }
    lk_jw_raw(w, "]");
    lk_jw_key(w, "shape_dims");
    lk_jw_raw(w, "[");
    for (g = 0; g < m.groups; g++) {
        for (i = 0; i < m.shapes[g].rank; i++) {
            if (g || i)
                lk_jw_raw(w, ",");
            lk_jw_int(w, m.shapes[g].dims[i]);
        }
    }
    lk_jw_raw(w, "]");
    return 0;
}

/* -- CacheEngineKey strings ---------------------------------------------------------------- */

static int op_key_cache_write(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_cache_key key;
    lk_span hash_text, dtype_name, text;
    lk_span_list names, values;
    lk_int ws, worker, layer;
    int has_layer;
    memset(&key, 0, sizeof key);
    if (lk_req_hex(r, "model_name", 1, &key.model, err) ||
        lk_req_int(r, "world_size", 1, 0, &ws, NULL, err) ||
        lk_req_int(r, "worker_id", 1, 0, &worker, NULL, err) ||
        lk_req_name(r, "chunk_hash_int", 1, &hash_text, err) ||
        lk_req_name(r, "dtype", 1, &dtype_name, err) ||
        lk_req_int(r, "layer_id", 0, 0, &layer, &has_layer, err) ||
        lk_req_hex_list(r, "tag_names", 0, &names, err) ||
        lk_req_hex_list(r, "tag_values", 0, &values, err))
        return -1;
    if (names.n != values.n)
        return lk_fail(err, LK_CACHE_KEY, "%lu tag names but %lu tag values",
                       (unsigned long)names.n, (unsigned long)values.n);
    if (lk_cache_key_hash_from_int_text(hash_text, r->arena, &key.hash, err))
        return -1;
    key.dtype = lk_dtype_from_name(dtype_name);
    if (key.dtype == NULL || key.dtype->key_name == NULL)
        return lk_fail(err, LK_CACHE_KEY, "Unsupported dtype in CacheEngineKey");
    if (ws.big || worker.big)
        return lk_fail(err, LK_CACHE_KEY, "world_size or worker_id does not fit int64");
    if (has_layer && layer.big)
        return lk_fail(err, LK_CACHE_KEY, "layer_id does not fit int64");
    key.world_size = ws.v;
    key.worker_id = worker.v;
    key.has_layer = has_layer;
    key.layer_id = layer.v;
    key.n_tags = lk_cache_key_merge_tags(names.items, values.items, names.n, r->arena);
    key.tag_names = names.items;
    key.tag_values = values.items;
    if (lk_cache_key_render(&key, r->arena, &text, err))
        return -1;
    lk_ok(w);
    lk_field_hex(w, "key", text);
    return 0;
}

static int op_key_cache_read(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_span text;
    lk_cache_key key;
    if (lk_req_hex(r, "key", 1, &text, err) || lk_cache_key_parse(text, r->arena, &key, err))
        return -1;
    lk_ok(w);
    lk_field_name(w, "key_kind", key.has_layer ? "LayerCacheEngineKey" : "CacheEngineKey");
    lk_field_hex(w, "model_name", key.model);
    lk_field_int(w, "world_size", key.world_size);
    lk_field_int(w, "worker_id", key.worker_id);
    lk_jw_key(w, "chunk_hash_int");
    lk_jw_str(w, key.hash);
    lk_field_name(w, "dtype", key.dtype->name);
    lk_jw_key(w, "layer_id");
    if (key.has_layer)
        lk_jw_int(w, key.layer_id);
    else
        lk_jw_null(w);
    lk_field_hex_list(w, "tag_names", key.tag_names, key.n_tags);
    lk_field_hex_list(w, "tag_values", key.tag_values, key.n_tags);
    return 0;
}

/* -- object keys ------------------------------------------------------------------------- */

static int lk_object_key_input_of(const lk_request *r, lk_object_key_input *in, lk_err *err)
{
    if (lk_req_hex(r, "chunk_hash", 1, &in->chunk_hash, err) ||
        lk_req_hex(r, "model_name", 1, &in->model_name, err) ||
        lk_req_int(r, "kv_rank", 1, 0, &in->kv_rank, NULL, err) ||
        lk_req_int(r, "object_group_id", 0, 0, &in->object_group_id, NULL, err) ||
        lk_req_hex(r, "cache_salt", 0, &in->cache_salt, err))
        return -1;
    if (in->cache_salt.p == NULL)
        in->cache_salt = lk_span_of("", 0);
    return 0;
}

static int lk_object_key_from_request(const lk_request *r, lk_object_key *key, lk_err *err)
{
    lk_object_key_input in;
    return lk_object_key_input_of(r, &in, err) || lk_object_key_make(&in, key, err) ? -1 : 0;
}

static void lk_write_object_key(lk_jwriter *w, const lk_object_key *key)
{
    lk_field_hex(w, "chunk_hash", key->chunk_hash);
    lk_field_hex(w, "model_name", key->model_name);
    lk_field_int(w, "kv_rank", key->kv_rank);
    lk_field_int(w, "object_group_id", key->object_group_id);
    lk_field_hex(w, "cache_salt", key->cache_salt);
}

static int op_key_object_new(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_object_key key;
    if (lk_object_key_from_request(r, &key, err))
        return -1;
    lk_ok(w);
    lk_write_object_key(w, &key);
    return 0;
}

static int op_key_kv_rank(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_int ws, gr, lws, lr;
    int64_t rank;
    if (lk_req_int(r, "world_size", 1, 0, &ws, NULL, err) ||
        lk_req_int(r, "global_rank", 1, 0, &gr, NULL, err) ||
        lk_req_int(r, "local_world_size", 1, 0, &lws, NULL, err) ||
        lk_req_int(r, "local_rank", 1, 0, &lr, NULL, err) ||
        lk_kv_rank(ws, gr, lws, lr, &rank, err))
        return -1;
    lk_ok(w);
    lk_field_int(w, "kv_rank", rank);
    return 0;
}

/* A JSON string as Python's json.dumps(..., ensure_ascii=False) writes it. */
static size_t lk_py_json_string(lk_span s, uint8_t *p)
{
    static const char hexchars[] = "0123456789abcdef";
    size_t i, off = 0;
    p[off++] = '"';
    for (i = 0; i < s.n; i++) {
        uint8_t c = s.p[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : NULL;
        if (esc != NULL) {
            p[off++] = (uint8_t)esc[0];
            p[off++] = (uint8_t)esc[1];
        } else if (c < 0x20) {
            memcpy(p + off, "\\u00", 4);
            p[off + 4] = (uint8_t)hexchars[c >> 4];
            p[off + 5] = (uint8_t)hexchars[c & 15];
            off += 6;
        } else {
            p[off++] = c;
        }
    }
    p[off++] = '"';
    return off;
}

/* KEY-ENCODED-FIELDS: the JSON object, members sorted by name as json.dumps(sort_keys=True)
 * writes them, with ", " and ": " separators. */
static int op_key_encoded_write(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_object_key key;
    lk_span hex;
    uint8_t *p;
    size_t off = 0;
    if (lk_object_key_from_request(r, &key, err))
        return -1;
    hex = lk_hex_of(key.chunk_hash, r->arena);
    p = lk_arena_alloc(r->arena, 6 * (key.cache_salt.n + key.model_name.n) + hex.n + 160);
    off += (size_t)sprintf((char *)p + off, "{\"cache_salt\": ");
    off += lk_py_json_string(key.cache_salt, p + off);
    off += (size_t)sprintf((char *)p + off, ", \"chunk_hash_hex\": ");
    off += lk_py_json_string(hex, p + off);
    off += (size_t)sprintf((char *)p + off, ", \"kv_rank\": %lld, \"model_name\": ",
                           (long long)key.kv_rank);
    off += lk_py_json_string(key.model_name, p + off);
    off += (size_t)sprintf((char *)p + off, ", \"object_group_id\": %lld}",
                           (long long)key.object_group_id);
    lk_ok(w);
    lk_field_hex(w, "json_text", lk_span_of(p, off));
    return 0;
}

/* The member `name` as a string (STR) or integer (INT, not bool), else a malformed key. */
static int lk_encoded_member(const lk_jvalue *obj, const char *name, lk_jtype type,
                             const lk_jvalue **out, lk_err *err)
{
    *out = lk_json_get(obj, name);
    if (*out != NULL && (*out)->type != type)
        return lk_fail(err, LK_KEY_MALFORMED, "EncodedObjectKey.%s has the wrong JSON type",
                       name);
    return 0;
}

static int op_key_encoded_read(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    static const char *const members[5] = {"chunk_hash_hex", "model_name", "kv_rank",
                                           "object_group_id", "cache_salt"};
    static const lk_jtype types[5] = {LK_J_STR, LK_J_STR, LK_J_INT, LK_J_INT, LK_J_STR};
    const lk_jvalue *v[5];
    lk_object_key_input in;
    lk_object_key key;
    lk_jvalue obj;
    lk_span text;
    char why[160];
    size_t i, k;
    if (lk_req_hex(r, "json_text", 1, &text, err))
        return -1;
    if (lk_json_parse(text, r->arena, &obj, why, sizeof why))
        return lk_fail(err, LK_KEY_MALFORMED, "EncodedObjectKey is not JSON: %s", why);
    if (obj.type != LK_J_OBJECT)
        return lk_fail(err, LK_KEY_MALFORMED, "EncodedObjectKey must be a JSON object");
    for (i = 0; i < obj.u.object.n; i++) {
        for (k = 0; k < 5; k++)
            if (lk_span_eq_cstr(obj.u.object.fields[i].name, members[k]))
                break;
        if (k == 5)
            return lk_fail(err, LK_KEY_MALFORMED, "unknown EncodedObjectKey member");
    }
    for (k = 0; k < 3; k++)
        if (lk_json_get(&obj, members[k]) == NULL)
            return lk_fail(err, LK_KEY_MALFORMED, "EncodedObjectKey lacks %s", members[k]);
    for (k = 0; k < 5; k++)
        if (lk_encoded_member(&obj, members[k], types[k], &v[k], err))
            return -1;
    in.model_name = v[1]->u.str;
    in.kv_rank = v[2]->u.integer;
    in.object_group_id.v = v[3] == NULL ? 0 : v[3]->u.integer.v;
    in.object_group_id.big = v[3] == NULL ? 0 : v[3]->u.integer.big;
    in.cache_salt = v[4] == NULL ? lk_span_of("", 0) : v[4]->u.str;
    if (lk_read_chunk_hash(v[0]->u.str, r->arena, &in.chunk_hash, err) ||
        lk_object_key_make(&in, &key, err))
        return -1;
    lk_ok(w);
    lk_write_object_key(w, &key);
    return 0;
}

static int op_key_fs_write(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_object_key key;
    lk_span name;
    if (lk_object_key_from_request(r, &key, err) ||
        lk_object_key_to_filename(&key, r->arena, &name, err))
        return -1;
    lk_ok(w);
    lk_field_hex(w, "filename", name);
    return 0;
}

static int op_key_fs_read(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_span name;
    lk_object_key key;
    if (lk_req_hex(r, "filename", 1, &name, err) ||
        lk_object_key_from_filename(name, r->arena, &key, err))
        return -1;
    lk_ok(w);
    lk_write_object_key(w, &key);
    return 0;
}

static int op_key_s3_write(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_object_key key;
    lk_span name;
    if (lk_object_key_from_request(r, &key, err) ||
        lk_object_key_to_string(&key, r->arena, &name))
        return -1;
    lk_ok(w);
    lk_field_hex(w, "object_name", name);
    return 0;
}

static int op_key_s3_read(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_span name;
    lk_object_key key;
    if (lk_req_hex(r, "object_name", 1, &name, err) ||
        lk_object_key_from_string(name, r->arena, &key, err))
        return -1;
    lk_ok(w);
    lk_write_object_key(w, &key);
    return 0;
}

/* KEY-IPC-FANOUT, KEY-IPC-WORKER: validated first, then streamed (the output can be up to
 * 255 times the input; nothing of that size is allocated). */
static int op_key_ipc(const lk_request *r, lk_jwriter *w, lk_err *err)
{
    lk_object_key_input in;
    lk_object_key key;
    lk_int ws, worker;
    lk_span_list hashes;
    lk_int_list groups;
    int has_worker;
    int64_t first_w, n_ranks, rank;
    size_t g, c, k, total;
    if (lk_req_hex(r, "model_name", 1, &in.model_name, err) ||
        lk_req_int(r, "world_size", 1, 0, &ws, NULL, err) ||
        lk_req_int(r, "worker_id", 0, 0, &worker, &has_worker, err) ||
        lk_req_hex(r, "cache_salt", 1, &in.cache_salt, err) ||
        lk_req_hex_list(r, "chunk_hashes", 1, &hashes, err) ||
        lk_req_ints(r, "object_group_ids", 1, &groups, err))
        return -1;
    if (!lk_int_in(ws, 1, INT64_MAX))
        return lk_fail(err, LK_DESCRIPTOR, "IPC key world_size must be an int >= 1");
    if (has_worker && !lk_int_in(worker, 0, ws.v - 1))
        return lk_fail(err, LK_DESCRIPTOR, "IPC key worker_id is outside 0..world_size-1");
    first_w = has_worker ? worker.v : 0;
    if (lk_kv_rank(ws, (lk_int){first_w, 0}, ws, (lk_int){first_w, 0}, &rank, err))
        return -1;
    n_ranks = has_worker ? 1 : ws.v;
    in.kv_rank.v = rank;
    in.kv_rank.big = 0;
    in.chunk_hash = lk_span_of("", 0);
    for (g = 0; g < groups.n && hashes.n > 0; g++) {
        in.object_group_id = groups.items[g];
        if (lk_object_key_make(&in, &key, err))
            return -1;
    }
    total = groups.n * hashes.n * (size_t)n_ranks;
    lk_ok(w);
    lk_jw_key(w, "group_sizes");
    lk_jw_raw(w, "[");
    for (g = 0; g < groups.n; g++) {
        if (g)
            lk_jw_raw(w, ",");
        lk_jw_uint(w, (uint64_t)hashes.n * (uint64_t)n_ranks);
    }
    lk_jw_raw(w, "]");
    lk_jw_key(w, "keys_chunk_hash");
    lk_jw_raw(w, "\"");
    for (k = 0, g = 0; g < groups.n; g++)
        for (c = 0; c < hashes.n; c++)
            for (rank = 0; rank < n_ranks; rank++, k++) {
                if (k)
                    lk_jw_raw(w, ",");
                lk_jw_hex_part(w, hashes.items[c]);
            }
    lk_jw_raw(w, "\"");
    lk_jw_key(w, "keys_kv_rank");
    lk_jw_raw(w, "[");
    for (k = 0; k < total; k++) {
        int64_t wid = has_worker ? worker.v : (int64_t)(k % (size_t)n_ranks);
        if (k)
            lk_jw_raw(w, ",");
        lk_jw_int(w, (ws.v << 24) | (wid << 16) | (ws.v << 8) | wid);
    }
    lk_jw_raw(w, "]");
    lk_jw_key(w, "keys_object_group_id");
    lk_jw_raw(w, "[");
    for (k = 0; k < total; k++) {
        if (k)
            lk_jw_raw(w, ",");
        lk_jw_int(w, groups.items[k / (hashes.n * (size_t)n_ranks)].v);
    }
    lk_jw_raw(w, "]");
    lk_jw_key(w, "keys_model_name");
    lk_jw_raw(w, "\"");
    for (k = 0; k < total; k++) {
        if (k)
            lk_jw_raw(w, ",");
        lk_jw_hex_part(w, in.model_name);
    }
    lk_jw_raw(w, "\"");
    lk_jw_key(w, "keys_cache_salt");
    lk_jw_raw(w, "\"");
    for (k = 0; k < total; k++) {
        if (k)
            lk_jw_raw(w, ",");
        lk_jw_hex_part(w, in.cache_salt);
    }
    lk_jw_raw(w, "\"");
    return 0;
}

const lk_op LK_OPS[] = {
    {"codec.parse", op_codec_parse},
    {"codec.hash_gate", NULL},
    {"codec.decode", op_codec_decode},
    {"codec.dequant", NULL},
    {"codec.encode", op_codec_encode},
    {"codec.encode_scales", NULL},
    {"proto.client.write", op_proto_client_write},
    {"proto.client.read", op_proto_client_read},
    {"proto.server.write", op_proto_server_write},
    {"proto.server.read", op_proto_server_read},
    {"proto.remote.write", op_proto_remote_write},
    {"proto.remote.read", op_proto_remote_read},
    {"key.cache.write", op_key_cache_write},
    {"key.cache.read", op_key_cache_read},
    {"key.object.new", op_key_object_new},
    {"key.kv_rank", op_key_kv_rank},
    {"key.encoded.write", op_key_encoded_write},
    {"key.encoded.read", op_key_encoded_read},
    {"key.fs.write", op_key_fs_write},
    {"key.fs.read", op_key_fs_read},
    {"key.s3.write", op_key_s3_write},
    {"key.s3.read", op_key_s3_read},
    {"key.ipc", op_key_ipc},
};

const size_t LK_NOPS = sizeof LK_OPS / sizeof LK_OPS[0];

lk_op_fn lk_find_op(lk_span name)
{
    size_t i;
    for (i = 0; i < LK_NOPS; i++)
        if (LK_OPS[i].fn != NULL && lk_span_eq_cstr(name, LK_OPS[i].name))
            return LK_OPS[i].fn;
    return NULL;
}

#include "lk_proto.h"

#include "lk_utf8.h"

#define LK_INT32_MAX_ 2147483647

static const char *const LK_LOCATIONS[3] = {NULL, "LocalCPUBackend", "LocalDiskBackend"};

const char *lk_location_name(int32_t id)
{
    return (id >= 1 && id <= 2) ? LK_LOCATIONS[id] : NULL;
}

/* PROTO-RMETA-DTYPE: a tensor format's groups have a dtype; the byte formats UNDEFINED (0),
 * BINARY (4) and BINARY_BUFFER (5) may have none. */
static int lk_tensor_fmt(int32_t fmt)
{
    return fmt != 0 && fmt != 4 && fmt != 5;
}

/* PROTO-SHAPE-PAD: drop trailing zero slots, keeping one, except for BINARY (4) and
 * BINARY_BUFFER (5). PROTO-SHAPE-DIMS: every slot is in [0, 2^31 - 1]. */
static int lk_unpad_shape(const uint8_t *p, int32_t fmt, lk_shape *out, lk_err *err)
{
    int i;
    for (i = 0; i < LK_SHAPE_SLOTS; i++) {
        out->dims[i] = lk_rd_i32(p + 4 * i);
        if (out->dims[i] < 0)
            return lk_fail(err, LK_SHAPE, "shape slot %d is negative (%ld)", i,
                           (long)out->dims[i]);
    }
    out->rank = LK_SHAPE_SLOTS;
    if (fmt != 4 && fmt != 5)
        while (out->rank > 1 && out->dims[out->rank - 1] == 0)
            out->rank--;
    return 0;
}

/* PROTO-SHAPE-RANK, PROTO-SHAPE-DIMS, then trailing zero slots. */
static int lk_pad_shape(const lk_int *dims, size_t rank, uint8_t *p, lk_err *err)
{
    size_t i;
    if (rank > LK_SHAPE_SLOTS)
        return lk_fail(err, LK_SHAPE, "shape has %lu dimensions; the wire carries at most 4",
                       (unsigned long)rank);
    for (i = 0; i < LK_SHAPE_SLOTS; i++) {
        if (i < rank && !lk_int_in(dims[i], 0, LK_INT32_MAX_))
            return lk_fail(err, LK_SHAPE, "shape dimension %lu is outside [0, 2^31-1]",
                           (unsigned long)i);
        lk_wr_i32(p + 4 * i, i < rank ? (int32_t)dims[i].v : 0);
    }
    return 0;
}

static int lk_read_dtype(int32_t id, const lk_dtype **out, lk_err *err)
{
    int is_none;
    *out = lk_dtype_from_id(id, &is_none);
    if (*out == NULL && !is_none)
        return lk_fail(err, LK_UNKNOWN_ID, "unknown dtype id %ld", (long)id);
    return 0;
}

static int lk_read_fmt(int32_t fmt, lk_err *err)
{
    if (fmt < 0 || fmt >= LK_NFORMATS)
        return lk_fail(err, LK_UNKNOWN_ID, "unknown memory format id %ld", (long)fmt);
    return 0;
}

static int lk_read_location(int32_t id, lk_err *err)
{
    if (id < 0 || id > 2)
        return lk_fail(err, LK_UNKNOWN_ID, "unknown location id %ld", (long)id);
    return 0;
}

static int lk_read_length(int32_t length, const char *cls, lk_err *err)
{
    if (length < 0) /* PROTO-LENGTH-NONNEG */
        return lk_fail(err, cls, "negative length field %ld", (long)length);
    return 0;
}

/* PROTO-KEY-FIELD (reader): trailing 0x20 only, not empty, no NUL, strict UTF-8. */
static int lk_read_key_field(const uint8_t *p, lk_arena *arena, lk_cache_key *key, lk_err *err)
{
    size_t n = LK_MAX_KEY_LENGTH;
    lk_span text;
    while (n > 0 && p[n - 1] == ' ')
        n--;
    text = lk_span_of(p, n);
    if (n == 0)
        return lk_fail(err, LK_MALFORMED, "key field is empty (all padding)");
    if (memchr(p, 0, n) != NULL)
        return lk_fail(err, LK_MALFORMED, "key field holds a NUL byte");
    if (!lk_utf8_valid(text))
        return lk_fail(err, LK_MALFORMED, "key field is not UTF-8");
    return lk_cache_key_parse(text, arena, key, err);
}

int lk_client_msg_read(lk_span msg, lk_arena *arena, lk_client_msg *out, lk_err *err)
{
    const uint8_t *p = msg.p;
    memset(out, 0, sizeof *out);
    if (msg.n != LK_CLIENT_MSG_LEN) /* PROTO-EXACT-LENGTH */
        return lk_fail(err, LK_MALFORMED, "ClientMetaMessage is %d bytes, got %lu",
                       LK_CLIENT_MSG_LEN, (unsigned long)msg.n);
    out->command = lk_rd_i32(p);
    out->f.length = lk_rd_i32(p + 4);
    out->f.fmt = lk_rd_i32(p + 8);
    out->f.location = lk_rd_i32(p + 16);
    if (lk_read_length(out->f.length, LK_MALFORMED, err) || lk_read_fmt(out->f.fmt, err))
        return -1;
    if (out->command < 1 || out->command > 5) /* PROTO-COMMAND-ID */
        return lk_fail(err, LK_UNKNOWN_ID, "unknown client command id %ld", (long)out->command);
    if (lk_read_key_field(p + 36, arena, &out->key, err) ||
        lk_read_dtype(lk_rd_i32(p + 12), &out->f.dtype, err) ||
        lk_unpad_shape(p + 20, out->f.fmt, &out->f.shape, err) ||
        lk_read_location(out->f.location, err))
        return -1;
    return 0;
}

int lk_server_msg_read(lk_span msg, lk_server_msg *out, lk_err *err)
{
    const uint8_t *p = msg.p;
    memset(out, 0, sizeof *out);
    if (msg.n != LK_SERVER_MSG_LEN) /* PROTO-EXACT-LENGTH */
        return lk_fail(err, LK_MALFORMED, "ServerMetaMessage is %d bytes, got %lu",
                       LK_SERVER_MSG_LEN, (unsigned long)msg.n);
    out->code = lk_rd_i32(p);
    out->f.length = lk_rd_i32(p + 4);
    out->f.fmt = lk_rd_i32(p + 8);
    out->f.location = lk_rd_i32(p + 32);
    if (lk_read_length(out->f.length, LK_MALFORMED, err) || lk_read_fmt(out->f.fmt, err))
        return -1;
    if (out->code != 200 && out->code != 400) /* PROTO-CODE-ID */
        return lk_fail(err, LK_UNKNOWN_ID, "unknown server return code %ld", (long)out->code);
    if (lk_read_dtype(lk_rd_i32(p + 12), &out->f.dtype, err) ||
        lk_unpad_shape(p + 16, out->f.fmt, &out->f.shape, err) ||
        lk_read_location(out->f.location, err))
        return -1;
    return 0;
}

int lk_remote_meta_read(lk_span msg, lk_int groups, lk_arena *arena, lk_remote_meta *out,
                        lk_err *err)
{
    size_t g;
    memset(out, 0, sizeof *out);
    if (groups.big < 0 || (groups.big == 0 && groups.v < 1))
        return lk_fail(err, LK_RMETA, "num_groups must be >= 1");
    /* PROTO-RMETA-GROUPS: compare counts, not byte sizes, so nothing can overflow */
    if (msg.n < LK_RMETA_HEADER_LEN || groups.big > 0 ||
        (uint64_t)groups.v > (msg.n - LK_RMETA_HEADER_LEN) / LK_RMETA_GROUP_LEN)
        return lk_fail(err, LK_RMETA, "RemoteMetadata buffer of %lu bytes is shorter than its "
                       "groups need", (unsigned long)msg.n);
    out->groups = (size_t)groups.v;
    out->length = lk_rd_i32(msg.p);
    out->fmt = lk_rd_i32(msg.p + 4);
    if (lk_read_length(out->length, LK_RMETA, err) || lk_read_fmt(out->fmt, err))
        return -1;
    out->dtypes = lk_arena_array(arena, out->groups, sizeof *out->dtypes);
    out->shapes = lk_arena_array(arena, out->groups, sizeof *out->shapes);
    for (g = 0; g < out->groups; g++) {
        const uint8_t *p = msg.p + LK_RMETA_HEADER_LEN + LK_RMETA_GROUP_LEN * g;
        if (lk_read_dtype(lk_rd_i32(p), &out->dtypes[g], err))
            return -1;
        if (out->dtypes[g] == NULL && lk_tensor_fmt(out->fmt)) /* PROTO-RMETA-DTYPE */
            return lk_fail(err, LK_RMETA, "group %lu has dtype id 0 (no dtype)",
                           (unsigned long)g);
        if (lk_unpad_shape(p + 4, out->fmt, &out->shapes[g], err))
            return -1;
    }
    return 0;
}

/* Writer-side ids: a name the table lacks is refused (UnencodableMessageError). */
static int lk_write_fmt(lk_int fmt, lk_err *err)
{
    if (!lk_int_in(fmt, 0, LK_NFORMATS - 1))
        return lk_fail(err, LK_UNENCODABLE, "fmt is not a MemoryFormat id");
    return 0;
}

static int lk_write_dtype_name(lk_span name, const lk_dtype **out, lk_err *err)
{
    *out = NULL;
    if (name.p == NULL)
        return 0;
    *out = lk_dtype_from_name(name);
    if (*out == NULL)
        return lk_fail(err, LK_UNENCODABLE, "not a dtype name");
    return 0;
}

static int lk_write_dtype_id(const lk_dtype *dtype, int32_t *id, lk_err *err)
{
    *id = dtype == NULL ? 0 : dtype->wire_id;
    if (*id < 0)
        return lk_fail(err, LK_UNENCODABLE, "dtype %s has no wire id", dtype->name);
    return 0;
}

static int lk_write_length(lk_int length, lk_err *err)
{
    if (!lk_int_in(length, 0, LK_INT32_MAX_)) /* PROTO-INT32, PROTO-LENGTH-NONNEG */
        return lk_fail(err, LK_UNENCODABLE, "length is outside [0, 2^31-1]");
    return 0;
}

static int lk_write_location(lk_span name, int32_t *id, lk_err *err)
{
    int32_t i;
    *id = 0;
    if (name.p == NULL)
        return 0;
    for (i = 1; i <= 2; i++)
        if (lk_span_eq_cstr(name, LK_LOCATIONS[i])) {
            *id = i;
            return 0;
        }
    return lk_fail(err, LK_UNENCODABLE, "location has no wire id");
}

/* The checks and values both message writers share, in the reference's order. */
static int lk_write_common(const lk_msg_input *in, uint8_t *shape_out, int32_t *dtype_id,
                           int32_t *location_id, lk_err *err)
{
    const lk_dtype *dtype;
    if (lk_write_fmt(in->fmt, err) || lk_write_dtype_name(in->dtype_name, &dtype, err) ||
        lk_pad_shape(in->dims, in->rank, shape_out, err) || lk_write_length(in->length, err) ||
        lk_write_dtype_id(dtype, dtype_id, err) ||
        lk_write_location(in->location, location_id, err))
        return -1;
    return 0;
}

/* PROTO-KEY-LENGTH, PROTO-KEY-FIELD (writer). */
static int lk_write_key_field(lk_span text, uint8_t *p, lk_err *err)
{
    if (!lk_utf8_valid(text))
        return lk_fail(err, LK_UNENCODABLE, "key string is not encodable as UTF-8");
    if (text.n > LK_MAX_KEY_LENGTH)
        return lk_fail(err, LK_KEY_TOO_LONG, "key is %lu bytes; at most %d fit",
                       (unsigned long)text.n, LK_MAX_KEY_LENGTH);
    if ((text.n > 0 && text.p[text.n - 1] == ' ') || memchr(text.p, 0, text.n) != NULL)
        return lk_fail(err, LK_UNENCODABLE, "key string ends in a space or holds NUL");
    memset(p, ' ', LK_MAX_KEY_LENGTH);
    memcpy(p, text.p, text.n);
    return 0;
}

int lk_client_msg_write(lk_int command, lk_span key, const lk_msg_input *in, lk_arena *arena,
                        uint8_t out[LK_CLIENT_MSG_LEN], lk_err *err)
{
    lk_cache_key parsed;
    lk_span text;
    int32_t dtype_id, location_id;
    if (!lk_int_in(command, 1, 5)) /* PROTO-COMMAND-ID */
        return lk_fail(err, LK_UNENCODABLE, "unknown client command");
    if (lk_cache_key_parse(key, arena, &parsed, err) ||
        lk_write_common(in, out + 20, &dtype_id, &location_id, err) ||
        lk_cache_key_render(&parsed, arena, &text, err) ||
        lk_write_key_field(text, out + 36, err))
        return -1;
    lk_wr_i32(out, (int32_t)command.v);
    lk_wr_i32(out + 4, (int32_t)in->length.v);
    lk_wr_i32(out + 8, (int32_t)in->fmt.v);
    lk_wr_i32(out + 12, dtype_id);
    lk_wr_i32(out + 16, location_id);
    return 0;
}

int lk_server_msg_write(lk_int code, const lk_msg_input *in, uint8_t out[LK_SERVER_MSG_LEN],
                        lk_err *err)
{
    int32_t dtype_id, location_id;
    if (!lk_int_in(code, 200, 200) && !lk_int_in(code, 400, 400)) /* PROTO-CODE-ID */
        return lk_fail(err, LK_UNENCODABLE, "unknown server return code");
    if (lk_write_common(in, out + 16, &dtype_id, &location_id, err))
        return -1;
    lk_wr_i32(out, (int32_t)code.v);
    lk_wr_i32(out + 4, (int32_t)in->length.v);
    lk_wr_i32(out + 8, (int32_t)in->fmt.v);
    lk_wr_i32(out + 12, dtype_id);
    lk_wr_i32(out + 32, location_id);
    return 0;
}

int lk_remote_meta_write(lk_int groups, lk_int length, lk_int fmt, const lk_span *dtype_names,
                         size_t n_dtypes, const lk_msg_input *shapes, size_t n_shapes,
                         lk_arena *arena, lk_span *out, lk_err *err)
{
    size_t g;
    uint8_t *p;
    const lk_dtype **dtypes;
    if (groups.big < 0 || (groups.big == 0 && groups.v < 1)) /* PROTO-RMETA-GROUPS */
        return lk_fail(err, LK_RMETA, "num_groups must be >= 1");
    dtypes = lk_arena_array(arena, n_dtypes, sizeof *dtypes);
    for (g = 0; g < n_dtypes; g++)
        if (lk_write_dtype_name(dtype_names[g], &dtypes[g], err))
            return -1;
    if (lk_write_fmt(fmt, err))
        return -1;
    if (n_shapes != n_dtypes)
        return lk_fail(err, LK_RMETA, "%lu shapes but %lu dtypes", (unsigned long)n_shapes,
                       (unsigned long)n_dtypes);
    if (n_shapes < 1)
        return lk_fail(err, LK_RMETA, "RemoteMetadata needs at least one group");
    if (groups.big != 0 || (uint64_t)groups.v != (uint64_t)n_shapes)
        return lk_fail(err, LK_RMETA, "metadata has %lu groups, the configuration another "
                       "count", (unsigned long)n_shapes);
    if (lk_write_length(length, err))
        return -1;
    p = lk_arena_alloc(arena, LK_RMETA_HEADER_LEN + LK_RMETA_GROUP_LEN * n_shapes);
    lk_wr_i32(p, (int32_t)length.v);
    lk_wr_i32(p + 4, (int32_t)fmt.v);
    for (g = 0; g < n_shapes; g++) {
        uint8_t *q = p + LK_RMETA_HEADER_LEN + LK_RMETA_GROUP_LEN * g;
        int32_t id;
        if (dtypes[g] == NULL && lk_tensor_fmt((int32_t)fmt.v)) /* PROTO-RMETA-DTYPE */
            return lk_fail(err, LK_RMETA, "group %lu has no dtype", (unsigned long)g);
        if (lk_write_dtype_id(dtypes[g], &id, err) ||
            lk_pad_shape(shapes[g].dims, shapes[g].rank, q + 4, err))
            return -1;
        lk_wr_i32(q, id);
    }
    *out = lk_span_of(p, LK_RMETA_HEADER_LEN + LK_RMETA_GROUP_LEN * n_shapes);
    return 0;
}

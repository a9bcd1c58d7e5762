/* The protocol messages (spec "Protocol messages and keys"): ClientMetaMessage (186 bytes),
 * ServerMetaMessage (36 bytes) and RemoteMetadata (8 + 20 n bytes); every field an int32
 * little-endian (PROTO-BYTE-ORDER). */
#ifndef LK_PROTO_H
#define LK_PROTO_H

#include "lk_arena.h"
#include "lk_cache_key.h"
#include "lk_dtype.h"
#include "lk_err.h"
#include "lk_int.h"

#define LK_MAX_KEY_LENGTH 150
#define LK_CLIENT_MSG_LEN (9 * 4 + LK_MAX_KEY_LENGTH)
#define LK_SERVER_MSG_LEN (9 * 4)
#define LK_RMETA_HEADER_LEN 8
#define LK_RMETA_GROUP_LEN 20
#define LK_SHAPE_SLOTS 4
#define LK_NFORMATS 9 /* PROTO-FMT-ID: 0..8 */

/* A shape as read back (PROTO-SHAPE-PAD). */
typedef struct {
    int rank;
    int32_t dims[LK_SHAPE_SLOTS];
} lk_shape;

/* The fields both messages carry. dtype NULL = id 0 ("no dtype"); location 0..2. */
typedef struct {
    int32_t length;
    int32_t fmt;
    const lk_dtype *dtype;
    int32_t location;
    lk_shape shape;
} lk_msg_fields;

typedef struct {
    int32_t command;
    lk_cache_key key;
    lk_msg_fields f;
} lk_client_msg;

typedef struct {
    int32_t code;
    lk_msg_fields f;
} lk_server_msg;

typedef struct {
    int32_t length;
    int32_t fmt;
    size_t groups;
    const lk_dtype **dtypes;
    lk_shape *shapes;
} lk_remote_meta;

/* What a writer is given, before any check. `dtype_name`/`location` with p == NULL: none. */
typedef struct {
    lk_int length;
    lk_int fmt;
    lk_span dtype_name;
    lk_span location;
    const lk_int *dims;
    size_t rank;
} lk_msg_input;

/* Location name of id 1 or 2; NULL for 0 and unknown ids. */
const char *lk_location_name(int32_t id);

int lk_client_msg_read(lk_span msg, lk_arena *arena, lk_client_msg *out, lk_err *err);
/* `command` and the key string are checked here too (PROTO-COMMAND-ID, KEY-CACHE-*,
 * PROTO-KEY-LENGTH, PROTO-KEY-FIELD); the key is re-rendered from its parse. */
int lk_client_msg_write(lk_int command, lk_span key, const lk_msg_input *in, lk_arena *arena,
                        uint8_t out[LK_CLIENT_MSG_LEN], lk_err *err);

int lk_server_msg_read(lk_span msg, lk_server_msg *out, lk_err *err);
int lk_server_msg_write(lk_int code, const lk_msg_input *in, uint8_t out[LK_SERVER_MSG_LEN],
                        lk_err *err);

/* PROTO-RMETA-GROUPS: `groups` >= 1 is the configured count; the buffer may be longer. */
int lk_remote_meta_read(lk_span msg, lk_int groups, lk_arena *arena, lk_remote_meta *out,
                        lk_err *err);
/* `dtype_names` and `shapes` hold one entry per group; `groups` is the configured count. */
int lk_remote_meta_write(lk_int groups, lk_int length, lk_int fmt, const lk_span *dtype_names,
                         size_t n_dtypes, const lk_msg_input *shapes, size_t n_shapes,
                         lk_arena *arena, lk_span *out, lk_err *err);

#endif

/* ObjectKey and its serialized forms (spec "ObjectKey", KEY-*): invariants, kv_rank packing,
 * the S3/native object name, the FS filename, EncodedObjectKey and the IPC fan-out. */
#ifndef LK_OBJECT_KEY_H
#define LK_OBJECT_KEY_H

#include "lk_arena.h"
#include "lk_bytes.h"
#include "lk_err.h"
#include "lk_int.h"

#define LK_SALT_MAX_CHARS 128
#define LK_NAME_MAX_BYTES 255

typedef struct {
    lk_span chunk_hash; /* bytes */
    lk_span model_name; /* UTF-8 text */
    int64_t kv_rank;    /* 0 .. 2^32-1 */
    int64_t object_group_id;
    lk_span cache_salt;
} lk_object_key;

/* What a caller gives before any check (an integer may be out of every range). */
typedef struct {
    lk_span chunk_hash, model_name, cache_salt;
    lk_int kv_rank, object_group_id;
} lk_object_key_input;

/* KEY-MODEL-CHARS, KEY-KVRANK-WIDTH, KEY-GROUP-RANGE, KEY-SALT-CHARS, KEY-SALT-LENGTH.
 * Errors: ObjectKeyInvariantError. */
int lk_object_key_make(const lk_object_key_input *in, lk_object_key *out, lk_err *err);

/* KEY-KVRANK-PACK / KEY-KVRANK-RANGE. Errors: KVRankFieldError. */
int lk_kv_rank(lk_int world_size, lk_int global_rank, lk_int local_world_size,
               lk_int local_rank, int64_t *out, lk_err *err);

/* KEY-STRING-FORM. */
int lk_object_key_to_string(const lk_object_key *key, lk_arena *arena, lk_span *out);
int lk_object_key_from_string(lk_span name, lk_arena *arena, lk_object_key *out,
                              lk_err *err);

/* KEY-FS-FORM, KEY-FS-SEP-ALIAS, KEY-FS-NAME-MAX. Errors: UnrepresentableObjectKeyError. */
int lk_object_key_to_filename(const lk_object_key *key, lk_arena *arena, lk_span *out,
                              lk_err *err);
int lk_object_key_from_filename(lk_span filename, lk_arena *arena, lk_object_key *out,
                                lk_err *err);

/* KEY-HEX-CANONICAL for chunk_hash_hex (EncodedObjectKey). */
int lk_read_chunk_hash(lk_span hex, lk_arena *arena, lk_span *out, lk_err *err);

/* Lowercase hex of bytes, into the arena. */
lk_span lk_hex_of(lk_span bytes, lk_arena *arena);

#endif

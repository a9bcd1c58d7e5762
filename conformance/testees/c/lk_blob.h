/* The encoded KV blob v1 header (SPEC.md "Encoded KV blob v1"): strict reader, consistency
 * checks, writer, hash gate and the logical shape of K and V. */
#ifndef LK_BLOB_H
#define LK_BLOB_H

#include "lk_arena.h"
#include "lk_bytes.h"
#include "lk_dtype.h"
#include "lk_err.h"

#define LK_MAGIC_LEN 8
#define LK_FIXED_HEADER_LEN 76     /* magic .. scale_shape_n (KV-LAYOUT) */
#define LK_MAX_SCALE_DIMS 8        /* KV-SCALE-SHAPE-N */
#define LK_NHASHES 6               /* the six known hash keys, in writing order */

enum { LK_PER_TENSOR = 0, LK_PER_LAYER_HEAD = 1, LK_PER_PAGE_HEAD = 2, LK_EXTERNAL = 3 };

extern const uint8_t LK_CODEC_MAGIC[LK_MAGIC_LEN];
/* model_id, model_revision_hash, tokenizer_hash, rope_config_hash, attention_backend,
 * kv_layout: the order writers emit them and the hash gate checks them. */
extern const char *const LK_HASH_NAMES[LK_NHASHES];

typedef struct {
    uint16_t scale_scope;
    uint16_t k_dtype_id, v_dtype_id, scale_dtype_id;
    int64_t layer_id, chunk_id, chunk_size, page_size, kv_head_count, head_dim;
    int64_t scale_shape_n;
    int64_t scale_shape[LK_MAX_SCALE_DIMS];
    int64_t k_payload_len, v_payload_len, scale_payload_len;
    lk_span hashes[LK_NHASHES]; /* known keys; empty when absent */
    uint32_t payload_crc32;
    int canonical;              /* the writer would produce these header bytes exactly: the
                                   six known keys in order, no legacy float16 id */
    size_t header_len;          /* H: offset of the payload */
    lk_span payload;            /* K, V, scale bytes (a view of the input) */
} lk_blob;

/* Parse and verify a whole blob (KV-MAGIC .. KV-CRC). Errors: CorruptEncodedKVError only.
 * Only the duplicate-key set is allocated (from `arena`, sized by the buffer); the payload
 * and hash spans point into `buf`. */
int lk_blob_parse(const uint8_t *buf, size_t len, int allow_trailing, lk_arena *arena,
                  lk_blob *out, lk_err *err);

/* KV-IDS, KV-GEOMETRY, KV-LEN, KV-SCALE-SHAPE for the fields of `b` (not the buffer extent).
 * `cls` is the error class to report (CorruptEncodedKVError when reading,
 * UnsupportedConfigError when writing: KV-ENCODE-REFUSE). */
int lk_blob_check_consistency(const lk_blob *b, const char *cls, lk_err *err);

/* Write the header of `b` (whose payload must already be set) with its CRC-32 into a new
 * arena buffer: KV-LAYOUT, with float16 written as id 2 and the six hash pairs in order.
 * Refuses (UnsupportedConfigError) what a reader would reject. */
int lk_blob_serialize_header(const lk_blob *b, lk_arena *arena, lk_span *out, lk_err *err);

/* Self-check of the writer against the reader: the header re-serialized from the parsed
 * fields parses to the same fields and, for a canonical blob, equals the input's header byte
 * for byte. Returns 0, or -1 with what differs (a bug of this implementation). */
int lk_blob_check_roundtrip(const lk_blob *b, const uint8_t *buf, lk_arena *arena,
                            lk_err *err);

/* KV-HASH-GATE: CodecMismatchError when an expected and a stored value are both non-empty
 * and differ. `expected[i]` with p == NULL means "not given". */
int lk_blob_hash_gate(const lk_blob *b, const lk_span expected[LK_NHASHES], lk_err *err);

/* KV-LOGICAL-SHAPE / KV-LAYOUT-NAME: the shape K and V are returned in; *rank is 1 with
 * shape[0] = element count when the header lacks the head count or head_dim.
 * UnsupportedConfigError for a kv_layout other than "", "NHD" and "HND". */
int lk_blob_logical_shape(const lk_blob *b, int64_t shape[4], int *rank, lk_err *err);

/* KV-LAYOUT-NAME: the head and page axes (-1: none) of a logical shape of `rank` axes that
 * lk_blob_logical_shape returned for `b` (rank 1, a flat V, has neither). */
void lk_blob_logical_axes(const lk_blob *b, int rank, int *head, int *page);

#endif

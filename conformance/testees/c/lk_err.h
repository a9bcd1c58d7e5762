/* Typed errors: every reader and writer reports failure as one of the error classes that
 * conformance/TESTEE.md names (the reference implementation's class names), never a crash. */
#ifndef LK_ERR_H
#define LK_ERR_H

/* Codec (SPEC.md "Reader rules", KV-HASH-GATE, KV-ENCODE-REFUSE). */
#define LK_CORRUPT "CorruptEncodedKVError"
#define LK_MISMATCH "CodecMismatchError"
#define LK_UNSUPPORTED "UnsupportedConfigError"
/* Protocol messages (spec "Protocol messages and keys", PROTO-*). */
#define LK_MALFORMED "MalformedMessageError"
#define LK_UNKNOWN_ID "UnknownIdError"
#define LK_UNENCODABLE "UnencodableMessageError"
#define LK_KEY_TOO_LONG "KeyTooLongError"
#define LK_SHAPE "ShapeError"
#define LK_CACHE_KEY "CacheKeyError"
#define LK_RMETA "RemoteMetadataError"
/* Object keys (KEY-*). */
#define LK_KEY_INVARIANT "ObjectKeyInvariantError"
#define LK_KEY_MALFORMED "MalformedObjectKeyStringError"
#define LK_KEY_UNREPRESENTABLE "UnrepresentableObjectKeyError"
#define LK_KVRANK_FIELD "KVRankFieldError"
#define LK_DESCRIPTOR "DescriptorError"

typedef struct {
    const char *cls; /* one of the names above, NULL while no error */
    char msg[240];
} lk_err;

#if defined(__GNUC__)
#define LK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LK_PRINTF(a, b)
#endif

/* Record an error of class `cls`; always returns -1 so callers can `return lk_fail(...)`. */
int lk_fail(lk_err *err, const char *cls, const char *fmt, ...) LK_PRINTF(3, 4);

#endif

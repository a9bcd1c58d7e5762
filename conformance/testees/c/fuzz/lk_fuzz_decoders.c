/* libFuzzer entry point over every decoder of the C testee (built only with clang, see
 * conformance/testees/c/build.py: build_libfuzzer). The first input byte picks the decoder,
 * the rest is its input; a decoder that reads out of bounds, overflows, leaks or allocates
 * past the arena's cap (16 x the input + 64 KiB) crashes, which libFuzzer reports. Every
 * accepted input is also written back and read again (the same self-checks as the testee). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../lk_arena.h"
#include "../lk_blob.h"
#include "../lk_cache_key.h"
#include "../lk_json.h"
#include "../lk_object_key.h"
#include "../lk_proto.h"

static void lk_expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "lk_fuzz_decoders: %s\n", what);
        abort();
    }
}

static void fuzz_blob(const uint8_t *p, size_t n, lk_arena *a)
{
    lk_blob b;
    lk_err err;
    int64_t shape[4];
    int rank;
    if (lk_blob_parse(p, n, n & 1, a, &b, &err) == 0) {
        lk_expect(lk_blob_check_roundtrip(&b, p, a, &err) == 0, err.msg);
        lk_blob_logical_shape(&b, shape, &rank, &err);
    }
}

static void fuzz_client(const uint8_t *p, size_t n, lk_arena *a)
{
    lk_client_msg m;
    lk_err err;
    lk_span text;
    lk_cache_key again;
    if (lk_client_msg_read(lk_span_of(p, n), a, &m, &err) == 0) {
        lk_expect(lk_cache_key_render(&m.key, a, &text, &err) == 0, "render of a read key");
        lk_expect(lk_cache_key_parse(text, a, &again, &err) == 0, "re-read of a written key");
    }
}

static void fuzz_remote(const uint8_t *p, size_t n, lk_arena *a)
{
    lk_remote_meta m;
    lk_server_msg s;
    lk_err err;
    lk_int groups;
    groups.v = n ? 1 + p[0] % 8 : 1;
    groups.big = 0;
    if (n)
        lk_remote_meta_read(lk_span_of(p + 1, n - 1), groups, a, &m, &err);
    lk_server_msg_read(lk_span_of(p, n), &s, &err);
}

static void fuzz_keys(const uint8_t *p, size_t n, lk_arena *a)
{
    lk_cache_key k;
    lk_object_key o;
    lk_err err;
    lk_span text;
    if (lk_cache_key_parse(lk_span_of(p, n), a, &k, &err) == 0)
        lk_expect(lk_cache_key_render(&k, a, &text, &err) == 0, "render of a read key");
    if (lk_object_key_from_string(lk_span_of(p, n), a, &o, &err) == 0) {
        lk_expect(lk_object_key_to_string(&o, a, &text) == 0, "write of a read name");
        lk_expect(lk_span_eq(text, lk_span_of(p, n)), "object name is not one-to-one");
    }
    if (lk_object_key_from_filename(lk_span_of(p, n), a, &o, &err) == 0 &&
        lk_object_key_to_filename(&o, a, &text, &err) == 0)
        lk_expect(lk_span_eq(text, lk_span_of(p, n)), "filename is not one-to-one");
}

static void fuzz_json(const uint8_t *p, size_t n, lk_arena *a)
{
    lk_jvalue v;
    char why[160];
    lk_json_parse(lk_span_of(p, n), a, &v, why, sizeof why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static void (*const decoders[])(const uint8_t *, size_t, lk_arena *) = {
        fuzz_blob, fuzz_client, fuzz_remote, fuzz_keys, fuzz_json,
    };
    lk_arena arena;
    if (size == 0)
        return 0;
    lk_arena_init(&arena);
    lk_arena_reset(&arena, size);
    decoders[data[0] % (sizeof decoders / sizeof decoders[0])](data + 1, size - 1, &arena);
    lk_arena_free(&arena);
    return 0;
}

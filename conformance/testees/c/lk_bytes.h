/* Byte spans and the little-endian integer readers and writers every format uses
 * (SPEC.md conventions: "Integers are little-endian two's complement"). */
#ifndef LK_BYTES_H
#define LK_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A read-only view of bytes owned by someone else (the request line, the arena). */
typedef struct {
    const uint8_t *p;
    size_t n;
} lk_span;

static inline lk_span lk_span_of(const void *p, size_t n)
{
    lk_span s;
    s.p = (const uint8_t *)p;
    s.n = n;
    return s;
}

static inline lk_span lk_cstr(const char *s)
{
    return lk_span_of(s, strlen(s));
}

static inline int lk_span_eq(lk_span a, lk_span b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

static inline int lk_span_eq_cstr(lk_span a, const char *s)
{
    return lk_span_eq(a, lk_cstr(s));
}

static inline uint16_t lk_rd_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t lk_rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint64_t lk_rd_u64(const uint8_t *p)
{
    return (uint64_t)lk_rd_u32(p) | ((uint64_t)lk_rd_u32(p + 4) << 32);
}

/* Two's complement without implementation-defined conversions. */
static inline int32_t lk_rd_i32(const uint8_t *p)
{
    uint32_t u = lk_rd_u32(p);
    return u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

static inline int64_t lk_rd_i64(const uint8_t *p)
{
    uint64_t u = lk_rd_u64(p);
    return u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

static inline void lk_wr_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)(v >> 8);
}

static inline void lk_wr_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)((v >> 8) & 0xFF);
    p[2] = (uint8_t)((v >> 16) & 0xFF);
    p[3] = (uint8_t)(v >> 24);
}

static inline void lk_wr_i32(uint8_t *p, int32_t v)
{
    lk_wr_u32(p, (uint32_t)v);
}

static inline void lk_wr_i64(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    lk_wr_u32(p, (uint32_t)(u & 0xFFFFFFFFu));
    lk_wr_u32(p + 4, (uint32_t)(u >> 32));
}

#endif

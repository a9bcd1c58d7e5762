#include "lk_fp8.h"

#include <float.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "float expressions must be evaluated in float32 (FLT_EVAL_METHOD 0)"
#endif

const lk_fmt LK_FLOAT16 = {10, 15, 0x7BFFu, 0x7C00u, 0x8000u};
const lk_fmt LK_BFLOAT16 = {7, 127, 0x7F7Fu, 0x7F80u, 0x8000u};
/* float8_e4m3fn: no infinities; S.1111.111 is NaN, S.1111.110 = 448 the largest value */
const lk_fmt LK_E4M3FN = {3, 7, 0x7Eu, 0u, 0x80u};

#define LK_F32_SIGN 0x80000000u
#define LK_F32_MAN 0x007FFFFFu
#define LK_F32_QUIET 0x00400000u
#define LK_DEFAULT_NAN 0xFFC00000u
#define LK_BF16_NAN 0xFFFFu

uint32_t lk_f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

float lk_f32_from_bits(uint32_t bits)
{
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

static int lk_bits_nan(uint32_t b)
{
    return (b & 0x7FFFFFFFu) > 0x7F800000u;
}

static uint32_t lk_nan_code(const lk_fmt *fmt, uint32_t bits)
{
    uint32_t sign = (bits & LK_F32_SIGN) ? fmt->sign_bit : 0u;
    if (fmt == &LK_BFLOAT16)
        return LK_BF16_NAN;
    if (fmt == &LK_FLOAT16)
        return sign | 0x7E00u | ((bits & LK_F32_MAN) >> 13);
    return sign | 0x7Fu;
}

uint32_t lk_round_f32(const lk_fmt *fmt, float x)
{
    uint32_t bits = lk_f32_bits(x), sig, kept, rest, half, code;
    uint32_t sign = (bits & LK_F32_SIGN) ? fmt->sign_bit : 0u;
    int exp = (int)((bits >> 23) & 0xFFu), e, t, emin = 1 - fmt->bias, shift;
    if (exp == 0xFF) {
        if (bits & LK_F32_MAN)
            return lk_nan_code(fmt, bits);
        return sign | (fmt->inf_code ? fmt->inf_code : fmt->max_code);
    }
    /* x = sig * 2^(e - 23); the target grid step is 2^(t - man_bits), t = max(e, emin) */
    sig = exp > 0 ? (bits & LK_F32_MAN) | 0x00800000u : bits & LK_F32_MAN;
    e = exp > 0 ? exp - 127 : -126;
    t = e > emin ? e : emin;
    shift = t - e + 23 - fmt->man_bits;
    if (shift > 25) { /* sig < 2^24 <= half: rounds to zero */
        kept = 0;
    } else {
        kept = sig >> shift;
        rest = sig & ((1u << shift) - 1u);
        half = 1u << (shift - 1);
        if (rest > half || (rest == half && (kept & 1u)))
            kept++;
    }
    /* a mantissa carry moves into the exponent field, subnormals into the normals */
    code = ((uint32_t)(t - emin) << fmt->man_bits) + kept;
    if (code > fmt->max_code)
        code = fmt->inf_code ? fmt->inf_code : fmt->max_code;
    return sign | code;
}

float lk_widen(const lk_fmt *fmt, uint32_t code)
{
    uint32_t sign = (code & fmt->sign_bit) ? LK_F32_SIGN : 0u;
    uint32_t mag = code & (fmt->sign_bit - 1u);
    uint32_t field = mag >> fmt->man_bits, man = mag & ((1u << fmt->man_bits) - 1u);
    int shift = 23 - fmt->man_bits;
    if ((fmt->inf_code && mag >= fmt->inf_code) || (!fmt->inf_code && mag > fmt->max_code))
        return lk_f32_from_bits(sign | 0x7F800000u | (man << shift));
    if (field == 0) {
        /* man * 2^k, k = emin - man_bits: exact (a float32 holds every such value) */
        int k = 1 - fmt->bias - fmt->man_bits;
        uint32_t pow2 = k >= -126 ? (uint32_t)(k + 127) << 23 : 1u << (k + 149);
        return lk_f32_from_bits(sign | lk_f32_bits((float)man * lk_f32_from_bits(pow2)));
    }
    return lk_f32_from_bits(sign | ((field - (uint32_t)fmt->bias + 127u) << 23) | (man << shift));
}

static float lk_nan_result(float a, float b)
{
    uint32_t ab = lk_f32_bits(a), bb = lk_f32_bits(b);
    if (lk_bits_nan(ab))
        return lk_f32_from_bits(ab | LK_F32_QUIET);
    if (lk_bits_nan(bb))
        return lk_f32_from_bits(bb | LK_F32_QUIET);
    return lk_f32_from_bits(LK_DEFAULT_NAN);
}

float lk_f32_div(float a, float b)
{
    float q = a / b;
    return q != q ? lk_nan_result(a, b) : q;
}

float lk_f32_mul(float a, float b)
{
    float p = a * b;
    return p != p ? lk_nan_result(a, b) : p;
}

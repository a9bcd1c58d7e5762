/* Narrow float formats as integer codes, rounded from float32 bit patterns, and the float32
 * arithmetic of the quantization rule (SPEC.md Q-ROUND, Q-DEQUANT, Q-NONFINITE).
 *
 * Rounding is integer arithmetic on the float32 bits (round to nearest, ties to even, with
 * subnormals), never a compiler or library conversion. Division and multiplication are one
 * IEEE float32 operation each; the build requires FLT_EVAL_METHOD == 0 so that `float`
 * expressions are evaluated in float32. NaN results get fixed bit patterns (SPEC.md leaves
 * them open; these are the golden set's): see lk_f32_div. */
#ifndef LK_FP8_H
#define LK_FP8_H

#include <stdint.h>

typedef struct {
    int man_bits;      /* mantissa bits */
    int bias;          /* exponent bias */
    uint32_t max_code; /* largest finite magnitude code */
    uint32_t inf_code; /* magnitude code of infinity; 0 when the format has none */
    uint32_t sign_bit;
} lk_fmt;

extern const lk_fmt LK_FLOAT16, LK_BFLOAT16, LK_E4M3FN;

uint32_t lk_f32_bits(float x);
float lk_f32_from_bits(uint32_t bits);

/* The code of float32 `x` in `fmt`, sign included: round to nearest, ties to even, with
 * subnormals; past the largest finite value: infinity (float16, bfloat16) or, in e4m3fn,
 * the largest finite value (callers clamp first, Q-ROUND). NaN: float16 keeps the sign and
 * the top mantissa bits, quieted; bfloat16 is 0xFFFF; e4m3fn is S.1111.111. */
uint32_t lk_round_f32(const lk_fmt *fmt, float x);

/* The exact float32 value of a `fmt` code (a NaN code keeps its sign and mantissa). */
float lk_widen(const lk_fmt *fmt, uint32_t code);

/* One IEEE float32 division / multiplication. A NaN result is the first NaN operand,
 * quieted, else (Inf/Inf, 0*Inf, 0/0) the x86 default NaN 0xFFC00000, on any machine. */
float lk_f32_div(float a, float b);
float lk_f32_mul(float a, float b);

#endif

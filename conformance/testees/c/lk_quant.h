/* The FP8 quantization rule of the encoded KV blob v1 in every scope and axis order
 * (SPEC.md Q-SCALE, Q-ROUND, Q-DEQUANT, Q-EXTERNAL, "Scale scopes").
 *
 * V is walked in C order; a scale map gives each element the index of its scale in the
 * stored scale tensor, as a sum of per-axis steps, so PER_PAGE_HEAD's (pages, heads)
 * scales pair with V's groups in either axis order and EXTERNAL scales broadcast. */
#ifndef LK_QUANT_H
#define LK_QUANT_H

#include "lk_arena.h"
#include "lk_err.h"
#include "lk_fp8.h"

#include <stdint.h>

#define LK_MAX_RANK 16 /* axes of V this implementation handles */

typedef struct {
    int rank;
    int64_t dims[LK_MAX_RANK];
    int64_t n;                   /* elements of V */
    int64_t step[LK_MAX_RANK];   /* scale index step along each axis of V (0: constant) */
    int64_t groups;              /* scales */
    int scale_n;                 /* the scale tensor's shape */
    int64_t scale_shape[2];      /* for the computed scopes: (), (H,), (P, H) */
} lk_scale_map;

/* The shape of V: rank <= LK_MAX_RANK, dims >= 0, element count within int64. */
int lk_shape_init(lk_scale_map *m, const int64_t *dims, int rank, lk_err *err);

/* An axis given as -rank..rank-1 normalized to 0..rank-1 (UnsupportedConfigError else). */
int lk_norm_axis(int64_t axis, int rank, int *out, lk_err *err);

/* PER_TENSOR (head, page unused), PER_LAYER_HEAD (head), PER_PAGE_HEAD (head, page;
 * scales stored (pages, heads) whatever the order of the axes). */
int lk_scope_map(lk_scale_map *m, int scope, int head, int page, lk_err *err);

/* EXTERNAL: scales of `shape` broadcast against V, NumPy rules aligned on trailing axes. */
int lk_broadcast_map(lk_scale_map *m, const int64_t *shape, int n, lk_err *err);

/* Q-SCALE: per group, amax = max |V| (exact), scale = amax / 448 in float32; 1.0 when amax
 * is not > 0 (zero, a NaN in the group, an empty group); Inf when the group holds an Inf.
 * `v` holds n little-endian 16-bit codes of `in`. */
void lk_group_scales(const lk_scale_map *m, const lk_fmt *in, const uint8_t *v, float *scales);

/* The scales in scale dtype `dtype_id` (4 float32, 2 float16, 3 bfloat16, 5 float64):
 * little-endian bytes into `out`, and the converted values, as float32, into `used`
 * (Q-SCALE: the converted scales are the ones used for quantization). */
void lk_store_scales(const float *scales, int64_t count, int dtype_id, uint8_t *out,
                     float *used);

/* Stored scales (`dtype_id` as above, 1 = float16) as float32. */
void lk_load_scales(const uint8_t *in, int64_t count, int dtype_id, float *out);

/* Q-ROUND: q = e4m3fn(clamp(float32(V) / float32(scale), -448, 448)). */
void lk_quantize(const lk_scale_map *m, const lk_fmt *in, const uint8_t *v,
                 const float *scales, uint8_t *q);

/* Q-DEQUANT: V' = out(float32(q) * float32(scale)), little-endian, `out_size` bytes per
 * element: 2 (`out` = float16 or bfloat16), 4 (float32, `out` NULL) or 8 (float64). */
void lk_dequantize(const lk_scale_map *m, const uint8_t *q, const float *scales,
                   const lk_fmt *out, int out_size, uint8_t *dst);

#endif

#include "lk_quant.h"

#include "lk_bytes.h"

#include <string.h>

#define LK_FP8_MAX 448.0f
#define LK_ZERO_GROUP_SCALE 1.0f
/* groups an empty V may have (a V with data has at most one group per element) */
#define LK_MAX_EMPTY_GROUPS 1024

enum { LK_SCOPE_TENSOR = 0, LK_SCOPE_LAYER_HEAD = 1, LK_SCOPE_PAGE_HEAD = 2 };

int lk_shape_init(lk_scale_map *m, const int64_t *dims, int rank, lk_err *err)
{
    int a;
    memset(m, 0, sizeof *m);
    if (rank < 0 || rank > LK_MAX_RANK)
        return lk_fail(err, LK_UNSUPPORTED, "V has %d axes; this implementation takes %d",
                       rank, LK_MAX_RANK);
    m->rank = rank;
    m->n = 1;
    for (a = 0; a < rank; a++) {
        if (dims[a] < 0)
            return lk_fail(err, LK_UNSUPPORTED, "negative dimension %lld", (long long)dims[a]);
        m->dims[a] = dims[a];
    }
    for (a = 0; a < rank; a++) {
        if (dims[a] == 0) {
            m->n = 0;
            return 0;
        }
        if (m->n > INT64_MAX / dims[a])
            return lk_fail(err, LK_UNSUPPORTED, "the shape holds more than 2^63 elements");
        m->n *= dims[a];
    }
    return 0;
}

int lk_norm_axis(int64_t axis, int rank, int *out, lk_err *err)
{
    if (axis < -(int64_t)rank || axis >= rank)
        return lk_fail(err, LK_UNSUPPORTED, "axis %lld is out of range for %d axes",
                       (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

static int lk_check_groups(lk_scale_map *m, lk_err *err)
{
    if (m->n == 0 && m->groups > LK_MAX_EMPTY_GROUPS)
        return lk_fail(err, LK_UNSUPPORTED, "%lld scale groups for an empty V",
                       (long long)m->groups);
    return 0;
}

int lk_scope_map(lk_scale_map *m, int scope, int head, int page, lk_err *err)
{
    memset(m->step, 0, sizeof m->step);
    if (scope == LK_SCOPE_TENSOR) {
        m->groups = 1;
        m->scale_n = 0;
        return 0;
    }
    m->step[head] = 1;
    if (scope == LK_SCOPE_LAYER_HEAD) {
        m->groups = m->dims[head];
        m->scale_n = 1;
        m->scale_shape[0] = m->dims[head];
        return lk_check_groups(m, err);
    }
    if (m->dims[head] != 0 && m->dims[page] > INT64_MAX / m->dims[head])
        return lk_fail(err, LK_UNSUPPORTED, "pages x heads exceeds int64");
    m->step[page] = m->dims[head];
    m->groups = m->dims[page] * m->dims[head];
    m->scale_n = 2;
    m->scale_shape[0] = m->dims[page];
    m->scale_shape[1] = m->dims[head];
    return lk_check_groups(m, err);
}

int lk_broadcast_map(lk_scale_map *m, const int64_t *shape, int n, lk_err *err)
{
    int j;
    int64_t stride = 1;
    memset(m->step, 0, sizeof m->step);
    m->scale_n = 0;
    if (n > m->rank)
        return lk_fail(err, LK_UNSUPPORTED, "EXTERNAL scales have %d axes, V has %d", n,
                       m->rank);
    for (j = n - 1; j >= 0; j--) {
        int a = m->rank - n + j;
        if (shape[j] != 1 && shape[j] != m->dims[a])
            return lk_fail(err, LK_UNSUPPORTED, "EXTERNAL scale axis %d (%lld) does not "
                           "broadcast to V's %lld", j, (long long)shape[j],
                           (long long)m->dims[a]);
        m->step[a] = shape[j] == 1 ? 0 : stride;
        stride *= shape[j]; /* <= the product of V's dims, or 0 */
    }
    m->groups = stride;
    return 0;
}

/* Walks V in C order, keeping the scale index of the current element. */
typedef struct {
    int64_t idx[LK_MAX_RANK];
    int64_t scale;
} lk_walk;

static void lk_walk_next(const lk_scale_map *m, lk_walk *w)
{
    int a;
    for (a = m->rank - 1; a >= 0; a--) {
        w->idx[a]++;
        w->scale += m->step[a];
        if (w->idx[a] < m->dims[a])
            return;
        w->scale -= m->step[a] * m->dims[a];
        w->idx[a] = 0;
    }
}

static float lk_code_at(const lk_fmt *fmt, const uint8_t *v, int64_t i)
{
    return lk_widen(fmt, lk_rd_u16(v + 2 * i));
}

void lk_group_scales(const lk_scale_map *m, const lk_fmt *in, const uint8_t *v, float *scales)
{
    /* amax of each group in `scales`, then NaN groups marked by a NaN amax */
    int64_t g, i;
    lk_walk w;
    memset(&w, 0, sizeof w);
    for (g = 0; g < m->groups; g++)
        scales[g] = 0.0f;
    for (i = 0; i < m->n; i++, lk_walk_next(m, &w)) {
        float x = lk_code_at(in, v, i), mag = x < 0 ? -x : x, *amax = &scales[w.scale];
        if (x != x)
            *amax = x; /* NaN sticks: NaN > ... is false below */
        else if (*amax == *amax && mag > *amax)
            *amax = mag;
    }
    for (g = 0; g < m->groups; g++)
        scales[g] = scales[g] > 0 ? lk_f32_div(scales[g], LK_FP8_MAX) : LK_ZERO_GROUP_SCALE;
}

void lk_store_scales(const float *scales, int64_t count, int dtype_id, uint8_t *out,
                     float *used)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        const lk_fmt *half = dtype_id == 3 ? &LK_BFLOAT16 : &LK_FLOAT16;
        if (dtype_id == 4) {
            lk_wr_u32(out + 4 * i, lk_f32_bits(scales[i]));
            used[i] = scales[i];
        } else if (dtype_id == 5) {
            double d = (double)scales[i]; /* exact */
            uint64_t u;
            memcpy(&u, &d, sizeof u);
            lk_wr_u32(out + 8 * i, (uint32_t)(u & 0xFFFFFFFFu));
            lk_wr_u32(out + 8 * i + 4, (uint32_t)(u >> 32));
            used[i] = scales[i];
        } else {
            uint32_t code = lk_round_f32(half, scales[i]);
            lk_wr_u16(out + 2 * i, (uint16_t)code);
            used[i] = lk_widen(half, code);
        }
    }
}

void lk_load_scales(const uint8_t *in, int64_t count, int dtype_id, float *out)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        if (dtype_id == 4) {
            out[i] = lk_f32_from_bits(lk_rd_u32(in + 4 * i));
        } else if (dtype_id == 5) {
            uint64_t u = lk_rd_u64(in + 8 * i);
            double d;
            memcpy(&d, &u, sizeof d);
            out[i] = (float)d; /* IEEE round to nearest; exact for float32 scales */
        } else {
            out[i] = lk_widen(dtype_id == 3 ? &LK_BFLOAT16 : &LK_FLOAT16, lk_rd_u16(in + 2 * i));
        }
    }
}

void lk_quantize(const lk_scale_map *m, const lk_fmt *in, const uint8_t *v,
                 const float *scales, uint8_t *q)
{
    int64_t i;
    lk_walk w;
    memset(&w, 0, sizeof w);
    for (i = 0; i < m->n; i++, lk_walk_next(m, &w)) {
        float x = lk_f32_div(lk_code_at(in, v, i), scales[w.scale]);
        if (x > LK_FP8_MAX) /* NaN compares false and stays NaN */
            x = LK_FP8_MAX;
        else if (x < -LK_FP8_MAX)
            x = -LK_FP8_MAX;
        q[i] = (uint8_t)lk_round_f32(&LK_E4M3FN, x);
    }
}

void lk_dequantize(const lk_scale_map *m, const uint8_t *q, const float *scales,
                   const lk_fmt *out, int out_size, uint8_t *dst)
{
    int64_t i;
    lk_walk w;
    memset(&w, 0, sizeof w);
    for (i = 0; i < m->n; i++, lk_walk_next(m, &w)) {
        float x = lk_f32_mul(lk_widen(&LK_E4M3FN, q[i]), scales[w.scale]);
        if (out_size == 2) {
            lk_wr_u16(dst + 2 * i, (uint16_t)lk_round_f32(out, x));
        } else if (out_size == 4) {
            lk_wr_u32(dst + 4 * i, lk_f32_bits(x));
        } else {
            double d = (double)x; /* exact */
            uint64_t u;
            memcpy(&u, &d, sizeof u);
            lk_wr_u32(dst + 8 * i, (uint32_t)(u & 0xFFFFFFFFu));
            lk_wr_u32(dst + 8 * i + 4, (uint32_t)(u >> 32));
        }
    }
}

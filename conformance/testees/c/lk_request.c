#include "lk_request.h"

static int lk_wrong_type(const char *name, lk_err *err)
{
    return lk_fail(err, LK_BAD_REQUEST, "field %s has the wrong JSON type", name);
}

/* The field `name` of JSON type `type`: 1 with *v when present, 0 when absent (or null) and
   not required, -1 with err set when a required field is absent or its type is wrong. */
static int lk_typed_field(const lk_request *r, const char *name, int required, lk_jtype type,
                          const lk_jvalue **v, lk_err *err)
{
    *v = lk_json_get(r->obj, name);
    if (*v == NULL || (*v)->type == LK_J_NULL) {
        *v = NULL;
        return required ? lk_fail(err, LK_BAD_REQUEST, "request lacks field %s", name) : 0;
    }
    if ((*v)->type != type)
        return lk_wrong_type(name, err);
    return 1;
}

int lk_req_int(const lk_request *r, const char *name, int required, int64_t dflt, lk_int *out,
               int *present, lk_err *err)
{
    const lk_jvalue *v;
    int got = lk_typed_field(r, name, required, LK_J_INT, &v, err);
    if (present != NULL)
        *present = v != NULL;
    out->v = dflt;
    out->big = 0;
    if (got <= 0)
        return got;
    *out = v->u.integer;
    return 0;
}

int lk_req_bool(const lk_request *r, const char *name, int dflt, int *out, lk_err *err)
{
    const lk_jvalue *v;
    int got = lk_typed_field(r, name, 0, LK_J_BOOL, &v, err);
    *out = dflt;
    if (got <= 0)
        return got;
    *out = v->u.boolean;
    return 0;
}

static int lk_hexdigit(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int lk_unhex(lk_span hex, lk_arena *arena, lk_span *out)
{
    uint8_t *p;
    size_t i;
    if (hex.n % 2)
        return -1;
    p = lk_arena_alloc(arena, hex.n / 2);
    for (i = 0; i < hex.n; i += 2) {
        int hi = lk_hexdigit(hex.p[i]), lo = lk_hexdigit(hex.p[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        p[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    *out = lk_span_of(p, hex.n / 2);
    return 0;
}

int lk_req_hex(const lk_request *r, const char *name, int required, lk_span *out, lk_err *err)
{
    const lk_jvalue *v;
    int got = lk_typed_field(r, name, required, LK_J_STR, &v, err);
    out->p = NULL;
    out->n = 0;
    if (got <= 0)
        return got;
    if (lk_unhex(v->u.str, r->arena, out))
        return lk_fail(err, LK_BAD_REQUEST, "field %s is not hex", name);
    return 0;
}

int lk_req_name(const lk_request *r, const char *name, int required, lk_span *out,
                lk_err *err)
{
    const lk_jvalue *v;
    int got = lk_typed_field(r, name, required, LK_J_STR, &v, err);
    out->p = NULL;
    out->n = 0;
    if (got <= 0)
        return got;
    *out = v->u.str;
    if (out->p == NULL)
        out->p = (const uint8_t *)"";
    return 0;
}

int lk_req_ints(const lk_request *r, const char *name, int required, lk_int_list *out,
                lk_err *err)
{
    size_t i;
    const lk_jvalue *v;
    int got = lk_typed_field(r, name, required, LK_J_ARRAY, &v, err);
    out->n = 0;
    out->items = NULL;
    if (got <= 0)
        return got;
    out->items = lk_arena_array(r->arena, v->u.array.n, sizeof *out->items);
    for (i = 0; i < v->u.array.n; i++) {
        if (v->u.array.items[i].type != LK_J_INT)
            return lk_wrong_type(name, err);
        out->items[i] = v->u.array.items[i].u.integer;
    }
    out->n = v->u.array.n;
    return 0;
}

int lk_req_names(const lk_request *r, const char *name, int required, lk_span_list *out,
                 lk_err *err)
{
    size_t i;
    const lk_jvalue *v;
    int got = lk_typed_field(r, name, required, LK_J_ARRAY, &v, err);
    out->n = 0;
    out->items = NULL;
    if (got <= 0)
        return got;
    out->items = lk_arena_array(r->arena, v->u.array.n, sizeof *out->items);
    for (i = 0; i < v->u.array.n; i++) {
        if (v->u.array.items[i].type == LK_J_NULL)
            continue; /* a null item stays {NULL, 0} */
        if (v->u.array.items[i].type != LK_J_STR)
            return lk_wrong_type(name, err);
        out->items[i] = v->u.array.items[i].u.str;
    }
    out->n = v->u.array.n;
    return 0;
}

int lk_req_hex_list(const lk_request *r, const char *name, int required, lk_span_list *out,
                    lk_err *err)
{
    size_t i, start, k, count = 1;
    const lk_jvalue *v;
    int got = lk_typed_field(r, name, required, LK_J_STR, &v, err);
    out->n = 0;
    out->items = NULL;
    if (got <= 0)
        return got;
    if (v->u.str.n == 0) /* "" is the empty list */
        return 0;
    for (i = 0; i < v->u.str.n; i++)
        if (v->u.str.p[i] == ',')
            count++;
    out->items = lk_arena_array(r->arena, count, sizeof *out->items);
    for (i = 0, start = 0, k = 0; i <= v->u.str.n; i++) {
        if (i == v->u.str.n || v->u.str.p[i] == ',') {
            if (lk_unhex(lk_span_of(v->u.str.p + start, i - start), r->arena, &out->items[k]))
                return lk_fail(err, LK_BAD_REQUEST, "field %s is not comma-joined hex", name);
            if (out->items[k].p == NULL)
                out->items[k].p = (const uint8_t *)"";
            k++;
            start = i + 1;
        }
    }
    out->n = count;
    return 0;
}

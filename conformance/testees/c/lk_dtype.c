#include "lk_dtype.h"

static const lk_dtype LK_DTYPES[] = {
    {"float16", "half", 2, "half", 2},
    {"bfloat16", NULL, 3, "bfloat16", 2},
    {"float32", "float", 4, "float", 4},
    {"float64", "double", 5, "double", 8},
    {"uint8", NULL, 6, "uint8", 1},
    {"float8_e4m3fn", NULL, 7, "fp8_e4m3fn", 1},
    {"float8_e5m2", NULL, 8, "fp8_e5m2", 1},
    {"int8", NULL, -1, "int8", 1},
    {"int16", "short", -1, "int16", 2},
    {"int32", "int", -1, "int32", 4},
    {"int64", "long", -1, "int64", 8},
    {"bool", NULL, -1, "bool", 1},
    {"float8_e4m3fnuz", NULL, -1, "fp8_e4m3fnuz", 1},
    {"float8_e5m2fnuz", NULL, -1, "fp8_e5m2fnuz", 1},
    {"uint16", NULL, -1, NULL, 2},
    {"uint32", NULL, -1, NULL, 4},
    {"uint64", NULL, -1, NULL, 8},
    {"complex32", "chalf", -1, NULL, 4},
    {"complex64", "cfloat", -1, NULL, 8},
    {"complex128", "cdouble", -1, NULL, 16},
};

#define LK_NDTYPES (sizeof LK_DTYPES / sizeof LK_DTYPES[0])

const lk_dtype *lk_dtype_from_id(int64_t id, int *is_none)
{
    size_t i;
    *is_none = id == 0;
    if (id == 1)
        id = 2; /* KV-DTYPE-ALIAS: legacy float16 id */
    for (i = 0; i < LK_NDTYPES; i++)
        if (LK_DTYPES[i].wire_id >= 0 && LK_DTYPES[i].wire_id == id)
            return &LK_DTYPES[i];
    return NULL;
}

const lk_dtype *lk_dtype_from_name(lk_span name)
{
    size_t i;
    for (i = 0; i < LK_NDTYPES; i++) {
        if (lk_span_eq_cstr(name, LK_DTYPES[i].name))
            return &LK_DTYPES[i];
        if (LK_DTYPES[i].alias != NULL && lk_span_eq_cstr(name, LK_DTYPES[i].alias))
            return &LK_DTYPES[i];
    }
    return NULL;
}

const lk_dtype *lk_dtype_from_key_name(lk_span name)
{
    size_t i;
    for (i = 0; i < LK_NDTYPES; i++)
        if (LK_DTYPES[i].key_name != NULL && lk_span_eq_cstr(name, LK_DTYPES[i].key_name))
            return &LK_DTYPES[i];
    return NULL;
}

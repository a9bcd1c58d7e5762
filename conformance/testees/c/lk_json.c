#include "lk_json.h"

#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n, i;
    lk_arena *arena;
    char *why;
    size_t why_size;
} lk_jparser;

static int lk_jerr(lk_jparser *ps, const char *what)
{
    snprintf(ps->why, ps->why_size, "%s at byte %lu", what, (unsigned long)ps->i);
    return -1;
}

static void lk_jskip_ws(lk_jparser *ps)
{
    while (ps->i < ps->n && (ps->p[ps->i] == ' ' || ps->p[ps->i] == '\t' ||
                             ps->p[ps->i] == '\r' || ps->p[ps->i] == '\n'))
        ps->i++;
}

static int lk_jhex4(lk_jparser *ps, unsigned *out)
{
    unsigned v = 0;
    size_t k;
    if (ps->n - ps->i < 4)
        return lk_jerr(ps, "truncated \\u escape");
    for (k = 0; k < 4; k++) {
        uint8_t c = ps->p[ps->i + k];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return lk_jerr(ps, "bad \\u escape");
        v = v * 16 + d;
    }
    ps->i += 4;
    *out = v;
    return 0;
}

/* UTF-8 of a code point; a lone surrogate keeps its 3-byte form (as Python's json keeps it
 * in the str, and the suite's TEXT fields encode it with "surrogatepass"). */
static size_t lk_put_utf8(uint8_t *p, unsigned cp)
{
    if (cp < 0x80) {
        p[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        p[0] = (uint8_t)(0xC0 | (cp >> 6));
        p[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        p[0] = (uint8_t)(0xE0 | (cp >> 12));
        p[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        p[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    p[0] = (uint8_t)(0xF0 | (cp >> 18));
    p[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    p[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    p[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static int lk_jstring(lk_jparser *ps, lk_span *out)
{
    size_t start = ++ps->i, end, off = 0;
    uint8_t *buf;
    /* the decoded string is never longer than its source */
    for (end = start; end < ps->n && ps->p[end] != '"'; end++)
        if (ps->p[end] == '\\')
            end++;
    if (end >= ps->n)
        return lk_jerr(ps, "unterminated string");
    buf = lk_arena_alloc(ps->arena, end - start);
    while (ps->i < end) {
        uint8_t c = ps->p[ps->i++];
        unsigned cp, lo;
        if (c < 0x20)
            return lk_jerr(ps, "control character in string");
        if (c != '\\') {
            buf[off++] = c;
            continue;
        }
        c = ps->p[ps->i++];
        switch (c) {
        case '"':
        case '\\':
        case '/':
            buf[off++] = c;
            break;
        case 'b':
            buf[off++] = '\b';
            break;
        case 'f':
            buf[off++] = '\f';
            break;
        case 'n':
            buf[off++] = '\n';
            break;
        case 'r':
            buf[off++] = '\r';
            break;
        case 't':
            buf[off++] = '\t';
            break;
        case 'u':
            if (lk_jhex4(ps, &cp))
                return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - ps->i >= 6 && ps->p[ps->i] == '\\' &&
                ps->p[ps->i + 1] == 'u') {
                size_t save = ps->i;
                ps->i += 2;
                if (lk_jhex4(ps, &lo))
                    return -1;
                if (lo >= 0xDC00 && lo <= 0xDFFF)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    ps->i = save;
            }
            off += lk_put_utf8(buf + off, cp);
            break;
        default:
            return lk_jerr(ps, "bad escape");
        }
    }
    ps->i = end + 1;
    *out = lk_span_of(buf, off);
    return 0;
}

static int lk_jnumber(lk_jparser *ps, lk_jvalue *v)
{
    int negative = 0;
    uint64_t mag = 0, limit;
    size_t digits = 0, first = ps->i;
    lk_int *out = &v->u.integer;
    v->type = LK_J_INT;
    if (ps->p[ps->i] == '-') {
        negative = 1;
        ps->i++;
        if (ps->n - ps->i >= 8 && memcmp(ps->p + ps->i, "Infinity", 8) == 0) {
            ps->i += 8;
            v->type = LK_J_FLOAT;
            return 0;
        }
    }
    limit = negative ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    out->big = 0;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
        unsigned d = (unsigned)(ps->p[ps->i] - '0');
        if (digits == 1 && ps->p[first + (size_t)negative] == '0')
            break; /* "01": the number is 0, the "1" is extra text */
        ps->i++;
        digits++;
        if (out->big == 0 && mag > (limit - d) / 10)
            out->big = negative ? -1 : 1;
        if (out->big == 0)
            mag = mag * 10 + d;
    }
    if (digits == 0)
        return lk_jerr(ps, "bad number");
    if (ps->i + 1 < ps->n && ps->p[ps->i] == '.' && ps->p[ps->i + 1] >= '0' &&
        ps->p[ps->i + 1] <= '9') {
        v->type = LK_J_FLOAT;
        for (ps->i++; ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9'; ps->i++)
            continue;
    }
    if (ps->i < ps->n && (ps->p[ps->i] == 'e' || ps->p[ps->i] == 'E')) {
        size_t e = ps->i + 1;
        if (e < ps->n && (ps->p[e] == '+' || ps->p[e] == '-'))
            e++;
        if (e < ps->n && ps->p[e] >= '0' && ps->p[e] <= '9') {
            v->type = LK_J_FLOAT;
            for (ps->i = e; ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9'; ps->i++)
                continue;
        }
    }
    if (out->big)
        out->v = negative ? INT64_MIN : INT64_MAX;
    else if (negative)
        out->v = mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag;
    else
        out->v = (int64_t)mag;
    return 0;
}

static int lk_jliteral(lk_jparser *ps, const char *word)
{
    size_t n = strlen(word);
    if (ps->n - ps->i < n || memcmp(ps->p + ps->i, word, n) != 0)
        return lk_jerr(ps, "bad literal");
    ps->i += n;
    return 0;
}

/* Items of the container opening at ps->i (an upper bound: commas at its own level + 1),
 * so each container is allocated once, at its exact size. */
static size_t lk_jcount(const lk_jparser *ps)
{
    size_t i, count = 1, level = 0;
    int in_str = 0;
    for (i = ps->i + 1; i < ps->n; i++) {
        uint8_t c = ps->p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            level++;
        } else if (c == ']' || c == '}') {
            if (level-- == 0)
                break;
        } else if (c == ',' && level == 0) {
            count++;
        }
    }
    return count;
}

static int lk_jvalue_parse(lk_jparser *ps, lk_jvalue *v, int depth);

static int lk_jcontainer(lk_jparser *ps, lk_jvalue *v, int depth)
{
    int is_object = ps->p[ps->i] == '{';
    uint8_t close = is_object ? '}' : ']';
    size_t count, k;
    if (depth >= LK_JSON_MAX_DEPTH)
        return lk_jerr(ps, "containers nest too deep");
    count = lk_jcount(ps);
    v->type = is_object ? LK_J_OBJECT : LK_J_ARRAY;
    ps->i++;
    lk_jskip_ws(ps);
    if (ps->i < ps->n && ps->p[ps->i] == close) {
        ps->i++;
        return 0;
    }
    if (is_object)
        v->u.object.fields = lk_arena_array(ps->arena, count, sizeof(lk_jfield));
    else
        v->u.array.items = lk_arena_array(ps->arena, count, sizeof(lk_jvalue));
    for (k = 0;; k++) {
        lk_jvalue *item;
        if (k >= count)
            return lk_jerr(ps, "malformed container");
        if (is_object) {
            lk_jfield *f = &v->u.object.fields[k];
            lk_jskip_ws(ps);
            if (ps->i >= ps->n || ps->p[ps->i] != '"')
                return lk_jerr(ps, "expected a member name");
            if (lk_jstring(ps, &f->name))
                return -1;
            lk_jskip_ws(ps);
            if (ps->i >= ps->n || ps->p[ps->i] != ':')
                return lk_jerr(ps, "expected ':'");
            ps->i++;
            item = &f->value;
        } else {
            item = &v->u.array.items[k];
        }
        if (lk_jvalue_parse(ps, item, depth + 1))
            return -1;
        if (is_object)
            v->u.object.n = k + 1;
        else
            v->u.array.n = k + 1;
        lk_jskip_ws(ps);
        if (ps->i < ps->n && ps->p[ps->i] == ',') {
            ps->i++;
            continue;
        }
        if (ps->i < ps->n && ps->p[ps->i] == close) {
            ps->i++;
            return 0;
        }
        return lk_jerr(ps, "expected ',' or the container's end");
    }
}

static int lk_jvalue_parse(lk_jparser *ps, lk_jvalue *v, int depth)
{
    lk_jskip_ws(ps);
    memset(v, 0, sizeof *v);
    if (ps->i >= ps->n)
        return lk_jerr(ps, "missing value");
    switch (ps->p[ps->i]) {
    case 'n':
        v->type = LK_J_NULL;
        return lk_jliteral(ps, "null");
    case 't':
        v->type = LK_J_BOOL;
        v->u.boolean = 1;
        return lk_jliteral(ps, "true");
    case 'f':
        v->type = LK_J_BOOL;
        return lk_jliteral(ps, "false");
    case 'N':
        v->type = LK_J_FLOAT;
        return lk_jliteral(ps, "NaN");
    case 'I':
        v->type = LK_J_FLOAT;
        return lk_jliteral(ps, "Infinity");
    case '"':
        v->type = LK_J_STR;
        return lk_jstring(ps, &v->u.str);
    case '[':
    case '{':
        return lk_jcontainer(ps, v, depth);
    default:
        if (ps->p[ps->i] == '-' || (ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9'))
            return lk_jnumber(ps, v);
        return lk_jerr(ps, "unexpected character");
    }
}

int lk_json_parse(lk_span text, lk_arena *arena, lk_jvalue *out, char *why, size_t why_size)
{
    lk_jparser ps;
    ps.p = text.p;
    ps.n = text.n;
    ps.i = 0;
    ps.arena = arena;
    ps.why = why;
    ps.why_size = why_size;
    if (lk_jvalue_parse(&ps, out, 0))
        return -1;
    lk_jskip_ws(&ps);
    if (ps.i != ps.n)
        return lk_jerr(&ps, "extra data after the value");
    return 0;
}

const lk_jvalue *lk_json_get(const lk_jvalue *obj, const char *name)
{
    size_t k;
    if (obj->type != LK_J_OBJECT)
        return NULL;
    for (k = obj->u.object.n; k-- > 0;)
        if (lk_span_eq_cstr(obj->u.object.fields[k].name, name))
            return &obj->u.object.fields[k].value;
    return NULL;
}

void lk_jw_begin(lk_jwriter *w, FILE *f)
{
    w->f = f;
    w->fields = 0;
    fputc('{', f);
}

void lk_jw_key(lk_jwriter *w, const char *name)
{
    if (w->fields++)
        fputc(',', w->f);
    fprintf(w->f, "\"%s\":", name);
}

void lk_jw_null(lk_jwriter *w)
{
    fputs("null", w->f);
}

void lk_jw_bool(lk_jwriter *w, int v)
{
    fputs(v ? "true" : "false", w->f);
}

void lk_jw_int(lk_jwriter *w, int64_t v)
{
    fprintf(w->f, "%lld", (long long)v);
}

void lk_jw_uint(lk_jwriter *w, uint64_t v)
{
    fprintf(w->f, "%llu", (unsigned long long)v);
}

void lk_jw_str(lk_jwriter *w, lk_span s)
{
    size_t i;
    fputc('"', w->f);
    for (i = 0; i < s.n; i++) {
        uint8_t c = s.p[i];
        if (c == '"' || c == '\\')
            fprintf(w->f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7F) /* ASCII out: bytes of messages may be anything */
            fprintf(w->f, "\\u%04x", c);
        else
            fputc(c, w->f);
    }
    fputc('"', w->f);
}

void lk_jw_cstr(lk_jwriter *w, const char *s)
{
    lk_jw_str(w, lk_cstr(s));
}

void lk_jw_raw(lk_jwriter *w, const char *text)
{
    fputs(text, w->f);
}

void lk_jw_hex_part(lk_jwriter *w, lk_span s)
{
    static const char hexchars[] = "0123456789abcdef";
    char chunk[512];
    size_t i, k = 0;
    for (i = 0; i < s.n; i++) {
        chunk[k++] = hexchars[s.p[i] >> 4];
        chunk[k++] = hexchars[s.p[i] & 15];
        if (k == sizeof chunk) {
            fwrite(chunk, 1, k, w->f);
            k = 0;
        }
    }
    fwrite(chunk, 1, k, w->f);
}

void lk_jw_hex(lk_jwriter *w, lk_span s)
{
    fputc('"', w->f);
    lk_jw_hex_part(w, s);
    fputc('"', w->f);
}

void lk_jw_end(lk_jwriter *w)
{
    fputs("}\n", w->f);
    fflush(w->f);
}

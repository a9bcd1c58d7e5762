/* lmckv-testee: the independent C implementation of lmckv's formats, driven through the
 * JSON-lines protocol of conformance/TESTEE.md on stdin/stdout. One request per line, one
 * response per line, in order; end of input ends the program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lk_arena.h"
#include "lk_json.h"
#include "lk_ops.h"
#include "lk_request.h"

#define LK_TESTEE_NAME "c"
#define LK_TESTEE_VERSION "1.0"
#define LK_PROTOCOL_VERSION 1

/* One line of any length into *buf (without the newline); 0 at end of input. */
static int lk_read_line(FILE *f, char **buf, size_t *cap, size_t *len)
{
    *len = 0;
    for (;;) {
        size_t got;
        if (*cap - *len < 2) {
            size_t grow = *cap ? *cap * 2 : 1 << 16;
            char *p = realloc(*buf, grow);
            if (p == NULL) {
                fprintf(stderr, "lmckv-testee: out of memory reading a line\n");
                abort();
            }
            *buf = p;
            *cap = grow;
        }
        if (fgets(*buf + *len, (int)((*cap - *len) > 1 << 30 ? 1 << 30 : *cap - *len), f) ==
            NULL)
            return *len > 0;
        got = strlen(*buf + *len);
        *len += got;
        if (*len > 0 && (*buf)[*len - 1] == '\n') {
            (*buf)[--*len] = '\0';
            if (*len > 0 && (*buf)[*len - 1] == '\r')
                (*buf)[--*len] = '\0';
            return 1;
        }
    }
}

static void lk_write_hello(lk_jwriter *w)
{
    size_t i;
    lk_jw_key(w, "ok");
    lk_jw_bool(w, 1);
    lk_jw_key(w, "name");
    lk_jw_cstr(w, LK_TESTEE_NAME);
    lk_jw_key(w, "version");
    lk_jw_cstr(w, LK_TESTEE_VERSION);
    lk_jw_key(w, "protocol");
    lk_jw_int(w, LK_PROTOCOL_VERSION);
    lk_jw_key(w, "capabilities");
    lk_jw_raw(w, "[");
    for (i = 0; i < LK_NOPS; i++) {
        if (i)
            lk_jw_raw(w, ",");
        lk_jw_cstr(w, LK_OPS[i].name);
    }
    lk_jw_raw(w, "]");
}

static void lk_write_error(lk_jwriter *w, const lk_err *err)
{
    lk_jw_key(w, "ok");
    lk_jw_bool(w, 0);
    lk_jw_key(w, "error");
    lk_jw_cstr(w, err->cls);
    lk_jw_key(w, "message");
    lk_jw_cstr(w, err->msg);
}

/* Serve one request line. */
static void lk_serve(lk_span line, lk_arena *arena, FILE *out)
{
    lk_jvalue obj;
    lk_request req;
    lk_jwriter w;
    lk_err err;
    lk_span op;
    lk_int id;
    int has_id = 0;
    char why[160];
    lk_op_fn fn;
    err.cls = NULL;
    err.msg[0] = '\0';
    lk_jw_begin(&w, out);
    if (lk_json_parse(line, arena, &obj, why, sizeof why) || obj.type != LK_J_OBJECT) {
        if (obj.type != LK_J_OBJECT)
            snprintf(why, sizeof why, "%s", "another JSON value");
        lk_fail(&err, LK_BAD_REQUEST, "request is not a JSON object: %s", why);
        lk_jw_key(&w, "id");
        lk_jw_null(&w);
        lk_write_error(&w, &err);
        lk_jw_end(&w);
        return;
    }
    req.obj = &obj;
    req.arena = arena;
    lk_jw_key(&w, "id");
    if (lk_req_int(&req, "id", 0, 0, &id, &has_id, &err) == 0 && has_id)
        lk_jw_int(&w, id.v);
    else
        lk_jw_null(&w);
    if (err.cls != NULL || lk_req_name(&req, "op", 1, &op, &err)) {
        lk_write_error(&w, &err);
    } else if (lk_span_eq_cstr(op, "hello")) {
        lk_write_hello(&w);
    } else if ((fn = lk_find_op(op)) == NULL) {
        lk_fail(&err, LK_UNSUPPORTED_OP, "operation %.*s is not implemented",
                (int)(op.n > 64 ? 64 : op.n), (const char *)op.p);
        lk_write_error(&w, &err);
    } else if (fn(&req, &w, &err)) {
        lk_write_error(&w, &err);
    }
    lk_jw_end(&w);
}

int main(void)
{
    char *buf = NULL;
    size_t cap = 0, len = 0;
    lk_arena arena;
    static char out_buf[1 << 16];
    setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
    lk_arena_init(&arena);
    while (lk_read_line(stdin, &buf, &cap, &len)) {
        if (len == 0)
            continue;
        lk_arena_reset(&arena, len);
        lk_serve(lk_span_of(buf, len), &arena, stdout);
    }
    lk_arena_free(&arena);
    free(buf);
    return 0;
}

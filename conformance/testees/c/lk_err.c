#include "lk_err.h"

#include <stdarg.h>
#include <stdio.h>

int lk_fail(lk_err *err, const char *cls, const char *fmt, ...)
{
    va_list ap;
    err->cls = cls;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* UTF-8 as Python's strict codec reads it (KV-HASHES, PROTO-KEY-FIELD): shortest form only,
 * no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. */
#ifndef LK_UTF8_H
#define LK_UTF8_H

#include "lk_bytes.h"

/* 1 when `s` is strict UTF-8. */
int lk_utf8_valid(lk_span s);

/* Characters (code points) in `s`, counting every byte that does not continue a sequence:
 * exact for strict UTF-8 and for the surrogate-carrying form the wire's TEXT fields allow. */
size_t lk_utf8_chars(lk_span s);

#endif

#include "lk_utf8.h"

int lk_utf8_valid(lk_span s)
{
    size_t i = 0;
    while (i < s.n) {
        uint8_t b = s.p[i];
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (b < 0x80) {
            i++;
            continue;
        }
        if (b >= 0xC2 && b <= 0xDF) {
            need = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            if (b == 0xE0)
                lo = 0xA0; /* no overlong 3-byte forms */
            if (b == 0xED)
                hi = 0x9F; /* no surrogates */
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            if (b == 0xF0)
                lo = 0x90; /* no overlong 4-byte forms */
            if (b == 0xF4)
                hi = 0x8F; /* nothing above U+10FFFF */
        } else {
            return 0;
        }
        if (s.n - i <= need)
            return 0;
        if (s.p[i + 1] < lo || s.p[i + 1] > hi)
            return 0;
        if (need >= 2 && (s.p[i + 2] & 0xC0) != 0x80)
            return 0;
        if (need == 3 && (s.p[i + 3] & 0xC0) != 0x80)
            return 0;
        i += need + 1;
    }
    return 1;
}

size_t lk_utf8_chars(lk_span s)
{
    size_t i, count = 0;
    for (i = 0; i < s.n; i++)
        if ((s.p[i] & 0xC0) != 0x80)
            count++;
    return count;
}

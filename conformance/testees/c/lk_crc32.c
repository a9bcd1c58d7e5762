#include "lk_crc32.h"

/* Slice-by-4 tables, built on first use: table[0] is the classic byte table. */
static uint32_t lk_crc_table[4][256];
static int lk_crc_ready;

static void lk_crc_init(void)
{
    uint32_t i, k, c;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++)
            c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        lk_crc_table[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        c = lk_crc_table[0][i];
        for (k = 1; k < 4; k++) {
            c = lk_crc_table[0][c & 0xFFu] ^ (c >> 8);
            lk_crc_table[k][i] = c;
        }
    }
    lk_crc_ready = 1;
}

uint32_t lk_crc32(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    if (!lk_crc_ready)
        lk_crc_init();
    while (n >= 4) {
        c ^= (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
             ((uint32_t)p[3] << 24);
        c = lk_crc_table[3][c & 0xFFu] ^ lk_crc_table[2][(c >> 8) & 0xFFu] ^
            lk_crc_table[1][(c >> 16) & 0xFFu] ^ lk_crc_table[0][c >> 24];
        p += 4;
        n -= 4;
    }
    while (n--)
        c = lk_crc_table[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

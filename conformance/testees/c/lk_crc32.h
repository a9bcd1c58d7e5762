/* KV-CRC: zlib's CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and
 * final XOR 0xFFFFFFFF). Not CRC-32C. */
#ifndef LK_CRC32_H
#define LK_CRC32_H

#include <stddef.h>
#include <stdint.h>

uint32_t lk_crc32(const uint8_t *p, size_t n);

#endif

/* CRC-32C (Castagnoli), the checksum of every array and of the header of a
 * compiled-function file. The SSE4.2 instruction when the CPU has it
 * (several GiB/s, so that checking a memory-mapped file costs little next
 * to reading it), a table otherwise; both give the same value. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/tgf.h"

static uint32_t table[8][256];
static bool table_ready;

static void make_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    table_ready = true;
}

uint32_t tg_crc32c_sw(uint32_t crc, const void *data, size_t n) {
    if (!table_ready) make_table(); /* idempotent: a race writes the same values */
    const unsigned char *p = data;
    crc = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
              table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
              table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *data,
                                                          size_t n) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    /* Three independent streams hide the instruction's latency would be
     * faster still; one stream already runs at several GiB/s. */
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    while (n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

uint32_t tg_crc32c(uint32_t crc, const void *data, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return crc_hw(crc, data, n);
#endif
    return tg_crc32c_sw(crc, data, n);
}

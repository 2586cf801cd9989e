/* CRC-32C (Castagnoli), the checksum of every array and of the header of a
 * compiled-function file. The SSE4.2 instruction when the CPU has it
 * (several GiB/s, so that checking a memory-mapped file costs little next
 * to reading it), a table otherwise; both give the same value; a buffer
 * of 16 MiB or more in pieces on several threads. The same split serves
 * zip's CRC-32 (zlib's; .npz archives, tensor/npz.c). */
#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <zlib.h>

#include "io/io.h"
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

/* The crc32 instruction has a latency of three cycles and a throughput of
 * one: three independent streams over three blocks of BLOCK bytes keep it
 * busy, and the three registers are then combined. Running the register
 * through n zero bytes is linear in it, so "shift by BLOCK bytes" is four
 * byte tables (shift1) and "by 2*BLOCK bytes" four more (shift2). */
enum { BLOCK = 4096 };
static uint32_t shift1[4][256], shift2[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2"))) static uint32_t zeros(uint32_t c, size_t n) {
    uint64_t r = c;
    for (size_t i = 0; i < n; i += 8) r = __builtin_ia32_crc32di(r, 0);
    return (uint32_t)r;
}

/* The shift is linear over GF(2): each table entry is the XOR of the
 * shifts of its bits, so 32 runs through the zero bytes per table (64 in
 * all) rather than one per entry (2048 runs of 512 instructions: a
 * millisecond at the first restore of every process). */
static void make_shift(void) {
    for (int k = 0; k < 4; k++) {
        shift1[k][0] = shift2[k][0] = 0;
        for (int bit = 0; bit < 8; bit++) {
            uint32_t one = zeros(1u << (8 * k + bit), BLOCK), two = zeros(one, BLOCK);
            for (uint32_t b = 1u << bit; b < 2u << bit; b++) {
                shift1[k][b] = shift1[k][b ^ (1u << bit)] ^ one;
                shift2[k][b] = shift2[k][b ^ (1u << bit)] ^ two;
            }
        }
    }
}

static uint32_t apply(uint32_t t[4][256], uint32_t r) {
    return t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ t[2][(r >> 16) & 0xff] ^ t[3][r >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *data,
                                                          size_t n) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    if (n >= 3 * BLOCK) {
        pthread_once(&shift_once, make_shift);
        while (n >= 3 * BLOCK) {
            uint64_t a = c, b = 0, d = 0;
            for (size_t i = 0; i < BLOCK; i += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p + i, 8);
                memcpy(&w1, p + BLOCK + i, 8);
                memcpy(&w2, p + 2 * BLOCK + i, 8);
                a = __builtin_ia32_crc32di(a, w0);
                b = __builtin_ia32_crc32di(b, w1);
                d = __builtin_ia32_crc32di(d, w2);
            }
            c = apply(shift2, (uint32_t)a) ^ apply(shift1, (uint32_t)b) ^ (uint32_t)d;
            p += 3 * BLOCK;
            n -= 3 * BLOCK;
        }
    }
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

static uint32_t crc_one(uint32_t crc, const void *data, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return crc_hw(crc, data, n);
#endif
    return tg_crc32c_sw(crc, data, n);
}

/* Combining: the CRC of A then B is the CRC of A run through |B| zero
 * bytes, XOR the CRC of B alone (zlib's crc32_combine, with CRC-32C's
 * polynomial). Polynomials mod P are 32-bit words, bit-reflected as the
 * CRC is: x^0 is the top bit. a * b mod P: */
static uint32_t mulmod(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if (!(a & (m - 1))) break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

/* x^(8n) mod P, by squaring: x^(2^k) for k = 3, 4, ... */
static uint32_t x8nmod(uint64_t n) {
    uint32_t p = 1u << 31, sq = 1u << 30; /* x^0; x^1 */
    for (int k = 0; k < 3; k++) sq = mulmod(sq, sq); /* x^8: one byte */
    for (; n; n >>= 1) {
        if (n & 1) p = mulmod(sq, p);
        sq = mulmod(sq, sq);
    }
    return p;
}

uint32_t tg_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return mulmod(x8nmod(len_b), crc_a) ^ crc_b;
}

/* Large buffers (a memory-mapped file's weights) in pieces on the OpenMP
 * threads, combined in order: checking is bound by reading the pages, and
 * every core reads. Below tg_crc32c_par_min, or inside a parallel region,
 * one thread: waking the threads and, once they have touched a mapping,
 * unmapping it (the other cores' TLBs are flushed) cost a few hundred
 * microseconds, which only buffers of 16 MiB and more repay (restoring a
 * 2 MiB array in a loop: 0.49 ms on one thread, 0.65 on two; 16 MiB 1.64
 * and 1.46; 1 GiB 5.5 and 10.8 GiB/s, on this 2-core VM). Pieces are at
 * least half of it. */
size_t tg_crc32c_par_min = (size_t)16 << 20;

/* Piece i of n bytes cut in nt at multiples of 4 KiB: [*at, *at + *len). */
static void piece(size_t n, int nt, int i, size_t *at, size_t *len) {
    size_t step = ((n + (size_t)nt - 1) / (size_t)nt + 4095) & ~(size_t)4095;
    size_t a = (size_t)i * step < n ? (size_t)i * step : n;
    size_t e = i == nt - 1 || (size_t)(i + 1) * step >= n ? n : (size_t)(i + 1) * step;
    *at = a;
    *len = e - a;
}

typedef uint32_t (*crc_fn)(uint32_t crc, const void *data, size_t n);
typedef uint32_t (*crc_combine_fn)(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

static uint32_t crc_split(uint32_t crc, const void *data, size_t n, crc_fn one, crc_combine_fn combine) {
    const size_t par_min = tg_crc32c_par_min ? tg_crc32c_par_min : 2;
    /* (a forked child has one thread: core.c) */
    int nt = n >= par_min && !omp_in_parallel() ? omp_get_max_threads() : 1;
    if (nt > 1 && (size_t)nt > n / (par_min / 2)) nt = (int)(n / (par_min / 2));
    if (nt > 64) nt = 64;
    if (nt <= 1) return one(crc, data, n);
    uint32_t part[64];
    const unsigned char *p = data;
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (int i = 0; i < nt; i++) {
        size_t at, len;
        piece(n, nt, i, &at, &len);
        part[i] = one(i ? 0 : crc, p + at, len);
    }
    crc = part[0];
    for (int i = 1; i < nt; i++) {
        size_t at, len;
        piece(n, nt, i, &at, &len);
        crc = combine(crc, part[i], len);
    }
    return crc;
}

uint32_t tg_crc32c(uint32_t crc, const void *data, size_t n) {
    return crc_split(crc, data, n, crc_one, tg_crc32c_combine);
}

static uint32_t zip_one(uint32_t crc, const void *data, size_t n) {
    return (uint32_t)crc32_z(crc, data, n);
}

static uint32_t zip_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b);
}

uint32_t tg_crc32_zip(uint32_t crc, const void *data, size_t n) {
    return crc_split(crc, data, n, zip_one, zip_combine);
}

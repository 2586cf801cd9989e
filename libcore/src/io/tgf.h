/* Private: compiled-function files (tgf.c) and their checksum. */
#ifndef TG_TGF_INTERNAL_H
#define TG_TGF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes, continuing from crc (0 to start). */
uint32_t tg_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t tg_crc32c_sw(uint32_t crc, const void *data, size_t n);

/* The fixed preamble at offset 0 (all integers little-endian). */
#define TG_TGF_MAGIC "TGF\x89\r\n\x1a\n"
#define TG_TGF_PREAMBLE 64
#define TG_TGF_ALIGN 64

/* For the crash test: when set, called after each chunk the saver writes
 * to its temporary file. */
extern void (*tg_tgf_write_hook)(size_t written);

#endif

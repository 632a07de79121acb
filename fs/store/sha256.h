/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4), small and dependency-free: the originals store names each kept
 * content by its digest, so equal contents are stored once.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PW_SHA256_LEN 32
#define PW_SHA256_HEX (PW_SHA256_LEN * 2 + 1)

typedef struct pw_sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	uint8_t buf[64];
	size_t used;
} pw_sha256;

void pw_sha256_init(pw_sha256 *c);
void pw_sha256_update(pw_sha256 *c, const void *data, size_t n);
void pw_sha256_final(pw_sha256 *c, uint8_t out[PW_SHA256_LEN]);
/*
 * The padding that ends a hash of 64-byte blocks in FIPS 180-4's way (5.1.1: SHA-1 and
 * SHA-256 alike) after LEN bytes: 0x80, zeros up to 56 bytes past a block's start, and LEN
 * in bits as 8 bytes big-endian. Writes it into OUT and returns its size (9 to
 * PW_MD_PAD_MAX bytes): hashing those bytes last completes the message. binpatch.c's SHA-1
 * (git's object ids) ends with it too.
 */
#define PW_MD_PAD_MAX 72
size_t pw_md_padding(uint64_t len, uint8_t out[PW_MD_PAD_MAX]);
/* The digest as 64 lowercase hex digits and a NUL. */
void pw_sha256_hex(const uint8_t digest[PW_SHA256_LEN], char out[PW_SHA256_HEX]);

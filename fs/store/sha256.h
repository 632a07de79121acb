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
/* The digest as 64 lowercase hex digits and a NUL. */
void pw_sha256_hex(const uint8_t digest[PW_SHA256_LEN], char out[PW_SHA256_HEX]);

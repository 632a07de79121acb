/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (fs/store/sha256.h), which names every content the originals store keeps: the
 * test vectors of FIPS 180-4 (one block, two blocks, a million bytes), and the same digest
 * whatever the sizes of the pieces it is fed in (the partial-block path, and the whole
 * blocks hashed together, through the SHA extensions where the processor has them).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "store/sha256.h"

static void digest(const void *data, size_t n, size_t piece, char hex[PW_SHA256_HEX])
{
	pw_sha256 c;
	uint8_t d[PW_SHA256_LEN];
	const uint8_t *p = data;

	pw_sha256_init(&c);
	for (size_t off = 0; off < n; off += piece)
		pw_sha256_update(&c, p + off, n - off < piece ? n - off : piece);
	pw_sha256_final(&c, d);
	pw_sha256_hex(d, hex);
}

Test(sha256, fips_vectors)
{
	static const struct {
		const char *in, *want;
	} v[] = {
	    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	};
	char hex[PW_SHA256_HEX];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		digest(v[i].in, strlen(v[i].in), 1 << 20, hex);
		cr_expect_str_eq(hex, v[i].want, "\"%s\"", v[i].in);
	}
}

Test(sha256, a_million_as_in_any_pieces)
{
	static const size_t pieces[] = {1, 3, 63, 64, 65, 1000, 4096, 1000000};
	size_t n = 1000000;
	char *a = malloc(n), hex[PW_SHA256_HEX];

	cr_assert_not_null(a);
	memset(a, 'a', n);
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		digest(a, n, pieces[i], hex);
		cr_expect_str_eq(hex,
				 "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
				 "pieces of %zu", pieces[i]);
	}
	free(a);
}

/* SPDX-License-Identifier: MIT */
/* git's binary patch for changes.diff (binpatch.h). */
#include "binpatch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "store/sha256.h"
#include "util.h"

#define LINE_BYTES 52 /* the bytes one base85 line carries, as git writes them */

/* ---- SHA-1 (FIPS 180-4), for git's object ids only ------------------------------------- */

typedef struct sha1 {
	uint32_t h[5];
	uint64_t len;
	uint8_t buf[64];
	size_t used;
} sha1;

static uint32_t rol(uint32_t x, unsigned n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(sha1 *c, const uint8_t *p)
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = c->h[0], b = c->h[1], d = c->h[3], e = c->h[4], cc = c->h[2];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20)
			f = (b & cc) | (~b & d), k = 0x5a827999;
		else if (i < 40)
			f = b ^ cc ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (b & cc) | (b & d) | (cc & d), k = 0x8f1bbcdc;
		else
			f = b ^ cc ^ d, k = 0xca62c1d6;
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = cc;
		cc = rol(b, 30);
		b = a;
		a = t;
	}
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
}

static void sha1_init(sha1 *c)
{
	*c = (sha1){.h = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0}};
}

static void sha1_update(sha1 *c, const void *data, size_t n)
{
	const uint8_t *p = data;
	c->len += n;
	while (n) {
		size_t take = 64 - c->used < n ? 64 - c->used : n;
		memcpy(c->buf + c->used, p, take);
		c->used += take;
		p += take;
		n -= take;
		if (c->used == 64) {
			sha1_block(c, c->buf);
			c->used = 0;
		}
	}
}

static void sha1_hex(sha1 *c, char out[PW_GIT_OID_HEX])
{
	uint8_t pad[PW_MD_PAD_MAX];
	sha1_update(c, pad, pw_md_padding(c->len, pad));
	for (int i = 0; i < 5; i++)
		snprintf(out + 8 * i, 9, "%08x", c->h[i]);
}

/* git's id of the blob DATA (N bytes). */
static void blob_id(const uint8_t *data, size_t n, char out[PW_GIT_OID_HEX])
{
	char head[32];
	int k = snprintf(head, sizeof(head), "blob %zu", n);
	sha1 c;
	sha1_init(&c);
	sha1_update(&c, head, (size_t)k + 1); /* with its NUL */
	sha1_update(&c, data, n);
	sha1_hex(&c, out);
}

/* ---- the pieces --------------------------------------------------------------------------- */

/* The whole content of FD (from offset 0) into *RET (malloc'd) and *RET_N; -1 for none is
 * an empty one. 0 or -errno. */
static int slurp(int fd, uint8_t **ret, size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	if (fd < 0)
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	size_t cap = (size_t)st.st_size + 1, n = 0;
	uint8_t *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			uint8_t *nb = realloc(b, cap * 2);
			if (!nb) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
			cap *= 2;
		}
		ssize_t k = pread(fd, b + n, cap - n, (off_t)n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = negative_errno();
			free(b);
			return e;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	*ret = b;
	*ret_n = n;
	return 0;
}

static const char en85[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			   "!#$%&()*+-;<=>?@^_`{|}~";

/* One line of git's base85: a length letter (A-Z: 1-26 bytes, a-z: 27-52), then each group
 * of 4 bytes (the last padded with zeros) as 5 characters, most significant first. */
static void line85(FILE *out, const uint8_t *p, size_t n)
{
	fputc(n <= 26 ? 'A' + (int)n - 1 : 'a' + (int)n - 27, out);
	for (size_t i = 0; i < n; i += 4) {
		uint32_t acc = 0;
		for (size_t j = 0; j < 4; j++)
			acc = acc << 8 | (i + j < n ? p[i + j] : 0);
		char five[5];
		for (int k = 4; k >= 0; k--) {
			five[k] = en85[acc % 85];
			acc /= 85;
		}
		fwrite(five, 1, 5, out);
	}
	fputc('\n', out);
}

/* "literal N", DATA deflated in base85 lines, and the blank line that ends a hunk. */
static int literal(FILE *out, const uint8_t *data, size_t n)
{
	uLongf cap = compressBound((uLong)n);
	_cleanup_free_ uint8_t *z = malloc(cap ? cap : 1);
	if (!z)
		return -ENOMEM;
	if (compress2(z, &cap, n ? data : (const uint8_t *)"", (uLong)n, Z_BEST_COMPRESSION) !=
	    Z_OK)
		return -EIO;
	fprintf(out, "literal %zu\n", n);
	for (size_t i = 0; i < cap; i += LINE_BYTES)
		line85(out, z + i, cap - i < LINE_BYTES ? cap - i : LINE_BYTES);
	fputc('\n', out);
	return 0;
}

char *pw_git_binary_patch(int afd, int bfd, unsigned mode, size_t room, bool *ret_too_big)
{
	*ret_too_big = false;
	_cleanup_free_ uint8_t *a = NULL, *b = NULL;
	size_t na, nb;
	if (slurp(afd, &a, &na) < 0 || slurp(bfd, &b, &nb) < 0)
		return NULL;
	/* base85 is 5/4 of the deflated size, which is at most a little over the original:
	 * refuse what cannot fit before deflating it */
	if ((na + nb) / 8 > room) {
		*ret_too_big = true;
		return NULL;
	}
	char ida[PW_GIT_OID_HEX], idb[PW_GIT_OID_HEX];
	const char *null = "0000000000000000000000000000000000000000";
	if (afd >= 0)
		blob_id(a, na, ida);
	else
		snprintf(ida, sizeof(ida), "%s", null);
	if (bfd >= 0)
		blob_id(b, nb, idb);
	else
		snprintf(idb, sizeof(idb), "%s", null);
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	if (!out)
		return NULL;
	fprintf(out, "index %s..%s", ida, idb);
	if (mode)
		fprintf(out, " %06o", mode);
	fputs("\nGIT binary patch\n", out);
	int r = literal(out, b, nb); /* forward: the new content */
	if (r == 0)
		r = literal(out, a, na); /* reverse: the old one, for git apply -R */
	if (fclose(out) != 0 || r < 0) {
		free(text);
		return NULL;
	}
	if (len > room) {
		*ret_too_big = true;
		free(text);
		return NULL;
	}
	return text;
}

/* Is B (N bytes) well-formed UTF-8? Overlong forms, surrogates and code points past
 * U+10FFFF are not (jansson refuses them too). */
static bool utf8_valid(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = b[i];
		size_t k;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (i + k >= n)
			return false; /* cut short */
		for (size_t j = 1; j <= k; j++) {
			if ((b[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (b[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

bool pw_git_needs_binary(int fd)
{
	_cleanup_free_ uint8_t *b = NULL;
	size_t n;
	if (slurp(fd, &b, &n) < 0)
		return true; /* unreadable: no text to show */
	return memchr(b, 0, n) || !utf8_valid(b, n);
}

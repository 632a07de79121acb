/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by every module: cleanup attributes for local resources,
 * ownership transfer, and a few string helpers. Error convention across the project:
 * functions that can fail return int, >= 0 on success and -errno on failure, and write
 * their ret_* out-parameters only on success.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* Takes ownership away from a cleanup-attributed variable. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p_ = (p);                                                           \
		(p) = NULL;                                                                        \
		_p_;                                                                               \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd_ = (fd);                                                                   \
		(fd) = -1;                                                                         \
		_fd_;                                                                              \
	})

static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Makes room for one more element in the array *P of *CAP elements of SIZE bytes, N of them
 * in use: doubles it when full, from FIRST. 0, or -ENOMEM with the array unchanged. Use
 * PW_GROW (systemd's GREEDY_REALLOC, once). */
static inline int pw_grow(void **p, size_t *cap, size_t n, size_t size, size_t first)
{
	if (n < *cap)
		return 0;
	size_t want = *cap ? *cap * 2 : first;
	if (want < n + 1 || want > SIZE_MAX / size)
		return -ENOMEM;
	void *q = realloc(*p, want * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = want;
	return 0;
}
#define PW_GROW(array, cap, n, first)                                                              \
	pw_grow((void **)&(array), &(cap), (n), sizeof(*(array)), (first))

/* A run of bytes that grows as it is appended to, with a NUL kept after its LEN bytes, so that
 * text appended reads as a string. Starts as {0}; P is malloc'd (free it). */
typedef struct pw_bytes {
	char *p;
	size_t len, cap;
} pw_bytes;

/* Appends the N bytes at P to B: its room doubles as needed, from 512 bytes (one realloc for a
 * typical journal record). 0, or -ENOMEM with B unchanged. The one append of the encoders
 * (fs/undo/journal.c's records, policy/plan.c's frontmatter rewrite). */
static inline int pw_bytes_append(pw_bytes *b, const void *p, size_t n)
{
	if (n > SIZE_MAX / 4 - b->len)
		return -ENOMEM;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 512;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return -ENOMEM;
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/* A string written through stdio: fprintf to F, then pw_memtext_take. */
typedef struct pw_memtext {
	FILE *f;
	char *s;
	size_t n;
} pw_memtext;

/* Opens T's stream (open_memstream). False when memory runs out (T then holds nothing). */
static inline bool pw_memtext_open(pw_memtext *t)
{
	t->s = NULL;
	t->n = 0;
	t->f = open_memstream(&t->s, &t->n);
	return t->f != NULL;
}

/* Closes T's stream and hands over what was written (malloc'd), or NULL after a write error
 * (memory ran out: the text is incomplete, so none is given). */
static inline char *pw_memtext_take(pw_memtext *t)
{
	bool bad = ferror(t->f);

	if (fclose(t->f) != 0 || bad) {
		free(t->s);
		return NULL;
	}
	return t->s;
}

/* Runs DONE(&V[i]) on each of the N elements of the array V, then frees V (NULL: nothing to
 * do): the one free of an array whose elements own memory, PW_GROW's counterpart. */
#define PW_FREE_ARRAY(v, n, done)                                                                  \
	do {                                                                                       \
		__typeof__(v) _fa_v_ = (v);                                                        \
		size_t _fa_n_ = (n);                                                               \
		for (size_t _fa_i_ = 0; _fa_v_ && _fa_i_ < _fa_n_; _fa_i_++)                       \
			done(&_fa_v_[_fa_i_]);                                                     \
		free(_fa_v_);                                                                      \
	} while (0)

/* Closes without disturbing errno; -1 is ignored. */
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static inline bool streq_ptr(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static inline bool startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A copy of S, or NULL for NULL (and when memory runs out: a caller that must tell the two
 * apart checks S). */
static inline char *pw_dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/*
 * Is the N bytes at NAME one of the items of LIST, separated by SEP? The one lookup of a name
 * in a list written as a string: mount options "a,b,c" (SEP ','), the bash tables' names
 * "|a|b|" (SEP '|'). Empty items never match, nor does a NAME holding SEP (two items are not
 * one); a NULL LIST holds nothing. NAME holds no NUL in its N bytes.
 */
static inline bool pw_list_has(const char *list, char sep, const char *name, size_t n)
{
	if (!list || n == 0 || memchr(name, sep, n))
		return false;
	for (const char *p = list; p; p = strchr(p, sep), p = p ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && (p[n] == sep || p[n] == '\0'))
			return true;
	return false;
}

/* Is NAME one of the comma-separated mount options in OPTS ("rw,allow_other")? */
static inline bool pw_opts_has(const char *opts, const char *name)
{
	return pw_list_has(opts, ',', name, strlen(name));
}

/*
 * The name of enum value V in NAMES, a table written with designated initializers
 * ([PW_X] = "x"); FALLBACK for a value outside the table or without a name there. The one
 * way an enum is named (use PW_NAME_OF).
 */
static inline const char *pw_name_of(const char *const *names, size_t n, long v,
				     const char *fallback)
{
	return v >= 0 && (size_t)v < n && names[v] ? names[v] : fallback;
}
#define PW_NAME_OF(names, v, fallback) pw_name_of((names), ELEMENTSOF(names), (long)(v), (fallback))

/* The value whose name in NAMES is NAME, or -EINVAL (a NULL NAME names nothing). Use
 * PW_NAME_INDEX. */
static inline int pw_name_index(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (names[i] && strcmp(names[i], name) == 0)
			return (int)i;
	return -EINVAL;
}
#define PW_NAME_INDEX(names, name) pw_name_index((names), ELEMENTSOF(names), (name))

/* Returns a negative errno from errno, never 0 (defends against a caller that forgot). */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/* One read(2) of FD into BUF, at most LEN bytes, again when a signal interrupts it. Returns
 * the bytes read (0 at the end of the file), or -errno. */
static inline ssize_t pw_read_once(int fd, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = read(fd, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return negative_errno();
	}
}

/* Reads FD into BUF until LEN bytes or the end of the file, whichever comes first, through
 * interrupted reads. Returns the bytes read (fewer than LEN only at the end), or -errno. */
static inline ssize_t pw_read_upto(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pw_read_once(fd, (char *)buf + got, len - got);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * FNV-1a, for hash tables and stable short names (not for anything an attacker must not
 * steer: it is not keyed). Start from PW_FNV1A*_INIT and feed the bytes; the result of one
 * call is the H of the next, so several fields hash as one stream.
 */
#define PW_FNV1A64_INIT 0xcbf29ce484222325ull
#define PW_FNV1A32_INIT 2166136261u

static inline uint64_t pw_fnv1a64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

static inline uint64_t pw_fnv1a64_str(uint64_t h, const char *s)
{
	return pw_fnv1a64(h, s, strlen(s));
}

static inline uint32_t pw_fnv1a32(uint32_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 16777619u;
	return h;
}

static inline uint32_t pw_fnv1a32_str(uint32_t h, const char *s)
{
	return s ? pw_fnv1a32(h, s, strlen(s)) : h;
}

/* CLOCK in nanoseconds (CLOCK_MONOTONIC for deadlines, CLOCK_REALTIME for timestamps). */
static inline int64_t pw_clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK in milliseconds. */
static inline int64_t pw_clock_ms(clockid_t clock)
{
	return pw_clock_ns(clock) / 1000000;
}

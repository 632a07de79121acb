/* SPDX-License-Identifier: MIT */
/*
 * Glob compilation and matching.
 *
 * Why an NFA: a backtracking matcher (the shell's, or a naive recursive one) takes time
 * exponential in the number of stars on hostile input such as "a*a*a*...*b" against a long
 * run of 'a's. Policy patterns come from project files we do not trust, and matching runs on
 * every filesystem mutation and on lookups, so the work must be bounded by the pattern and
 * path lengths alone.
 *
 * A pattern compiles to a linear token program. State i means "tokens 0..i-1 have matched
 * the bytes read so far"; state ntok accepts. Every edge goes from i to i or i+1:
 *
 *   T_LIT c    byte c                         -> i+1
 *   T_SEP      byte '/'                       -> i+1   (a segment boundary)
 *   T_ANY      any byte but '/'               -> i+1
 *   T_CLASS    a byte of the class ('/' never) -> i+1
 *   T_STAR     any byte but '/'               -> i;   epsilon -> i+1
 *   T_DS       any byte                       -> i;   epsilon -> i+1 at a segment start
 *              ("**" followed by more segments: zero or more whole segments, each with
 *              its '/'; "at a segment start" means at offset 0 or just after a '/')
 *   T_DSEND    any byte                       -> i and i+1
 *              ("**" as the last segment: one or more bytes, so "a" "/" "**" needs a child)
 *
 * The matcher keeps the set of live states in a bitset and advances it one byte at a time:
 * O(len(path) * ntok) at worst, and ntok <= PW_GLOB_LEN_MAX. Since epsilon edges only go
 * forward, one ascending pass computes the closure.
 *
 * Anchoring, as in gitignore: a pattern with a '/' before its last segment is anchored at
 * the root and the program runs over the whole path. A pattern without one (a "basename"
 * pattern such as "*.pem" or "build/") compiles to the program of its one segment, run over
 * the path's last name (pw_glob_match) or over each of its names (pw_glob_match_tree): the
 * names are disjoint, so the work stays O(len(path) * ntok). "**" "/" NAME means the same
 * and is compiled the same way (fold_leading_dstar).
 *
 * Fast paths: the program's literal prefix is compared with memcmp before the simulation
 * starts, and four common shapes skip the simulation entirely: an exact literal
 * ("a/b.c", ".env"), a literal directory tree ("docs/design" "/" "**"), one star in the last
 * segment ("src" "/" "*.c", "*.pem") and a literal path at any depth ("**" "/a/b"). An
 * anchored pattern without "**" always matches a fixed number of segments, which makes
 * pw_glob_match_tree one match on the right ancestor; otherwise the tree match is one
 * simulation pass that also accepts at each '/' (the bytes before it name an ancestor
 * directory).
 *
 * An empty path is the project root. Only a pattern made of "**" segments alone matches it
 * ("**" spans zero segments); the root is not an ancestor for pw_glob_match_tree.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "glob.h"
#include "pw_limits.h"
#include "ref.h"
#include "util.h"

enum tok_op {
	T_LIT,
	T_SEP,
	T_ANY,
	T_CLASS,
	T_STAR,
	T_DS,
	T_DSEND,
};

struct tok {
	uint8_t op;
	uint8_t c;    /* T_LIT: the byte; T_SEP: '/' */
	uint16_t cls; /* T_CLASS: index into classes */
};

enum glob_kind {
	K_NFA,	    /* general simulation */
	K_EXACT,    /* the whole program is literal */
	K_TREE,	    /* literal prefix ending in '/', then "**" */
	K_STAR,	    /* literal prefix, one star, literal suffix without '/' */
	K_ANYDEPTH, /* "**" then a literal */
	K_ALL,	    /* "**" alone: every non-empty path */
};

/* One bit per state, states 0..ntok; ntok <= PW_GLOB_LEN_MAX. */
#define STATE_WORDS ((PW_GLOB_LEN_MAX + 2 + 63) / 64)

struct class_set {
	uint64_t bits[4];
};

struct pw_glob {
	pw_refcount refs; /* immutable once compiled: rules share it by reference */
	char *pattern;
	struct tok *toks;
	size_t ntok;
	char *bytes; /* bytes[i] = the byte of a T_LIT/T_SEP token i, 0 otherwise */
	struct class_set *classes;
	size_t ncls;
	size_t nwords;	   /* words of the state bitset in use */
	size_t prefix_len; /* leading T_LIT/T_SEP tokens */
	size_t star_at;	   /* K_STAR: index of the star */
	size_t nseg;	   /* segments of the pattern */
	bool has_dstar;
	bool dir_only;
	bool matches_root;
	bool basename; /* no slash but a trailing one: the program matches one name, at any depth */
	enum glob_kind kind;
};

/* ---- compilation ---- */

struct parser {
	const char *p;
	size_t len;
	size_t i;
	pw_glob *g;
	const char *err;
};

static void class_set(struct class_set *c, unsigned b)
{
	c->bits[b >> 6] |= UINT64_C(1) << (b & 63);
}

static bool class_has(const struct class_set *c, unsigned b)
{
	return (c->bits[b >> 6] >> (b & 63)) & 1;
}

static bool at_separator(const struct parser *ps)
{
	const char *p = ps->p;

	if (ps->i >= ps->len)
		return false;
	return p[ps->i] == '/' || (p[ps->i] == '\\' && ps->i + 1 < ps->len && p[ps->i + 1] == '/');
}

static void skip_separator(struct parser *ps)
{
	ps->i += ps->p[ps->i] == '\\' ? 2 : 1;
}

static void emit(struct parser *ps, uint8_t op, uint8_t c, uint16_t cls)
{
	pw_glob *g = ps->g;

	g->toks[g->ntok] = (struct tok){.op = op, .c = c, .cls = cls};
	g->bytes[g->ntok] = (op == T_LIT || op == T_SEP) ? (char)c : '\0';
	g->ntok++;
}

static int fail(struct parser *ps, const char *msg)
{
	ps->err = msg;
	return -EINVAL;
}

/* The named POSIX classes, in the C locale; bytes >= 0x80 belong to none. */
static int posix_class(const char *name, size_t n, struct class_set *c)
{
	static const struct {
		const char *name;
		int (*fn)(int);
	} table[] = {
	    {"alnum", isalnum}, {"alpha", isalpha}, {"blank", isblank}, {"cntrl", iscntrl},
	    {"digit", isdigit}, {"graph", isgraph}, {"lower", islower}, {"print", isprint},
	    {"punct", ispunct}, {"space", isspace}, {"upper", isupper}, {"xdigit", isxdigit},
	};

	for (size_t k = 0; k < ELEMENTSOF(table); k++) {
		if (strlen(table[k].name) != n || memcmp(table[k].name, name, n) != 0)
			continue;
		for (unsigned b = 0; b < 128; b++)
			if (table[k].fn((int)b))
				class_set(c, b);
		return 0;
	}
	return -EINVAL;
}

/* Reads one class member byte (escapes allowed) at ps->i into *ret. */
static int class_byte(struct parser *ps, unsigned char *ret)
{
	if (ps->i >= ps->len)
		return fail(ps, "unterminated character class");
	if (ps->p[ps->i] == '\\') {
		if (ps->i + 1 >= ps->len)
			return fail(ps, "trailing backslash");
		*ret = (unsigned char)ps->p[ps->i + 1];
		ps->i += 2;
		return 0;
	}
	*ret = (unsigned char)ps->p[ps->i++];
	return 0;
}

/* Parses "[...]" starting at the '['. */
static int parse_class(struct parser *ps)
{
	pw_glob *g = ps->g;
	struct class_set *c = &g->classes[g->ncls];
	bool neg = false, first = true;
	int r;

	*c = (struct class_set){0};
	ps->i++;
	if (ps->i < ps->len && (ps->p[ps->i] == '!' || ps->p[ps->i] == '^')) {
		neg = true;
		ps->i++;
	}
	for (;;) {
		unsigned char lo, hi;

		if (ps->i >= ps->len)
			return fail(ps, "unterminated character class");
		if (ps->p[ps->i] == ']' && !first) {
			ps->i++;
			break;
		}
		first = false;

		if (ps->p[ps->i] == '[' && ps->i + 1 < ps->len && ps->p[ps->i + 1] == ':') {
			const char *name = ps->p + ps->i + 2;
			const char *end = memmem(name, ps->len - (ps->i + 2), ":]", 2);

			if (end) {
				if (posix_class(name, (size_t)(end - name), c) < 0)
					return fail(ps, "unknown [:class:] name");
				ps->i = (size_t)(end - ps->p) + 2;
				continue;
			}
		}

		r = class_byte(ps, &lo);
		if (r < 0)
			return r;
		hi = lo;
		if (ps->i + 1 < ps->len && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
			ps->i++;
			r = class_byte(ps, &hi);
			if (r < 0)
				return r;
			if (hi < lo)
				return fail(ps, "reversed range in character class");
		}
		for (unsigned b = lo; b <= hi; b++)
			class_set(c, b);
	}
	if (neg)
		for (size_t w = 0; w < 4; w++)
			c->bits[w] = ~c->bits[w];
	c->bits['/' >> 6] &= ~(UINT64_C(1) << ('/' & 63));

	emit(ps, T_CLASS, 0, (uint16_t)g->ncls);
	g->ncls++;
	return 0;
}

/* Parses the tokens of one ordinary segment, up to a separator or the end. */
static int parse_segment(struct parser *ps)
{
	int r;

	while (ps->i < ps->len && !at_separator(ps)) {
		char c = ps->p[ps->i];

		switch (c) {
		case '\\':
			if (ps->i + 1 >= ps->len)
				return fail(ps, "trailing backslash");
			emit(ps, T_LIT, (uint8_t)ps->p[ps->i + 1], 0);
			ps->i += 2;
			break;
		case '*':
			/* A run of stars inside a segment is one star, as in gitignore. */
			while (ps->i < ps->len && ps->p[ps->i] == '*')
				ps->i++;
			emit(ps, T_STAR, 0, 0);
			break;
		case '?':
			emit(ps, T_ANY, 0, 0);
			ps->i++;
			break;
		case '[':
			r = parse_class(ps);
			if (r < 0)
				return r;
			break;
		default:
			emit(ps, T_LIT, (uint8_t)c, 0);
			ps->i++;
			break;
		}
	}
	return 0;
}

/* Is the segment at ps->i a whole-segment "**"? If so, returns the offset after the stars. */
static size_t dstar_end(const struct parser *ps)
{
	size_t j = ps->i;

	while (j < ps->len && ps->p[j] == '*')
		j++;
	if (j - ps->i < 2)
		return 0;
	if (j < ps->len && ps->p[j] != '/' &&
	    !(ps->p[j] == '\\' && j + 1 < ps->len && ps->p[j + 1] == '/'))
		return 0;
	return j;
}

/* Only separators left from ps->i on? */
static bool rest_is_separators(const struct parser *ps)
{
	struct parser t = *ps;

	while (at_separator(&t))
		skip_separator(&t);
	return t.i >= t.len;
}

static int parse_pattern(struct parser *ps)
{
	pw_glob *g = ps->g;
	bool need_sep = false, all_dstar = true, anchored = false;
	int r;

	while (ps->i < ps->len) {
		size_t j;

		if (at_separator(ps)) {
			/* Leading, repeated and trailing separators delimit no segment. A separator
			 * with a segment after it (a leading one included) anchors the pattern. */
			skip_separator(ps);
			if (rest_is_separators(ps)) {
				if (g->nseg > 0)
					g->dir_only = true;
				ps->i = ps->len;
			} else {
				anchored = true;
			}
			continue;
		}
		g->nseg++;
		if (need_sep) {
			emit(ps, T_SEP, '/', 0);
			need_sep = false;
		}
		j = dstar_end(ps);
		if (j > 0) {
			ps->i = j;
			g->has_dstar = true;
			/* T_DS carries its own '/', so no T_SEP follows it. */
			emit(ps, rest_is_separators(ps) ? T_DSEND : T_DS, 0, 0);
			continue;
		}
		all_dstar = false;
		r = parse_segment(ps);
		if (r < 0)
			return r;
		need_sep = true;
	}
	if (g->nseg == 0)
		return fail(ps, "empty pattern");
	g->matches_root = all_dstar;
	g->basename = !anchored && !g->has_dstar;
	return 0;
}

/*
 * "**" "/" NAME, where NAME is one segment without "**", means what NAME alone means (a name
 * at any depth): drop the leading T_DS so that the one-name fast paths and the segment walk
 * of a basename pattern apply.
 */
static void fold_leading_dstar(pw_glob *g)
{
	if (g->nseg != 2 || g->ntok < 2 || g->toks[0].op != T_DS)
		return;
	for (size_t k = 1; k < g->ntok; k++)
		if (g->toks[k].op == T_SEP || g->toks[k].op == T_DS || g->toks[k].op == T_DSEND)
			return;
	memmove(g->toks, g->toks + 1, (g->ntok - 1) * sizeof(*g->toks));
	memmove(g->bytes, g->bytes + 1, g->ntok - 1);
	g->ntok--;
	g->nseg = 1;
	g->has_dstar = false;
	g->basename = true;
}

static bool is_literal(const struct tok *t)
{
	return t->op == T_LIT || t->op == T_SEP;
}

/* Picks a fast path for the shapes that need no simulation. */
static void classify(pw_glob *g)
{
	const struct tok *t = g->toks;
	size_t n = g->ntok, p = 0, stars = 0, star_at = 0;

	while (p < n && is_literal(&t[p]))
		p++;
	g->prefix_len = p;
	g->kind = K_NFA;

	if (p == n) {
		g->kind = K_EXACT;
		return;
	}
	if (g->dir_only)
		return; /* the simulation handles directory-only trees */
	if (n == 1 && t[0].op == T_DSEND) {
		g->kind = K_ALL;
		return;
	}
	if (p == n - 1 && t[p].op == T_DSEND && p > 0 && t[p - 1].op == T_SEP) {
		g->kind = K_TREE;
		return;
	}
	if (t[0].op == T_DS && n > 1) {
		size_t k = 1;

		while (k < n && is_literal(&t[k]))
			k++;
		if (k == n) {
			g->kind = K_ANYDEPTH;
			return;
		}
	}
	for (size_t k = p; k < n; k++) {
		if (t[k].op == T_STAR) {
			stars++;
			star_at = k;
		} else if (t[k].op != T_LIT) {
			return; /* a class, '?', a separator after the star, or "**" */
		}
	}
	if (stars == 1) {
		g->kind = K_STAR;
		g->star_at = star_at;
	}
}

int pw_glob_compile(const char *pattern, pw_glob **ret, const char **ret_err)
{
	_cleanup_(pw_glob_freep) pw_glob *g = NULL;
	struct parser ps = {0};
	size_t len, nclass = 0;
	int r;

	len = strnlen(pattern, PW_GLOB_LEN_MAX + 1);
	if (len > PW_GLOB_LEN_MAX) {
		if (ret_err)
			*ret_err = "pattern longer than PW_GLOB_LEN_MAX";
		return -ENAMETOOLONG;
	}
	for (size_t i = 0; i < len; i++)
		nclass += pattern[i] == '[';

	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	atomic_init(&g->refs, 1);
	g->pattern = strdup(pattern);
	/* Every token consumes at least one pattern byte, so len + 1 is room enough. */
	g->toks = calloc(len + 1, sizeof(*g->toks));
	g->bytes = calloc(len + 1, 1);
	g->classes = calloc(nclass + 1, sizeof(*g->classes));
	if (!g->pattern || !g->toks || !g->bytes || !g->classes)
		return -ENOMEM;

	ps = (struct parser){.p = pattern, .len = len, .g = g};
	r = parse_pattern(&ps);
	if (r < 0) {
		if (ret_err)
			*ret_err = ps.err;
		return r;
	}
	fold_leading_dstar(g);
	g->nwords = (g->ntok + 1 + 63) / 64;
	classify(g);
	*ret = TAKE_PTR(g);
	return 0;
}

/* ---- matching ---- */

static bool state_has(const uint64_t *s, size_t i)
{
	return (s[i >> 6] >> (i & 63)) & 1;
}

static void state_set(uint64_t *s, size_t i)
{
	s[i >> 6] |= UINT64_C(1) << (i & 63);
}

/* Adds the epsilon edges' targets; SEG_START: the next byte begins a segment. */
static void closure(const pw_glob *g, uint64_t *s, bool seg_start)
{
	for (size_t w = 0; w < g->nwords; w++) {
		uint64_t bits = s[w];

		while (bits) {
			size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
			uint8_t op;

			bits &= bits - 1;
			if (i >= g->ntok)
				break;
			op = g->toks[i].op;
			if (op == T_STAR || (op == T_DS && seg_start)) {
				state_set(s, i + 1);
				if (((i + 1) >> 6) == w)
					bits |= UINT64_C(1) << ((i + 1) & 63);
			}
		}
	}
}

/* Advances CUR over byte C into NXT (cleared here). Returns false when no state is live. */
static bool step(const pw_glob *g, const uint64_t *cur, uint64_t *nxt, unsigned char c)
{
	uint64_t any = 0;

	memset(nxt, 0, g->nwords * sizeof(*nxt));
	for (size_t w = 0; w < g->nwords; w++) {
		uint64_t bits = cur[w];

		while (bits) {
			size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
			const struct tok *t;

			bits &= bits - 1;
			if (i >= g->ntok)
				break;
			t = &g->toks[i];
			switch (t->op) {
			case T_LIT:
			case T_SEP:
				if (c == t->c)
					state_set(nxt, i + 1);
				break;
			case T_ANY:
				if (c != '/')
					state_set(nxt, i + 1);
				break;
			case T_CLASS:
				if (class_has(&g->classes[t->cls], c))
					state_set(nxt, i + 1);
				break;
			case T_STAR:
				if (c != '/')
					state_set(nxt, i);
				break;
			case T_DS:
				state_set(nxt, i);
				break;
			case T_DSEND:
				state_set(nxt, i);
				state_set(nxt, i + 1);
				break;
			}
		}
	}
	closure(g, nxt, c == '/');
	for (size_t w = 0; w < g->nwords; w++)
		any |= nxt[w];
	return any != 0;
}

/* Adds N to *WORK when counting (pw_glob_match_counted); a no-op for the hot path. */
static void count(uint64_t *work, uint64_t n)
{
	if (work)
		*work += n;
}

/* The live states of CUR, counted as the work of the step that reads them. */
static uint64_t live_states(const pw_glob *g, const uint64_t *cur)
{
	uint64_t n = 0;

	for (size_t w = 0; w < g->nwords; w++)
		n += (uint64_t)__builtin_popcountll(cur[w]);
	return n;
}

/*
 * Simulates the program over PATH[0..LEN) and accepts in state ACCEPT (ntok for a match;
 * pw_glob_match_dir_itself moves it). With TREE, also accepts when the bytes
 * before a '/' match: they name an ancestor, which is a directory.
 */
static bool nfa_run(const pw_glob *g, const char *path, size_t len, size_t accept, bool is_dir,
		    bool tree, uint64_t *work)
{
	uint64_t a[STATE_WORDS], b[STATE_WORDS];
	uint64_t *cur = a, *nxt = b;
	size_t p = g->prefix_len < accept ? g->prefix_len : accept;

	/* Every match begins with the literal prefix, ancestors' matches included. */
	count(work, p + 1);
	if (len < p || memcmp(path, g->bytes, p) != 0)
		return false;

	memset(cur, 0, g->nwords * sizeof(*cur));
	state_set(cur, p);
	closure(g, cur, p == 0 || path[p - 1] == '/');

	for (size_t i = p; i < len; i++) {
		unsigned char c = (unsigned char)path[i];
		uint64_t *t;

		if (tree && c == '/' && state_has(cur, accept))
			return true;
		if (work)
			count(work, 1 + live_states(g, cur));
		if (!step(g, cur, nxt, c))
			return false;
		t = cur;
		cur = nxt;
		nxt = t;
	}
	return state_has(cur, accept) && (!g->dir_only || is_dir);
}

static bool nfa_match(const pw_glob *g, const char *path, size_t len, bool is_dir, bool tree,
		      uint64_t *work)
{
	return nfa_run(g, path, len, g->ntok, is_dir, tree, work);
}

/* Does PATH[0..LEN) end with the literal LIT[0..N) at a segment boundary? */
static bool ends_with_segments(const char *path, size_t len, const char *lit, size_t n)
{
	if (len < n || memcmp(path + len - n, lit, n) != 0)
		return false;
	return len == n || path[len - n - 1] == '/';
}

/* The match of PATH[0..LEN) (LEN > 0) ignoring the directory-only flag. */
static bool match_fast(const pw_glob *g, const char *path, size_t len)
{
	size_t n = g->ntok, p = g->prefix_len, s;

	switch (g->kind) {
	case K_EXACT:
		return len == n && memcmp(path, g->bytes, n) == 0;
	case K_TREE:
		return len > p && memcmp(path, g->bytes, p) == 0;
	case K_ALL:
		return true;
	case K_ANYDEPTH:
		return ends_with_segments(path, len, g->bytes + 1, n - 1);
	case K_STAR:
		s = n - g->star_at - 1;
		return len >= p + s && memcmp(path, g->bytes, p) == 0 &&
		       memcmp(path + len - s, g->bytes + g->star_at + 1, s) == 0 &&
		       !memchr(path + p, '/', len - p - s);
	case K_NFA:
		break;
	}
	return false;
}

/* The anchored match of the program against PATH[0..LEN). */
static bool match_len(const pw_glob *g, const char *path, size_t len, bool is_dir, uint64_t *work)
{
	if (len == 0)
		return g->matches_root && (!g->dir_only || is_dir);
	if (g->kind == K_NFA)
		return nfa_match(g, path, len, is_dir, false, work);
	count(work, len + 1);
	return match_fast(g, path, len) && (!g->dir_only || is_dir);
}

/*
 * A basename pattern against each name of PATH: with TREE every segment (all but the last
 * are directories), else the last one only. The root ("") has no name. Each byte of PATH
 * is read by one segment's match, so the work stays O(len(path) * ntok).
 */
static bool basename_match(const pw_glob *g, const char *path, size_t len, bool is_dir, bool tree,
			   uint64_t *work)
{
	size_t start = 0;

	if (len == 0)
		return false;
	if (!tree) {
		const char *slash = memrchr(path, '/', len);

		start = slash ? (size_t)(slash - path) + 1 : 0;
		return match_len(g, path + start, len - start, is_dir, work);
	}
	for (size_t k = 0; k <= len; k++) {
		if (k < len && path[k] != '/')
			continue;
		if (match_len(g, path + start, k - start, k < len || is_dir, work))
			return true;
		start = k + 1;
	}
	return false;
}

static bool match_one(const pw_glob *g, const char *path, size_t len, bool is_dir, uint64_t *work)
{
	if (g->basename)
		return basename_match(g, path, len, is_dir, false, work);
	return match_len(g, path, len, is_dir, work);
}

bool pw_glob_match(const pw_glob *g, const char *path, bool is_dir)
{
	return match_one(g, path, strlen(path), is_dir, NULL);
}

/* "**" then a literal: try each ancestor and the path itself. */
static bool anydepth_tree(const pw_glob *g, const char *path, size_t len, bool is_dir,
			  uint64_t *work)
{
	for (size_t k = 0; k <= len; k++) {
		if (k < len && path[k] != '/')
			continue;
		if (k == len && g->dir_only && !is_dir)
			continue;
		count(work, g->ntok);
		if (ends_with_segments(path, k, g->bytes + 1, g->ntok - 1))
			return true;
	}
	return false;
}

static bool match_tree(const pw_glob *g, const char *path, size_t len, bool is_dir, uint64_t *work)
{
	if (len == 0)
		return match_len(g, path, 0, is_dir, work);
	if (g->basename)
		return basename_match(g, path, len, is_dir, true, work);

	if (!g->has_dstar) {
		/* Fixed depth: only the ancestor (or the path) with nseg segments can match. */
		size_t seen = 1;

		count(work, len);
		for (size_t k = 0; k < len; k++) {
			if (path[k] != '/')
				continue;
			if (seen == g->nseg)
				return match_len(g, path, k, true, work);
			seen++;
		}
		return seen == g->nseg && match_len(g, path, len, is_dir, work);
	}

	switch (g->kind) {
	case K_TREE:
	case K_ALL:
		/* Not directory-only (see classify): an ancestor's match implies the path's. */
		return match_len(g, path, len, is_dir, work);
	case K_ANYDEPTH:
		return anydepth_tree(g, path, len, is_dir, work);
	default:
		return nfa_match(g, path, len, is_dir, true, work);
	}
}

bool pw_glob_match_tree(const pw_glob *g, const char *path, bool is_dir)
{
	return match_tree(g, path, strlen(path), is_dir, NULL);
}

bool pw_glob_match_counted(const pw_glob *g, const char *path, bool is_dir, bool tree,
			   uint64_t *ret_work)
{
	size_t len = strlen(path);

	*ret_work = 0;
	return tree ? match_tree(g, path, len, is_dir, ret_work)
		    : match_one(g, path, len, is_dir, ret_work);
}

/*
 * A pattern `P/` `**` (a final "**" segment after at least one other) names everything
 * beneath the directories P matches; this tells whether PATH is one of them. That
 * is the NFA run with acceptance moved to the state before the final separator: tokens
 * 0..ntok-3 have matched all of PATH.
 */
bool pw_glob_match_dir_itself(const pw_glob *g, const char *path)
{
	size_t len = strlen(path), n = g->ntok;

	if (n < 3 || g->toks[n - 1].op != T_DSEND || g->toks[n - 2].op != T_SEP || len == 0)
		return false;
	if (g->kind == K_TREE)
		return len == n - 2 && memcmp(path, g->bytes, len) == 0;
	return nfa_run(g, path, len, n - 2, true, false, NULL);
}

bool pw_glob_is_basename(const pw_glob *g)
{
	return g->basename;
}

const char *pw_glob_pattern(const pw_glob *g)
{
	return g->pattern;
}

pw_glob *pw_glob_ref(pw_glob *g)
{
	if (g)
		pw_ref_take(&g->refs);
	return g;
}

void pw_glob_free(pw_glob *g)
{
	if (!g || !pw_ref_drop(&g->refs))
		return;
	free(g->pattern);
	free(g->toks);
	free(g->bytes);
	free(g->classes);
	free(g);
}

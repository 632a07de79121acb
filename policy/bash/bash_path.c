/* SPDX-License-Identifier: MIT */
/*
 * From words to project paths, for the bash pre-flight: the shell state that decides what a
 * relative path means (cd, variables), brace and glob expansion against the real tree, and
 * the classification of every path as inside (normalized, project-relative), outside (~,
 * absolute paths elsewhere, '..' above the root) or unknown (an unresolvable expansion, a
 * cd the analysis could not follow).
 *
 * Glob expansion reads the project through opts->root_fd only, opening each directory with
 * O_NOFOLLOW relative to its parent, so a symlink never leads the walk out of the project.
 * Its work is charged to the analysis budget (one step per directory entry) and its results
 * are capped at PW_BASH_GLOB_MATCHES_MAX.
 *
 * Names the asker may not see (opts->hidden) are absent to every look at the tree: a glob
 * neither matches nor descends into them, and a stat of one finds nothing, so the answer
 * for a hidden name is the answer for a missing one (an agent cannot list or probe them).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bash_internal.h"
#include "bash_path.h"
#include "bash_targets.h"
#include "pw_limits.h"
#include "path.h"
#include "util.h"

/* ---------- words ---------- */

void bw_word_done(bw_word *w)
{
	free(w->lit);
	free(w->pat);
	free(w->raw);
	*w = (bw_word){0};
}

static bool is_pattern_byte(char ch)
{
	return ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\' || ch == '{' ||
	       ch == '}' || ch == ',';
}

/* Escapes every byte of LIT that globbing or brace expansion would interpret. */
static char *escape_lit(const char *lit)
{
	size_t n = strlen(lit);
	char *out = malloc(2 * n + 1), *p = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (is_pattern_byte(lit[i]))
			*p++ = '\\';
		*p++ = lit[i];
	}
	*p = '\0';
	return out;
}

static char *unescape(const char *pat)
{
	char *out = malloc(strlen(pat) + 1), *p = out;
	if (!out)
		return NULL;
	for (const char *s = pat; *s; s++) {
		if (*s == '\\' && s[1])
			s++;
		*p++ = *s;
	}
	*p = '\0';
	return out;
}

static bool has_active_glob(const char *pat)
{
	for (const char *s = pat; *s; s++) {
		if (*s == '\\' && s[1])
			s++;
		else if (*s == '*' || *s == '?' || *s == '[')
			return true;
	}
	return false;
}

int bw_word_literal(bw_word *w, const char *lit, const char *raw)
{
	*w = (bw_word){0};
	w->lit = strdup(lit);
	w->pat = escape_lit(lit);
	w->raw = strdup(raw ? raw : lit);
	if (!w->lit || !w->pat || !w->raw) {
		bw_word_done(w);
		return -ENOMEM;
	}
	return 0;
}

void bw_word_unknown(bw_word *w, const char *raw, const char *why)
{
	*w = (bw_word){.unknown = true, .why = why};
	w->raw = strdup(raw ? raw : "?");
}

/* ---------- state ---------- */

void bw_set_cwd(bw_state *s, bw_cwd_state st, const char *cwd)
{
	char *dup = NULL;
	if (st == BW_CWD_KNOWN) {
		dup = strdup(cwd ? cwd : "");
		if (!dup)
			st = BW_CWD_UNKNOWN; /* out of memory: the conservative answer */
	}
	free(s->cwd);
	s->cwd = dup;
	s->cwd_state = st;
}

bool bw_state_same_cwd(const bw_state *a, const bw_state *b)
{
	if (a->cwd_state != b->cwd_state)
		return false;
	return a->cwd_state != BW_CWD_KNOWN || streq(a->cwd, b->cwd);
}

void bw_state_free(bw_state *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_vars; i++) {
		free(s->vars[i].name);
		free(s->vars[i].value);
	}
	free(s->vars);
	free(s->cwd);
	free(s);
}

bw_state *bw_state_copy(const bw_state *s)
{
	bw_state *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	bw_set_cwd(n, s->cwd_state, s->cwd);
	if (s->n_vars > 0) {
		n->vars = calloc(s->n_vars, sizeof(*n->vars));
		if (!n->vars)
			goto fail;
		for (size_t i = 0; i < s->n_vars; i++) {
			n->vars[i].name = strdup(s->vars[i].name);
			n->vars[i].value = pw_dup_or_null(s->vars[i].value);
			n->vars[i].glob = s->vars[i].glob;
			n->n_vars++;
			if (!n->vars[i].name || (s->vars[i].value && !n->vars[i].value))
				goto fail;
		}
	}
	return n;
fail:
	bw_state_free(n);
	return NULL;
}

const bw_var *bw_var_get(const bw_state *s, const char *name)
{
	for (size_t i = 0; i < s->n_vars; i++)
		if (streq(s->vars[i].name, name))
			return &s->vars[i];
	return NULL;
}

/* VALUE NULL records the variable as unknown (it shadows nothing: unset variables are
 * unknown too, since the environment may define them). */
void bw_var_set(bw_state *s, const char *name, const char *value, bool glob)
{
	for (size_t i = 0; i < s->n_vars; i++) {
		if (!streq(s->vars[i].name, name))
			continue;
		free(s->vars[i].value);
		s->vars[i].value = pw_dup_or_null(value);
		s->vars[i].glob = glob && s->vars[i].value;
		return;
	}
	if (!value || s->n_vars >= PW_BASH_VARS_MAX)
		return;
	bw_var *v = reallocarray(s->vars, s->n_vars + 1, sizeof(*v));
	if (!v)
		return;
	s->vars = v;
	v[s->n_vars] = (bw_var){.name = strdup(name), .value = strdup(value), .glob = glob};
	if (!v[s->n_vars].name || !v[s->n_vars].value) {
		free(v[s->n_vars].name);
		free(v[s->n_vars].value);
		return;
	}
	s->n_vars++;
}

/* ---------- segment matching ---------- */

/* Matches one class at *PP against CH; advances *PP past the class. A malformed class (no
 * closing ']') matches a literal '['. */
static bool class_match(const char **pp, char ch, bool *ret_ok)
{
	const char *p = *pp + 1;
	bool neg = false, hit = false;

	if (*p == '!' || *p == '^') {
		neg = true;
		p++;
	}
	const char *start = p;
	while (*p && (*p != ']' || p == start)) {
		char lo = *p, hi;
		if (lo == '\\' && p[1])
			lo = *++p;
		p++;
		hi = lo;
		if (*p == '-' && p[1] && p[1] != ']') {
			hi = p[1];
			if (hi == '\\' && p[2])
				hi = p[2], p++;
			p += 2;
		}
		if ((unsigned char)ch >= (unsigned char)lo &&
		    (unsigned char)ch <= (unsigned char)hi)
			hit = true;
	}
	if (*p != ']') {
		*ret_ok = false;
		return ch == '[';
	}
	*ret_ok = true;
	*pp = p + 1;
	return hit != neg;
}

bool bw_segment_match(const char *pat, const char *name)
{
	const char *p = pat, *n = name, *star_p = NULL, *star_n = NULL;

	/* bash: a leading '.' is never matched by a wildcard. */
	if (name[0] == '.' && !(pat[0] == '.' || (pat[0] == '\\' && pat[1] == '.')))
		return false;
	while (*n) {
		if (*p == '*') {
			while (*p == '*')
				p++;
			star_p = p;
			star_n = n;
			continue;
		}
		if (*p == '?') {
			p++, n++;
			continue;
		}
		if (*p == '[') {
			const char *q = p;
			bool ok;
			bool m = class_match(&q, *n, &ok);
			if (!ok)
				q = p + 1;
			if (m) {
				p = q, n++;
				continue;
			}
		} else {
			char lit = *p;
			const char *q = p + 1;
			if (lit == '\\' && p[1])
				lit = p[1], q = p + 2;
			if (lit && lit == *n) {
				p = q, n++;
				continue;
			}
		}
		if (!star_p)
			return false;
		p = star_p;
		n = ++star_n;
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

/* ---------- glob expansion ---------- */

typedef struct glob_walk {
	bw_ctx *c;
	char **segs;
	size_t n_segs;
	char **matches;
	size_t n_matches;
	bool too_many;
	bool budget;
} glob_walk;

static void glob_add(glob_walk *g, const char *path)
{
	if (g->n_matches >= PW_BASH_GLOB_MATCHES_MAX) {
		g->too_many = true;
		return;
	}
	char *d = strdup(path);
	if (!d)
		return;
	g->matches[g->n_matches++] = d;
}

static void glob_step(glob_walk *g, int dirfd, const char *prefix, size_t i);

/* Is PATH (of type IS_DIR) one the asker may not see? */
static bool hidden(const bw_ctx *c, const char *path, bool is_dir)
{
	return c->opts->hidden && c->opts->hidden(path, is_dir, c->opts->hidden_arg);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void glob_descend(glob_walk *g, int dirfd, const char *prefix, const char *name, size_t i)
{
	char path[PW_PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "", name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return;
	if (i + 1 == g->n_segs) {
		struct stat st;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    !hidden(g->c, path, S_ISDIR(st.st_mode)))
			glob_add(g, path);
		return;
	}
	if (hidden(g->c, path, true)) /* walked into as a directory: hidden as one */
		return;
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	glob_step(g, fd, path, i + 1);
}

static void glob_step(glob_walk *g, int dirfd, const char *prefix, size_t i)
{
	const char *seg = g->segs[i];

	if (g->too_many || g->budget)
		return;
	if (!has_active_glob(seg)) {
		_cleanup_free_ char *name = unescape(seg);
		if (name)
			glob_descend(g, dirfd, prefix, name, i);
		return;
	}
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	/* Collect names first so nested opens don't hold this directory's stream longer than
	 * needed, and sort them for a stable order, as bash does. */
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!bw_spend(g->c, 1)) {
			g->budget = true;
			break;
		}
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (!bw_segment_match(seg, de->d_name))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			char **nn = reallocarray(names, nc, sizeof(*nn));
			if (!nn)
				break;
			names = nn, cap = nc;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
		if (n > PW_BASH_GLOB_MATCHES_MAX) {
			g->too_many = true;
			break;
		}
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t k = 0; k < n; k++) {
		glob_descend(g, dirfd, prefix, names[k], i);
		free(names[k]);
	}
	free(names);
}

/* Expands the normalized pattern PAT; returns the number of matches in *G, or -E2BIG. */
static int glob_expand(glob_walk *g, const char *pat)
{
	_cleanup_free_ char *copy = strdup(pat);
	char *segs[PW_BASH_GLOB_SEGMENTS_MAX];
	size_t n = 0;

	if (!copy)
		return -ENOMEM;
	for (char *s = copy, *slash;; s = slash + 1) {
		if (n == PW_BASH_GLOB_SEGMENTS_MAX)
			return -E2BIG;
		segs[n++] = s;
		slash = strchr(s, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	g->segs = segs;
	g->n_segs = n;
	g->matches = calloc(PW_BASH_GLOB_MATCHES_MAX, sizeof(char *));
	if (!g->matches)
		return -ENOMEM;
	if (g->c->opts->root_fd >= 0)
		glob_step(g, g->c->opts->root_fd, "", 0);
	g->segs = NULL;
	return 0;
}

static void glob_free(glob_walk *g)
{
	for (size_t i = 0; i < g->n_matches; i++)
		free(g->matches[i]);
	free(g->matches);
}

/* ---------- brace expansion ---------- */

typedef struct strlist {
	char **v;
	size_t n;
	bool overflow;
} strlist;

static void strlist_free(strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	*l = (strlist){0};
}

static void strlist_push(strlist *l, char *s)
{
	if (!s)
		return;
	if (l->n >= PW_BASH_BRACE_MAX) {
		l->overflow = true;
		free(s);
		return;
	}
	char **v = reallocarray(l->v, l->n + 1, sizeof(*v));
	if (!v) {
		free(s);
		return;
	}
	l->v = v;
	l->v[l->n++] = s;
}

static char *concat3(const char *a, size_t na, const char *b, size_t nb, const char *c)
{
	size_t nc = strlen(c);
	char *s = malloc(na + nb + nc + 1);
	if (!s)
		return NULL;
	memcpy(s, a, na);
	memcpy(s + na, b, nb);
	memcpy(s + na + nb, c, nc + 1);
	return s;
}

/* Finds the first unescaped '{' with a matching '}' that holds a top-level ',' or a '..'
 * range. Returns false when there is none. */
static bool find_brace(const char *s, size_t *ret_open, size_t *ret_close, bool *ret_range)
{
	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '\\' && s[i + 1]) {
			i++;
			continue;
		}
		if (s[i] != '{')
			continue;
		int level = 0;
		bool comma = false;
		for (size_t j = i; s[j]; j++) {
			if (s[j] == '\\' && s[j + 1]) {
				j++;
				continue;
			}
			if (s[j] == '{')
				level++;
			else if (s[j] == '}' && --level == 0) {
				bool range = !comma && j > i + 4 && memmem(s + i, j - i, "..", 2);
				if (comma || range) {
					*ret_open = i, *ret_close = j, *ret_range = range;
					return true;
				}
				break;
			} else if (s[j] == ',' && level == 1)
				comma = true;
		}
	}
	return false;
}

static void brace_expand(const char *s, strlist *out, unsigned depth);

static void brace_range(const char *s, size_t open, size_t close, strlist *out, unsigned depth)
{
	char body[64];
	long a, b;
	char ca, cb;
	size_t blen = close - open - 1;

	if (blen >= sizeof(body))
		goto literal;
	memcpy(body, s + open + 1, blen);
	body[blen] = '\0';
	if (sscanf(body, "%ld..%ld", &a, &b) == 2) {
		long step = a <= b ? 1 : -1;
		for (long v = a;; v += step) {
			char num[32];
			snprintf(num, sizeof(num), "%ld", v);
			_cleanup_free_ char *w = concat3(s, open, num, strlen(num), s + close + 1);
			if (w)
				brace_expand(w, out, depth + 1);
			if (v == b || out->overflow)
				break;
		}
		return;
	}
	if (strlen(body) == 4 && sscanf(body, "%c..%c", &ca, &cb) == 2) {
		int step = ca <= cb ? 1 : -1;
		for (int v = ca;; v += step) {
			char ch = (char)v;
			_cleanup_free_ char *w = concat3(s, open, &ch, 1, s + close + 1);
			if (w)
				brace_expand(w, out, depth + 1);
			if (v == cb || out->overflow)
				break;
		}
		return;
	}
literal:
	strlist_push(out, strdup(s));
}

/* Depth is bounded by the number of braces, itself bounded by PW_PATH_MAX-long words, and
 * the output by PW_BASH_BRACE_MAX. */
static void brace_expand(const char *s, strlist *out, unsigned depth)
{
	size_t open, close;
	bool range;

	if (out->overflow)
		return;
	if (depth > 32 || !find_brace(s, &open, &close, &range)) {
		strlist_push(out, strdup(s));
		return;
	}
	if (range) {
		brace_range(s, open, close, out, depth);
		return;
	}
	int level = 0;
	size_t start = open + 1;
	for (size_t j = open + 1; j <= close; j++) {
		if (s[j] == '\\' && j + 1 < close) {
			j++;
			continue;
		}
		if (s[j] == '{')
			level++;
		else if (s[j] == '}' && level > 0)
			level--;
		else if ((s[j] == ',' && level == 0) || j == close) {
			_cleanup_free_ char *w =
			    concat3(s, open, s + start, j - start, s + close + 1);
			if (w)
				brace_expand(w, out, depth + 1);
			start = j + 1;
			if (out->overflow)
				return;
		}
	}
}

/* ---------- resolution ---------- */

static bool is_special_device(const char *p)
{
	static const char *const devs[] = {"/dev/null",	  "/dev/stdin",	  "/dev/stdout",
					   "/dev/stderr", "/dev/tty",	  "/dev/zero",
					   "/dev/random", "/dev/urandom", "/dev/full"};
	for (size_t i = 0; i < ELEMENTSOF(devs); i++)
		if (streq(p, devs[i]))
			return true;
	return startswith(p, "/dev/fd/") || startswith(p, "/proc/self/fd/");
}

/* The part of absolute path LIT below the project root; NULL when LIT is not inside it. */
static const char *inside_root(const bw_ctx *c, const char *lit)
{
	const char *root = c->opts->root_path;
	long off = root ? pw_path_beneath(lit, root) : -1;
	return off < 0 ? NULL : lit + off;
}

typedef enum resolved {
	RES_PATH,
	RES_SKIP,
	RES_OUTSIDE,
	RES_UNKNOWN,
} resolved;

/* Turns LIT (a literal, or with GLOB an escaped pattern) into a normalized project path in
 * OUT. *RET_NOTE explains OUTSIDE and UNKNOWN. */
static resolved resolve(const bw_ctx *c, const char *lit, bool tilde, char out[PW_PATH_MAX],
			const char **ret_note)
{
	char joined[PW_PATH_MAX * 2];
	const char *rel;

	if (tilde) {
		*ret_note = "in the home directory";
		return RES_OUTSIDE;
	}
	if (lit[0] == '\0') {
		*ret_note = "an empty path";
		return RES_UNKNOWN;
	}
	if (lit[0] == '/') {
		if (is_special_device(lit))
			return RES_SKIP;
		rel = inside_root(c, lit);
		if (!rel) {
			*ret_note = "outside the project";
			return RES_OUTSIDE;
		}
		if (snprintf(joined, sizeof(joined), "%s", rel) >= (int)sizeof(joined))
			goto too_long;
	} else {
		switch (c->st->cwd_state) {
		case BW_CWD_UNKNOWN:
			*ret_note = "relative to a directory the analysis could not follow (cd)";
			return RES_UNKNOWN;
		case BW_CWD_OUTSIDE:
			*ret_note = "relative to a directory outside the project (cd)";
			return RES_OUTSIDE;
		case BW_CWD_KNOWN:
			break;
		}
		if (snprintf(joined, sizeof(joined), "%s/%s", c->st->cwd, lit) >=
		    (int)sizeof(joined))
			goto too_long;
	}
	int r = pw_path_normalize(joined, strlen(joined), out, NULL);
	if (r == -EXDEV) {
		*ret_note = "'..' leaves the project";
		return RES_OUTSIDE;
	}
	if (r < 0)
		goto too_long;
	return RES_PATH;
too_long:
	*ret_note = "the path is too long";
	return RES_UNKNOWN;
}

/*
 * What the tree says of PATH, remembered for the rest of the analysis: a script names the
 * same few paths over and over, and each answer is a syscall. -ENOENT: absent (or no tree),
 * else the st_mode. The memo has a fixed number of slots; once full, answers are not kept.
 */
static int path_mode(bw_ctx *c, const char *path)
{
	if (c->opts->root_fd < 0)
		return -ENOENT;
	uint32_t h = pw_fnv1a32_str(PW_FNV1A32_INIT, path);
	bw_stat_memo *slot = NULL;
	if (!c->stat_memo)
		c->stat_memo = calloc(BW_STAT_MEMO_SLOTS, sizeof(*c->stat_memo));
	for (uint32_t i = 0; c->stat_memo && i < BW_STAT_MEMO_SLOTS; i++) {
		bw_stat_memo *m = &c->stat_memo[(h + i) & (BW_STAT_MEMO_SLOTS - 1)];
		if (!m->path) {
			slot = m;
			break;
		}
		if (streq(m->path, path))
			return m->mode;
	}
	struct stat st;
	int mode = fstatat(c->opts->root_fd, path[0] ? path : ".", &st,
			   AT_SYMLINK_NOFOLLOW | (path[0] ? 0 : AT_EMPTY_PATH)) < 0
		       ? -ENOENT
		       : (int)st.st_mode;
	if (mode >= 0 && path[0] && hidden(c, path, S_ISDIR(st.st_mode)))
		mode = -ENOENT; /* absent, as in the view */
	if (slot && c->n_stat_memo < BW_STAT_MEMO_SLOTS / 2 && (slot->path = strdup(path))) {
		slot->mode = mode;
		c->n_stat_memo++;
	}
	return mode;
}

static bool stat_is_dir(bw_ctx *c, const char *path)
{
	int mode = path_mode(c, path);
	return mode >= 0 && S_ISDIR((mode_t)mode);
}

static void target_pattern(bw_ctx *c, const char *command, const char *pat, bool tilde,
			   pw_bash_access access, pw_op op, bool is_dir, bool subtree)
{
	char path[PW_PATH_MAX];
	const char *note = NULL;
	bool glob = has_active_glob(pat);
	_cleanup_free_ char *lit = unescape(pat);

	if (!lit)
		return;
	/* A glob is resolved as a pattern (the escapes kept), a plain word as its literal. */
	resolved res = resolve(c, glob ? pat : lit, tilde, path, &note);
	switch (res) {
	case RES_SKIP:
		return;
	case RES_OUTSIDE:
		bw_add(c, command, access, op, PW_BASH_KIND_RAW, lit, PW_BASH_OUTSIDE, is_dir,
		       subtree, note);
		return;
	case RES_UNKNOWN:
		bw_add(c, command, access, op, PW_BASH_KIND_RAW, lit, PW_BASH_UNKNOWN, is_dir,
		       subtree, note);
		return;
	case RES_PATH:
		break;
	}
	if (!glob) {
		bw_add(c, command, access, op, PW_BASH_KIND_PATH, path, PW_BASH_ALLOWED,
		       is_dir || stat_is_dir(c, path), subtree, NULL);
		return;
	}
	glob_walk g = {.c = c};
	int r = glob_expand(&g, path);
	_cleanup_free_ char *lpath = unescape(path);
	if (r < 0 || g.too_many || g.budget) {
		bw_add(c, command, access, op, PW_BASH_KIND_RAW, lpath ? lpath : lit,
		       PW_BASH_UNKNOWN, is_dir, subtree,
		       r == -E2BIG ? "the pattern is too deep to expand"
		       : g.budget  ? "the pattern needs too much work to expand"
				   : "the pattern matches too many paths to list");
	} else if (g.n_matches == 0) {
		/* bash passes an unmatched pattern on literally. */
		if (lpath)
			bw_add(c, command, access, op, PW_BASH_KIND_PATTERN, lpath, PW_BASH_ALLOWED,
			       is_dir, subtree, "the pattern matches nothing");
	} else {
		for (size_t i = 0; i < g.n_matches; i++)
			bw_add(c, command, access, op, PW_BASH_KIND_PATH, g.matches[i],
			       PW_BASH_ALLOWED, is_dir || stat_is_dir(c, g.matches[i]), subtree,
			       NULL);
	}
	glob_free(&g);
}

void bw_target_word(bw_ctx *c, const char *command, const bw_word *w, pw_bash_access access,
		    pw_op op, bool is_dir, bool subtree)
{
	if (w->special)
		return;
	if (w->unknown || !w->pat) {
		bw_add(c, command, access, op, PW_BASH_KIND_RAW, w->raw ? w->raw : "?",
		       PW_BASH_UNKNOWN, is_dir, subtree,
		       w->why ? w->why : "an expansion the analysis cannot resolve");
		return;
	}
	if (w->under) {
		subtree = true;
		is_dir = true;
	}
	strlist l = {0};
	brace_expand(w->pat, &l, 0);
	if (l.overflow)
		bw_add(c, command, access, op, PW_BASH_KIND_RAW, w->raw ? w->raw : w->lit,
		       PW_BASH_UNKNOWN, is_dir, subtree, "the brace expansion is too large");
	else
		for (size_t i = 0; i < l.n; i++)
			target_pattern(c, command, l.v[i], w->tilde, access, op, is_dir, subtree);
	strlist_free(&l);
}

void bw_target_lit(bw_ctx *c, const char *command, const char *rel, pw_bash_access access, pw_op op,
		   bool is_dir, bool subtree)
{
	bw_word w;
	if (bw_word_literal(&w, rel, NULL) < 0) {
		c->res->oom = true;
		return;
	}
	bw_target_word(c, command, &w, access, op, is_dir, subtree);
	bw_word_done(&w);
}

void bw_cd(bw_ctx *c, const bw_word *w)
{
	char path[PW_PATH_MAX];
	const char *note;

	if (!w || w->tilde) {
		bw_set_cwd(c->st, BW_CWD_OUTSIDE, NULL);
		return;
	}
	if (w->unknown || !w->lit || streq(w->lit, "-") || w->glob) {
		bw_set_cwd(c->st, BW_CWD_UNKNOWN, NULL);
		return;
	}
	if (w->lit[0] != '/' && c->st->cwd_state != BW_CWD_KNOWN)
		return; /* stays outside or unknown */
	switch (resolve(c, w->lit, false, path, &note)) {
	case RES_PATH:
		bw_set_cwd(c->st, BW_CWD_KNOWN, path);
		break;
	case RES_OUTSIDE:
	case RES_SKIP:
		bw_set_cwd(c->st, BW_CWD_OUTSIDE, NULL);
		break;
	case RES_UNKNOWN:
		bw_set_cwd(c->st, BW_CWD_UNKNOWN, NULL);
		break;
	}
}

bool bw_word_is_dir(bw_ctx *c, const char *lit)
{
	char path[PW_PATH_MAX];
	const char *note;
	return resolve(c, lit, false, path, &note) == RES_PATH && stat_is_dir(c, path);
}

bool bw_exists(bw_ctx *c, const char *path)
{
	return path_mode(c, path) >= 0;
}

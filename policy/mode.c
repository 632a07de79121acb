/* SPDX-License-Identifier: MIT */
/*
 * One mode file: Markdown with YAML frontmatter between '---' lines (mode.h has the keys).
 *
 * Parsing reports every problem it finds rather than stopping at the first, each with the
 * file, line, column and dotted key path, so one run of `piworkfs modes` shows the author
 * everything to fix. Errors make the caller skip the file; warnings (an unknown key that
 * is no near miss of a known one, an empty body) do not. Nothing here prints: problems go into a
 * pw_warnings list.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "glob.h"
#include "pw_limits.h"
#include "mode.h"
#include "util.h"
#include "yamlx.h"

/* ---- warnings ---------------------------------------------------------------------- */

void pw_warning_done(pw_warning *w)
{
	free(w->file);
	free(w->key);
	free(w->message);
}

void pw_warnings_done(pw_warnings *w)
{
	for (size_t i = 0; i < w->n; i++) {
		pw_warning_done(&w->v[i]);
		free(w->mode[i]);
	}
	free(w->v);
	free(w->mode);
	*w = (pw_warnings){0};
}

static int warnings_grow(pw_warnings *w)
{
	size_t cap = w->cap ? w->cap * 2 : 16;
	pw_warning *v;
	char **mode;

	v = reallocarray(w->v, cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	w->v = v;
	mode = reallocarray(w->mode, cap, sizeof(*mode));
	if (!mode)
		return -ENOMEM;
	w->mode = mode;
	w->cap = cap;
	return 0;
}

int pw_warnings_addv(pw_warnings *w, const char *mode, pw_severity sev, const char *file,
		     unsigned line, unsigned column, const char *key, const char *fmt, va_list ap)
{
	pw_warning x = {.severity = sev, .line = line, .column = column};
	_cleanup_free_ char *mode_copy = NULL;
	int r;

	if (w->n == w->cap) {
		r = warnings_grow(w);
		if (r < 0)
			return r;
	}
	r = vasprintf(&x.message, fmt, ap);
	if (r < 0)
		return -ENOMEM;
	x.file = strdup(file ? file : "");
	x.key = pw_dup_or_null(key);
	mode_copy = pw_dup_or_null(mode);
	if (!x.file || (key && !x.key) || (mode && !mode_copy)) {
		pw_warning_done(&x);
		return -ENOMEM;
	}
	w->v[w->n] = x;
	w->mode[w->n] = TAKE_PTR(mode_copy);
	w->n++;
	return 0;
}

int pw_warnings_add(pw_warnings *w, const char *mode, pw_severity sev, const char *file,
		    unsigned line, unsigned column, const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = pw_warnings_addv(w, mode, sev, file, line, column, key, fmt, ap);
	va_end(ap);
	return r;
}

char *pw_warning_format(const pw_warning *w)
{
	char pos[64] = "";
	char *s = NULL;

	if (w->line > 0 && w->column > 0)
		snprintf(pos, sizeof(pos), ":%u:%u", w->line, w->column);
	else if (w->line > 0)
		snprintf(pos, sizeof(pos), ":%u", w->line);
	if (asprintf(&s, "%s%s: %s: %s%s%s", w->file ? w->file : "", pos,
		     w->severity == PW_ERROR ? "error" : "warning", w->key ? w->key : "",
		     w->key ? ": " : "", w->message ? w->message : "") < 0)
		return NULL;
	return s;
}

static const char *const layer_names[] = {
    [PW_LAYER_BUNDLED] = "bundled", [PW_LAYER_GLOBAL] = "global", [PW_LAYER_PROJECT] = "project",
    [PW_LAYER_DEFAULT] = "default", [PW_LAYER_LANE] = "lane",
};

const char *pw_layer_name(pw_layer l)
{
	return PW_NAME_OF(layer_names, l, "unknown");
}

static const char *const rule_kind_names[] = {
    [PW_RULE_ALLOW] = "allow",	       [PW_RULE_DENY] = "deny",	  [PW_RULE_HIDE] = "hide",
    [PW_RULE_PROTECTED] = "protected", [PW_RULE_TOKEN] = "token", [PW_RULE_LANE] = "lane",
};

const char *pw_rule_kind_name(pw_rule_kind k)
{
	return PW_NAME_OF(rule_kind_names, k, "unknown");
}

int pw_layer_from_name(const char *name)
{
	return PW_NAME_INDEX(layer_names, name);
}

int pw_rule_kind_from_name(const char *name)
{
	return PW_NAME_INDEX(rule_kind_names, name);
}

/* ---- rules ------------------------------------------------------------------------- */

int pw_rule_init(pw_rule *r, pw_rule_kind kind, const char *pattern, const char *file,
		 unsigned line, unsigned column, pw_layer layer, const char **ret_err)
{
	pw_rule x = {.kind = kind, .line = line, .column = column, .layer = layer};
	int k;

	k = pw_glob_compile(pattern, &x.glob, ret_err);
	if (k < 0)
		return k == -ENOMEM ? -ENOMEM : -EINVAL;
	x.pattern = strdup(pattern);
	x.file = strdup(file);
	if (!x.pattern || !x.file) {
		pw_rule_done(&x);
		return -ENOMEM;
	}
	*r = x;
	return 0;
}

int pw_rule_copy(pw_rule *dst, const pw_rule *src)
{
	/* The glob is shared, not compiled again: a switch builds its policy from rules the
	 * mode files compiled at load. */
	pw_rule x = *src;
	x.pattern = strdup(src->pattern);
	x.file = strdup(src->file);
	x.glob = pw_glob_ref(src->glob);
	if (!x.pattern || !x.file) {
		pw_rule_done(&x);
		return -ENOMEM;
	}
	*dst = x;
	return 0;
}

void pw_rule_done(pw_rule *r)
{
	free(r->pattern);
	pw_glob_free(r->glob);
	free(r->file);
	*r = (pw_rule){0};
}

void pw_rules_free(pw_rule *v, size_t n)
{
	PW_FREE_ARRAY(v, n, pw_rule_done);
}

int pw_rules_reserve(pw_rule **v, size_t n)
{
	bool full = n == 0 || (n >= 8 && (n & (n - 1)) == 0);
	pw_rule *nv;

	if (!full)
		return 0;
	nv = reallocarray(*v, n == 0 ? 8 : n * 2, sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	return 0;
}

int pw_rules_append_copy(pw_rule **v, size_t *n, const pw_rule *src)
{
	int r;

	r = pw_rules_reserve(v, *n);
	if (r < 0)
		return r;
	r = pw_rule_copy(&(*v)[*n], src);
	if (r < 0)
		return r;
	(*n)++;
	return 0;
}

void pw_mode_done(pw_mode *m)
{
	free(m->name);
	free(m->description);
	free(m->body);
	free(m->file);
	pw_rules_free(m->rules, m->n_rules);
	*m = (pw_mode){0};
}

void pw_mode_file_free(pw_mode_file *mf)
{
	if (!mf)
		return;
	pw_mode_done(&mf->mode);
	free(mf);
}

static void mode_file_freep(pw_mode_file **mf)
{
	pw_mode_file_free(*mf);
}

/* ---- files ------------------------------------------------------------------------- */

int pw_read_small_file(const char *file, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t len = 0;

	/* O_NONBLOCK: a FIFO planted as a mode file must not hang the loader. */
	fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_size > PW_MODE_FILE_MAX)
		return -EFBIG;
	buf = malloc(PW_MODE_FILE_MAX + 2);
	if (!buf)
		return -ENOMEM;
	/* Read one byte past the cap so that a file that grew since fstat is caught. */
	ssize_t k = pw_read_upto(fd, buf, PW_MODE_FILE_MAX + 1);
	if (k < 0)
		return (int)k;
	len = (size_t)k;
	if (len > PW_MODE_FILE_MAX)
		return -EFBIG;
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

/* ---- frontmatter ------------------------------------------------------------------- */

typedef struct frontmatter {
	const char *yaml;
	size_t yaml_len;
	const char *body;
	size_t body_len;
	unsigned close_line; /* line of the closing '---' */
} frontmatter;

/* A marker line is "---" with optional trailing blanks and CR. */
static bool is_marker_line(const char *s, size_t len)
{
	if (len < 3 || memcmp(s, "---", 3) != 0)
		return false;
	for (size_t i = 3; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return false;
	return true;
}

/* Splits BUF after its BOM was dropped. Returns 0, -ENOMSG (no opening marker) or
 * -EBADMSG (no closing marker). */
static int split_frontmatter(const char *buf, size_t len, frontmatter *ret)
{
	const char *end = buf + len, *nl, *line;
	unsigned lineno = 2;

	nl = memchr(buf, '\n', len);
	if (!nl || !is_marker_line(buf, (size_t)(nl - buf)))
		return -ENOMSG;
	line = nl + 1;
	while (line < end) {
		size_t left = (size_t)(end - line);

		nl = memchr(line, '\n', left);
		if (is_marker_line(line, nl ? (size_t)(nl - line) : left)) {
			ret->yaml = buf + (size_t)(strchr(buf, '\n') - buf) + 1;
			ret->yaml_len = (size_t)(line - ret->yaml);
			ret->body = nl ? nl + 1 : end;
			ret->body_len = (size_t)(end - ret->body);
			ret->close_line = lineno;
			return 0;
		}
		if (!nl)
			break;
		line = nl + 1;
		lineno++;
	}
	return -EBADMSG;
}

/* The body with CRLF turned into LF. */
static char *body_dup(const char *s, size_t len)
{
	char *out = malloc(len + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\r' && i + 1 < len && s[i + 1] == '\n')
			continue;
		*o++ = s[i];
	}
	*o = '\0';
	return out;
}

static bool is_blank(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return false;
	return true;
}

/* ---- the frontmatter's keys -------------------------------------------------------- */

typedef struct mode_parser {
	pw_yaml_parse y;
	pw_mode_file *mf;
	const pw_yx_node *name_node; /* the frontmatter's name, for mp_name */
} mode_parser;

_printf_(4, 5) int pw_yaml_error(pw_yaml_parse *p, const pw_yx_node *at, const char *key,
				 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	p->failed = true;
	int r = pw_warnings_addv(p->w, p->stem, PW_ERROR, p->file, at ? at->line : 0,
				 at ? at->column : 0, key, fmt, ap);
	va_end(ap);
	return r;
}

bool pw_mode_name_is_valid(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > PW_MODE_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (c == '-' && i > 0)
			continue;
		return false;
	}
	return true;
}

static int mp_string(mode_parser *p, const pw_yx_node *v, const char *key, bool null_ok, char **ret)
{
	char *s;

	if (v->kind != PW_YX_SCALAR || pw_yx_is_null(v)) {
		if (null_ok && pw_yx_is_null(v))
			return 0;
		return pw_yaml_error(&p->y, v, key, "expected a string, not %s", pw_yx_describe(v));
	}
	s = strdup(v->text);
	if (!s)
		return -ENOMEM;
	free(*ret);
	*ret = s;
	return 0;
}

static int mp_bool(mode_parser *p, const pw_yx_node *v, const char *key, bool *ret)
{
	if (pw_yx_bool(v, ret) == 0)
		return 0;
	if (v->kind == PW_YX_SCALAR && !pw_yx_is_null(v))
		return pw_yaml_error(&p->y, v, key, "expected true or false, not \"%.40s\"",
				     v->text);
	return pw_yaml_error(&p->y, v, key, "expected true or false, not %s", pw_yx_describe(v));
}

/* ITEM of a list of globs under KEY as a rule of KIND appended to *RULES (*N). */
static int add_rule(pw_yaml_parse *p, pw_rule_kind kind, const pw_yx_node *item, const char *key,
		    pw_rule **rules, size_t *n)
{
	const char *err = NULL;
	int r;

	if (item->kind != PW_YX_SCALAR || pw_yx_is_null(item))
		return pw_yaml_error(p, item, key, "expected a glob string, not %s",
				     pw_yx_describe(item));
	r = pw_rules_reserve(rules, *n);
	if (r < 0)
		return r;
	r = pw_rule_init(&(*rules)[*n], kind, item->text, p->file, item->line, item->column,
			 p->layer, &err);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return pw_yaml_error(p, item, key, "invalid glob \"%.100s\": %s", item->text,
				     err ? err : "syntax error");
	(*n)++;
	return 0;
}

int pw_yaml_rules(pw_yaml_parse *p, const pw_yx_node *v, const char *key, pw_rule_kind kind,
		  pw_rule **rules, size_t *n)
{
	int added = 0;

	if (pw_yx_is_null(v))
		return 0;
	if (v->kind != PW_YX_SEQ)
		return pw_yaml_error(p, v, key, "expected a list of globs, not %s",
				     pw_yx_describe(v));
	if (v->n_items > PW_RULES_MAX)
		return pw_yaml_error(p, v, key, "too many rules: %zu (limit %d)", v->n_items,
				     PW_RULES_MAX);
	for (size_t i = 0; i < v->n_items; i++) {
		char ikey[64];
		size_t before = *n;

		snprintf(ikey, sizeof(ikey), "%s[%zu]", key, i);
		int r = add_rule(p, kind, v->items[i], ikey, rules, n);
		if (r < 0)
			return r;
		added += *n > before;
	}
	return added;
}

/* A list of globs under KEY into the mode's rules. */
static int mp_rules(mode_parser *p, const pw_yx_node *v, const char *key, pw_rule_kind kind)
{
	return pw_yaml_rules(&p->y, v, key, kind, &p->mf->mode.rules, &p->mf->mode.n_rules);
}

/*
 * The edit distance of A and B (each at most PW_KEY_CMP_MAX bytes): Levenshtein's, with a swap
 * of two adjacent bytes counting one edit as well ("dney" is one edit from "deny"), three
 * rows at a time.
 */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
	size_t rows[3][PW_KEY_CMP_MAX + 1];
	size_t *pprev = rows[0], *prev = rows[1], *cur = rows[2];

	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *t;

		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);

			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    pprev[j - 2] + 1 < best)
				best = pprev[j - 2] + 1;
			cur[j] = best;
		}
		t = pprev;
		pprev = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

const char *pw_key_near_miss(const char *key, const char *const *known)
{
	size_t lk = strlen(key), best = SIZE_MAX;
	const char *found = NULL;

	if (lk == 0 || lk > PW_KEY_CMP_MAX)
		return NULL;
	for (size_t i = 0; known[i]; i++) {
		size_t lw = strlen(known[i]), d, limit = lw <= 4 ? 1 : 2;

		if (lw > PW_KEY_CMP_MAX)
			continue;
		d = edit_distance(key, lk, known[i], lw);
		if (d > 0 && d <= limit && d < best) {
			best = d;
			found = known[i];
		}
	}
	return found;
}

int pw_yaml_unknown(pw_yaml_parse *p, const pw_yx_node *k, const char *key,
		    const char *const *known)
{
	const char *hint = pw_key_near_miss(k->text, known);

	if (hint)
		return pw_yaml_error(p, k, key, "unknown key; did you mean '%s'?", hint);
	return pw_warnings_add(p->w, p->stem, PW_WARNING, p->file, k->line, k->column, key,
			       "unknown key (ignored)");
}

static const char *const top_keys[] = {"name",	  "description",    "writes", "hide",
				       "protect", "keep_originals", NULL};
static const char *const writes_keys[] = {"allow", "deny", "tokens", "plans", NULL};

static int mp_unknown(mode_parser *p, const pw_yx_node *k, const char *key)
{
	return pw_yaml_unknown(&p->y, k, key, top_keys);
}

int pw_yaml_map(pw_yaml_parse *p, const pw_yx_node *v, const char *prefix, const char *what,
		int (*fn)(const pw_yx_node *k, const pw_yx_node *value, const char *key, void *u),
		void *u)
{
	if (!v || pw_yx_is_null(v))
		return 0;
	if (v->kind != PW_YX_MAP)
		return pw_yaml_error(p, v, prefix, "expected %s, not %s", what, pw_yx_describe(v));
	for (size_t i = 0; i < pw_yx_map_count(v); i++) {
		const pw_yx_node *k = pw_yx_map_key(v, i);
		_cleanup_free_ char *dotted = NULL;
		const char *key = k->text;
		int r;

		if (prefix && asprintf(&dotted, "%s.%s", prefix, k->text) < 0)
			return -ENOMEM;
		if (dotted)
			key = dotted;
		if (pw_yx_key_is_duplicate(v, i))
			r = pw_yaml_error(p, k, key, "duplicate key");
		else
			r = fn(k, pw_yx_map_value(v, i), key, u);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One key K of writes (KEY is "writes.K"). */
static int mp_writes_key(const pw_yx_node *k, const pw_yx_node *val, const char *key, void *u)
{
	mode_parser *p = u;
	pw_mode_file *mf = p->mf;
	int r;

	if (streq(k->text, "allow")) {
		r = mp_rules(p, val, key, PW_RULE_ALLOW);
		if (r > 0)
			mf->allow_key = (pw_mark){k->line, k->column};
	} else if (streq(k->text, "deny"))
		r = mp_rules(p, val, key, PW_RULE_DENY);
	else if (streq(k->text, "tokens")) {
		r = mp_bool(p, val, key, &mf->mode.tokens);
		if (r >= 0 && mf->mode.tokens)
			mf->tokens_key = (pw_mark){k->line, k->column};
	} else if (streq(k->text, "plans")) {
		r = mp_bool(p, val, key, &mf->mode.plans);
		if (r >= 0 && mf->mode.plans)
			mf->plans_key = (pw_mark){k->line, k->column};
	} else
		r = pw_yaml_unknown(&p->y, k, key, writes_keys);
	return r;
}

static int mp_writes(mode_parser *p, const pw_yx_node *v)
{
	return pw_yaml_map(&p->y, v, "writes", "a mapping of allow, deny, tokens and plans",
			   mp_writes_key, p);
}

/* One key K of the frontmatter (KEY is K's text). */
static int mp_top_key(const pw_yx_node *k, const pw_yx_node *v, const char *key, void *u)
{
	mode_parser *p = u;
	pw_mode_file *mf = p->mf;
	int r;

	(void)key;
	if (streq(k->text, "name")) {
		p->name_node = v;
		return mp_string(p, v, "name", false, &mf->mode.name);
	}
	if (streq(k->text, "description"))
		return mp_string(p, v, "description", true, &mf->mode.description);
	if (streq(k->text, "writes"))
		return mp_writes(p, v);
	if (streq(k->text, "hide")) {
		r = mp_rules(p, v, "hide", PW_RULE_HIDE);
		return r < 0 ? r : 0;
	}
	if (streq(k->text, "protect")) {
		r = mp_bool(p, v, "protect", &mf->mode.protect);
		if (r >= 0 && !mf->mode.protect)
			mf->protect_key = (pw_mark){k->line, k->column};
		return r;
	}
	if (streq(k->text, "keep_originals"))
		return mp_bool(p, v, "keep_originals", &mf->mode.keep_originals);
	return mp_unknown(p, k, k->text);
}

static int mp_name(mode_parser *p, const pw_yx_node *root, const pw_yx_node *name_node)
{
	const char *name = p->mf->mode.name;

	if (!name_node)
		return pw_yaml_error(&p->y, root, "name", "missing required key");
	if (!name)
		return 0; /* wrong type, already reported */
	if (!pw_mode_name_is_valid(name))
		return pw_yaml_error(
		    &p->y, name_node, "name",
		    "invalid mode name \"%.100s\": use a-z, 0-9 and '-', not starting "
		    "with '-', at most %d bytes",
		    name, PW_MODE_NAME_MAX);
	if (!streq(name, p->y.stem))
		return pw_yaml_error(&p->y, name_node, "name",
				     "name \"%s\" does not match the file name \"%.100s.md\"", name,
				     p->y.stem);
	return 0;
}

static int mp_frontmatter(mode_parser *p, const pw_yx_node *root, unsigned first_line)
{
	pw_yx_node at = {.line = first_line, .column = 1};
	int r;

	if (!root)
		return pw_yaml_error(&p->y, &at, "name", "missing required key");
	if (root->kind != PW_YX_MAP)
		return pw_yaml_error(&p->y, root, NULL,
				     "the frontmatter must be a mapping of keys, not %s",
				     pw_yx_describe(root));
	r = pw_yaml_map(&p->y, root, NULL, "a mapping of keys", mp_top_key, p);
	if (r < 0)
		return r;
	return mp_name(p, root, p->name_node);
}

static const char *file_stem(const char *file, char *buf, size_t size)
{
	const char *base = strrchr(file, '/');
	size_t len;

	base = base ? base + 1 : file;
	len = strlen(base);
	if (len > 3 && streq(base + len - 3, ".md"))
		len -= 3;
	if (len >= size)
		len = size - 1;
	memcpy(buf, base, len);
	buf[len] = '\0';
	return buf;
}

static int mp_body(mode_parser *p, const frontmatter *fm)
{
	pw_mode *m = &p->mf->mode;

	m->body = body_dup(fm->body, fm->body_len);
	if (!m->body)
		return -ENOMEM;
	if (is_blank(m->body))
		return pw_warnings_add(p->y.w, p->y.stem, PW_WARNING, p->y.file, fm->close_line, 0,
				       NULL,
				       "empty body: an agent gets no instructions in this mode");
	return 0;
}

static int mp_split(mode_parser *p, const char *buf, size_t len, frontmatter *ret)
{
	pw_yx_node at = {.line = 1, .column = 1};
	int r;

	if (memchr(buf, '\0', len))
		return pw_yaml_error(&p->y, NULL, NULL, "the file holds a NUL byte");
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
		buf += 3;
		len -= 3;
	}
	r = split_frontmatter(buf, len, ret);
	if (r == -ENOMSG)
		return pw_yaml_error(&p->y, &at, NULL,
				     "missing frontmatter: the file must start with a '---' line");
	if (r == -EBADMSG)
		return pw_yaml_error(&p->y, &at, NULL,
				     "unterminated frontmatter: no closing '---' line");
	return 0;
}

int pw_mode_parse(const char *file, const char *buf, size_t len, pw_layer layer, pw_warnings *w,
		  pw_mode_file **ret)
{
	_cleanup_(mode_file_freep) pw_mode_file *mf = NULL;
	pw_yx_node *root = NULL;
	char stem[PW_NAME_MAX + 1];
	mode_parser p = {.y = {.file = file, .layer = layer, .w = w}};
	frontmatter fm = {0};
	pw_yx_error yerr = {0};
	int r;

	p.y.stem = file_stem(file, stem, sizeof(stem));
	mf = calloc(1, sizeof(*mf));
	if (!mf)
		return -ENOMEM;
	mf->mode.protect = true;
	mf->mode.keep_originals = true;
	mf->mode.layer = layer;
	p.mf = mf;

	r = mp_split(&p, buf, len, &fm);
	if (r < 0 || p.y.failed)
		return r < 0 ? r : -EINVAL;
	r = pw_yx_parse(fm.yaml, fm.yaml_len, 1, &root, &yerr);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		p.y.failed = true;
		r = pw_warnings_add(w, p.y.stem, PW_ERROR, file, yerr.line, yerr.column, NULL, "%s",
				    yerr.message);
		return r < 0 ? r : -EINVAL;
	}
	r = mp_frontmatter(&p, root, 2);
	pw_yx_free(root);
	if (r < 0)
		return r;
	r = mp_body(&p, &fm);
	if (r < 0)
		return r;
	if (p.y.failed)
		return -EINVAL;
	mf->mode.file = strdup(file);
	if (!mf->mode.file || (!mf->mode.description && !(mf->mode.description = strdup(""))))
		return -ENOMEM;
	*ret = TAKE_PTR(mf);
	return 0;
}

int pw_yaml_read(const char *file, const char *stem, bool missing_ok, pw_warnings *w, char **ret,
		 size_t *ret_len)
{
	int r = pw_read_small_file(file, ret, ret_len);
	if (r >= 0 || r == -ENOMEM || (r == -ENOENT && missing_ok))
		return r < 0 ? r : 0;
	if (r == -EFBIG)
		r = pw_warnings_add(w, stem, PW_ERROR, file, 0, 0, NULL,
				    "file too large (limit %d bytes)", PW_MODE_FILE_MAX);
	else if (r == -EINVAL)
		r = pw_warnings_add(w, stem, PW_ERROR, file, 0, 0, NULL, "not a regular file");
	else
		r = pw_warnings_add(w, stem, PW_ERROR, file, 0, 0, NULL, "cannot read: %s",
				    strerror(-r));
	return r < 0 ? r : -EINVAL;
}

int pw_mode_load(const char *file, pw_layer layer, pw_warnings *w, pw_mode_file **ret)
{
	_cleanup_free_ char *buf = NULL;
	char stem[PW_NAME_MAX + 1];
	size_t len;
	int r;

	file_stem(file, stem, sizeof(stem));
	r = pw_yaml_read(file, stem, false, w, &buf, &len);
	return r < 0 ? r : pw_mode_parse(file, buf, len, layer, w, ret);
}

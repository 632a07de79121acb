/* SPDX-License-Identifier: MIT */
/*
 * What known commands write: ONE table (writers[] below), one row per command name, naming
 * the handler that maps the command's arguments to targets and the options that take a
 * value (so the scanner can tell option values from file arguments). To teach the analysis
 * a new command, add a row; reuse a handler when one fits (h_all: every file argument is
 * written; h_none: writes nothing; h_copy: cp/mv-like).
 *
 * A command that is not in the table is "unknown", never allowed. Wrappers (env, sudo,
 * nice, xargs, find -exec, sh -c, ...) find the command they run and dispatch it again,
 * one level deeper.
 */
#include <errno.h>
#include <string.h>

#include "bash_internal.h"
#include "bash_path.h"
#include "bash_targets.h"
#include "bash_writers.h"
#include "pw_limits.h"
#include "util.h"

typedef struct bw_cmd bw_cmd;
typedef void (*bw_handler)(bw_cmd *k);

typedef struct bw_writer {
	const char *name;
	bw_handler fn;
	const char *arg_short; /* short options that take a value ("t" for -t DIR) */
	const char *arg_long;  /* long options that take a value, "|name|name|" */
	const char *opt_short; /* short options whose value is attached or empty (sed -i) */
	pw_op op;	       /* the operation the file arguments stand for */
	const char *note;      /* for h_unknown and fixed targets */
} bw_writer;

typedef struct bw_opt {
	char c;		  /* short name, or 0 */
	const char *name; /* long name (no "--", may include "=value"), or NULL */
	size_t name_len;
	const bw_word *val;   /* the value word, or NULL */
	const char *attached; /* an attached value ("-i.bak" -> ".bak", "--x=v" -> "v") */
} bw_opt;

struct bw_cmd {
	bw_ctx *c;
	bw_word *argv;
	size_t argc;
	unsigned depth;
	const bw_writer *w;
	bw_word **pos; /* positional arguments */
	size_t n_pos;
	bw_opt *opts;
	size_t n_opts;
	char label[64];
};

/* ---------- option scanning ---------- */

static bool in_list(const char *list, const char *name, size_t n)
{
	if (!list)
		return false;
	for (const char *p = list; (p = strchr(p, '|')) && p[1]; p++) {
		if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '|')
			return true;
	}
	return false;
}

static void push_opt(bw_cmd *k, bw_opt o)
{
	bw_opt *v = reallocarray(k->opts, k->n_opts + 1, sizeof(*v));
	if (!v) {
		k->c->res->oom = true;
		return;
	}
	k->opts = v;
	k->opts[k->n_opts++] = o;
}

static void push_pos(bw_cmd *k, bw_word *w)
{
	bw_word **v = reallocarray(k->pos, k->n_pos + 1, sizeof(*v));
	if (!v) {
		k->c->res->oom = true;
		return;
	}
	k->pos = v;
	k->pos[k->n_pos++] = w;
}

/* Splits argv[FROM..] into options and positional words per W's option spec. When
 * STOP_AT_POS, the first positional word ends the scan (wrappers: the command follows) and
 * its index is returned; otherwise argc. */
static size_t scan(bw_cmd *k, const bw_writer *w, size_t from, bool stop_at_pos)
{
	bool dashdash = false;
	for (size_t i = from; i < k->argc; i++) {
		bw_word *a = &k->argv[i];
		const char *s = a->lit;
		if (dashdash || !s || a->unknown || s[0] != '-' || s[1] == '\0') {
			if (stop_at_pos)
				return i;
			push_pos(k, a);
			continue;
		}
		if (streq(s, "--")) {
			dashdash = true;
			if (stop_at_pos)
				return i + 1 < k->argc ? i + 1 : k->argc;
			continue;
		}
		if (s[1] == '-') {
			const char *name = s + 2, *eq = strchr(name, '=');
			size_t n = eq ? (size_t)(eq - name) : strlen(name);
			bw_opt o = {.name = name, .name_len = n, .attached = eq ? eq + 1 : NULL};
			if (!eq && in_list(w->arg_long, name, n) && i + 1 < k->argc)
				o.val = &k->argv[++i];
			push_opt(k, o);
			continue;
		}
		for (const char *p = s + 1; *p; p++) {
			bw_opt o = {.c = *p};
			if (w->opt_short && strchr(w->opt_short, *p)) {
				o.attached = p + 1;
				push_opt(k, o);
				break;
			}
			if (w->arg_short && strchr(w->arg_short, *p)) {
				if (p[1])
					o.attached = p + 1;
				else if (i + 1 < k->argc)
					o.val = &k->argv[++i];
				push_opt(k, o);
				break;
			}
			push_opt(k, o);
		}
	}
	return k->argc;
}

static const bw_opt *opt_get(const bw_cmd *k, char sc, const char *lname)
{
	for (size_t i = k->n_opts; i-- > 0;) {
		const bw_opt *o = &k->opts[i];
		if (sc && o->c == sc)
			return o;
		if (lname && o->name && strlen(lname) == o->name_len &&
		    strncmp(o->name, lname, o->name_len) == 0)
			return o;
	}
	return NULL;
}

static bool opt_has(const bw_cmd *k, char sc, const char *lname)
{
	return opt_get(k, sc, lname) != NULL;
}

/* The option's value as a word in *TMP (attached) or the following word. NULL if none. */
static const bw_word *opt_word(bw_cmd *k, const bw_opt *o, bw_word *tmp)
{
	if (!o)
		return NULL;
	if (o->val)
		return o->val;
	if (o->attached && o->attached[0]) {
		if (bw_word_literal(tmp, o->attached, NULL) < 0) {
			k->c->res->oom = true;
			return NULL;
		}
		return tmp;
	}
	return NULL;
}

/* ---------- target helpers ---------- */

static void tw(bw_cmd *k, const bw_word *w, pw_op op, bool is_dir, bool subtree)
{
	bw_target_word(k->c, k->label, w, PW_BASH_WRITE, op, is_dir, subtree);
}

static void tr(bw_cmd *k, const bw_word *w)
{
	bw_target_word(k->c, k->label, w, PW_BASH_READ, PW_OP_READ, false, false);
}

static void tw_lit(bw_cmd *k, const char *rel, pw_op op, bool is_dir, bool subtree)
{
	bw_target_lit(k->c, k->label, rel, PW_BASH_WRITE, op, is_dir, subtree);
}

/* Writes to the option's value (-o FILE), if given. */
static bool tw_opt(bw_cmd *k, char sc, const char *lname, pw_op op, bool is_dir, bool subtree)
{
	bw_word tmp = {0};
	const bw_word *w = opt_word(k, opt_get(k, sc, lname), &tmp);
	if (w && !(w->lit && streq(w->lit, "-")))
		tw(k, w, op, is_dir, subtree);
	bw_word_done(&tmp);
	return w != NULL;
}

static void unknown(bw_cmd *k, const char *why)
{
	bw_add_unknown_cmd(k->c, k->label, why);
}

static void outside(bw_cmd *k, const char *what, const char *why)
{
	bw_add(k->c, k->label, PW_BASH_WRITE, PW_OP_WRITE, PW_BASH_KIND_RAW, what, PW_BASH_OUTSIDE,
	       true, true, why);
}

static void set_label(bw_cmd *k, const char *a, const char *b)
{
	snprintf(k->label, sizeof(k->label), "%s%s%s", a, b ? " " : "", b ? b : "");
}

/* A word made of DIR + "/" + the last component of SRC (patterns kept), for cp SRC DIR/. */
static int join_base(bw_word *ret, const bw_word *dir, const bw_word *src)
{
	if (src->unknown || dir->unknown || !src->pat || !dir->pat)
		return -EINVAL;
	const char *spat = src->pat, *slash = strrchr(spat, '/');
	const char *base = slash ? slash + 1 : spat;
	size_t dl = strlen(dir->pat);
	while (dl > 1 && dir->pat[dl - 1] == '/')
		dl--;
	*ret = (bw_word){.tilde = dir->tilde};
	if (asprintf(&ret->pat, "%.*s/%s", (int)dl, dir->pat, base) < 0) {
		ret->pat = NULL;
		return -ENOMEM;
	}
	ret->lit = strdup(ret->pat); /* only used for messages; pat drives resolution */
	ret->raw = strdup(ret->pat);
	ret->glob = src->glob;
	if (!ret->lit || !ret->raw) {
		bw_word_done(ret);
		return -ENOMEM;
	}
	return 0;
}

static bool word_is_dir(bw_cmd *k, const bw_word *w)
{
	if (!w->lit || w->unknown)
		return false;
	size_t n = strlen(w->lit);
	if (n > 0 && w->lit[n - 1] == '/')
		return true;
	if (streq(w->lit, ".") || streq(w->lit, ".."))
		return true;
	return !w->tilde && !w->glob && bw_word_is_dir(k->c, w->lit);
}

/* ---------- handlers: plain writers ---------- */

static void h_none(bw_cmd *k)
{
}

static void h_unknown(bw_cmd *k)
{
	unknown(k, k->w->note ? k->w->note : "the analysis cannot tell what it writes");
}

/* Every file argument is written (rm, touch, mkdir, tee, shred, ...). */
static void h_all(bw_cmd *k)
{
	bool dir = k->w->op == PW_OP_MKDIR || k->w->op == PW_OP_RMDIR;
	bool rec =
	    k->w->op == PW_OP_UNLINK && (opt_has(k, 'r', "recursive") || opt_has(k, 'R', NULL));
	if (k->w->op == PW_OP_TRUNCATE) {
		bw_word tmp = {0};
		const bw_word *ref = opt_word(k, opt_get(k, 'r', "reference"), &tmp);
		if (ref)
			tr(k, ref);
		bw_word_done(&tmp);
	}
	for (size_t i = 0; i < k->n_pos; i++)
		tw(k, k->pos[i], k->w->op, dir || (rec && word_is_dir(k, k->pos[i])), rec);
}

/* chmod/chown/chgrp: the first argument is the mode or owner, unless --reference. */
static void h_mode_first(bw_cmd *k)
{
	size_t first = 1;
	bool rec = opt_has(k, 'R', "recursive");
	if (opt_has(k, 0, "reference"))
		first = 0;
	/* chmod -w FILE: the mode looks like an option. */
	for (size_t i = 1; i < k->argc && first; i++) {
		const char *s = k->argv[i].lit;
		if (s && s[0] == '-' && s[1] && strspn(s + 1, "rwxXst") == strlen(s + 1) &&
		    streq(k->w->name, "chmod"))
			first = 0;
	}
	for (size_t i = first; i < k->n_pos; i++)
		tw(k, k->pos[i], k->w->op, rec && word_is_dir(k, k->pos[i]), rec);
}

/* cp, mv, install, ln: -t DIR or the last argument is the destination. */
static void h_copy(bw_cmd *k)
{
	bool is_mv = streq(k->w->name, "mv"), is_ln = streq(k->w->name, "ln");
	bool rec =
	    opt_has(k, 'r', "recursive") || opt_has(k, 'R', NULL) || opt_has(k, 'a', "archive");
	bw_word tmp = {0};
	const bw_word *dir = opt_word(k, opt_get(k, 't', "target-directory"), &tmp);
	size_t n_src = k->n_pos;
	const bw_word *dest = NULL;

	if (streq(k->w->name, "install") && opt_has(k, 'd', "directory")) {
		for (size_t i = 0; i < k->n_pos; i++)
			tw(k, k->pos[i], PW_OP_MKDIR, true, false);
		goto out;
	}
	if (!dir) {
		if (k->n_pos == 0)
			goto out;
		if (k->n_pos == 1 && is_ln) {
			/* ln TARGET: a link named after it in the current directory. */
			bw_word dot;
			if (bw_word_literal(&dot, ".", NULL) == 0) {
				bw_word j;
				if (join_base(&j, &dot, k->pos[0]) == 0) {
					tw(k, &j, PW_OP_SYMLINK, false, false);
					bw_word_done(&j);
				} else {
					tw(k, &dot, PW_OP_SYMLINK, true, true); /* some name here */
				}
				bw_word_done(&dot);
			}
			goto out;
		}
		if (k->n_pos == 1)
			goto out; /* missing destination: the command fails */
		dest = k->pos[--n_src];
		if (!opt_has(k, 'T', "no-target-directory") && (n_src > 1 || word_is_dir(k, dest)))
			dir = dest;
	}
	pw_op op = is_mv ? PW_OP_RENAME : is_ln ? PW_OP_SYMLINK : PW_OP_CREATE;
	for (size_t i = 0; i < n_src; i++) {
		const bw_word *src = k->pos[i];
		if (is_mv)
			tw(k, src, PW_OP_RENAME, word_is_dir(k, src), false);
		else if (!is_ln)
			tr(k, src);
		if (!dir)
			continue;
		bw_word j;
		if (src->unknown || dir->unknown || !src->pat || !dir->pat) {
			tw(k, dir, op, true, true); /* somewhere in DIR */
		} else if (join_base(&j, dir, src) == 0) {
			tw(k, &j, op, word_is_dir(k, src), rec);
			bw_word_done(&j);
		}
	}
	if (!dir && dest)
		tw(k, dest, op, rec && n_src == 1 && word_is_dir(k, k->pos[0]), rec);
out:
	bw_word_done(&tmp);
}

/* rsync SRC... DEST: DEST (a remote host:path is outside). */
static void h_rsync(bw_cmd *k)
{
	if (k->n_pos < 2)
		return;
	const bw_word *dest = k->pos[k->n_pos - 1];
	for (size_t i = 0; i + 1 < k->n_pos; i++)
		if (!(k->pos[i]->lit && strchr(k->pos[i]->lit, ':')))
			tr(k, k->pos[i]);
	if (dest->lit && strchr(dest->lit, ':') &&
	    strchr(dest->lit, ':') < (strchr(dest->lit, '/') ? strchr(dest->lit, '/') : "\xff"))
		outside(k, dest->lit, "a remote destination");
	else
		tw(k, dest, PW_OP_CREATE, true, true);
}

/* sed: with -i/--in-place the file arguments are written (and FILE+SUFFIX as backups). */
static void h_sed(bw_cmd *k)
{
	const bw_opt *in = opt_get(k, 'i', "in-place");
	bool script_opt = opt_has(k, 'e', "expression") || opt_has(k, 'f', "file");
	size_t first = script_opt ? 0 : 1;
	if (!in) {
		for (size_t i = first; i < k->n_pos; i++)
			tr(k, k->pos[i]);
		return;
	}
	set_label(k, k->w->name, "-i");
	const char *suffix = in->attached && in->attached[0] ? in->attached : NULL;
	for (size_t i = first; i < k->n_pos; i++) {
		tw(k, k->pos[i], PW_OP_OPEN_WRITE, false, false);
		if (suffix && k->pos[i]->lit && !k->pos[i]->unknown && !strchr(suffix, '*')) {
			_cleanup_free_ char *b = NULL;
			if (asprintf(&b, "%s%s", k->pos[i]->lit, suffix) >= 0)
				tw_lit(k, b, PW_OP_CREATE, false, false);
		}
	}
}

/* perl -i[SUFFIX] -e CODE FILES: the files are written. Without -i, perl runs code. */
static void h_perl(bw_cmd *k)
{
	const bw_opt *in = opt_get(k, 'i', NULL);
	bool code = opt_has(k, 'e', NULL) || opt_has(k, 'E', NULL);
	if (!in || !code) {
		unknown(k, "runs perl code the analysis does not follow");
		return;
	}
	set_label(k, "perl", "-i");
	for (size_t i = 0; i < k->n_pos; i++)
		tw(k, k->pos[i], PW_OP_OPEN_WRITE, false, false);
}

/* dd of=FILE if=FILE. */
static void h_dd(bw_cmd *k)
{
	for (size_t i = 1; i < k->argc; i++) {
		bw_word *a = &k->argv[i], tmp;
		if (!a->lit || a->unknown) {
			unknown(k, "an operand the analysis cannot resolve");
			continue;
		}
		bool of = startswith(a->lit, "of="), in = startswith(a->lit, "if=");
		if (!of && !in)
			continue;
		if (bw_word_literal(&tmp, a->lit + 3, a->raw) < 0)
			continue;
		tmp.glob = false;
		if (of)
			tw(k, &tmp, PW_OP_OPEN_WRITE, false, false);
		else
			tr(k, &tmp);
		bw_word_done(&tmp);
	}
}

/* sort -o FILE; uniq IN OUT. */
static void h_sort(bw_cmd *k)
{
	tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
	if (streq(k->w->name, "uniq") && k->n_pos >= 2)
		tw(k, k->pos[1], PW_OP_OPEN_WRITE, false, false);
}

/* split [INPUT [PREFIX]]: PREFIX* (default "x"); csplit -f PREFIX (default "xx"). */
static void h_split(bw_cmd *k)
{
	bool cs = streq(k->w->name, "csplit");
	const char *prefix = cs ? "xx" : "x";
	bw_word tmp = {0};
	const bw_word *pw =
	    cs ? opt_word(k, opt_get(k, 'f', "prefix"), &tmp) : (k->n_pos >= 2 ? k->pos[1] : NULL);
	if (pw && (pw->unknown || !pw->lit)) {
		tw(k, pw, PW_OP_CREATE, false, false);
	} else {
		bw_word w;
		if (bw_word_literal(&w, pw ? pw->lit : prefix, NULL) == 0) {
			char *p = NULL;
			if (asprintf(&p, "%s*", w.pat) >= 0) {
				free(w.pat);
				w.pat = p;
				w.glob = true;
				tw(k, &w, PW_OP_CREATE, false, false);
			}
			bw_word_done(&w);
		}
	}
	bw_word_done(&tmp);
}

/* tar: -x writes into -C DIR (or here); -c/-r/-u write the -f archive. */
static void h_tar(bw_cmd *k)
{
	bool x = opt_has(k, 'x', "extract") || opt_has(k, 0, "get");
	bool cr = opt_has(k, 'c', "create") || opt_has(k, 'r', "append") ||
		  opt_has(k, 'u', "update") || opt_has(k, 'A', "concatenate") ||
		  opt_has(k, 0, "delete");
	/* Old style: "tar xzf ARCHIVE": the first word is a cluster without '-'. */
	const bw_word *first = k->argc > 1 ? &k->argv[1] : NULL;
	const bw_word *old_f = NULL, *old_C = NULL;
	if (first && first->lit && !first->unknown && first->lit[0] != '-' &&
	    strspn(first->lit, "AcdrtuxfvzjJaCkmopSWZlhiTX") == strlen(first->lit)) {
		size_t next = 2;
		for (const char *p = first->lit; *p; p++) {
			x |= *p == 'x';
			cr |= *p == 'c' || *p == 'r' || *p == 'u' || *p == 'A';
			if (strchr("fCTXb", *p) && next < k->argc) {
				if (*p == 'f')
					old_f = &k->argv[next];
				if (*p == 'C')
					old_C = &k->argv[next];
				next++;
			}
		}
	}
	if (x) {
		set_label(k, "tar", "-x");
		if (old_C)
			tw(k, old_C, PW_OP_CREATE, true, true);
		else if (!tw_opt(k, 'C', "directory", PW_OP_CREATE, true, true))
			tw_lit(k, ".", PW_OP_CREATE, true, true);
	}
	if (cr) {
		set_label(k, "tar", "-c");
		if (old_f) {
			if (!(old_f->lit && streq(old_f->lit, "-")))
				tw(k, old_f, PW_OP_OPEN_WRITE, false, false);
		} else {
			tw_opt(k, 'f', "file", PW_OP_OPEN_WRITE, false, false);
		}
	}
}

/* unzip ARCHIVE [-d DIR]: DIR or here; -l/-t/-v/-p/-Z write nothing. */
static void h_unzip(bw_cmd *k)
{
	if (opt_has(k, 'l', NULL) || opt_has(k, 't', NULL) || opt_has(k, 'v', NULL) ||
	    opt_has(k, 'p', NULL) || opt_has(k, 'Z', NULL) || opt_has(k, 'c', NULL))
		return;
	if (!tw_opt(k, 'd', NULL, PW_OP_CREATE, true, true))
		tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* zip ARCHIVE FILES...: the archive. */
static void h_zip(bw_cmd *k)
{
	if (k->n_pos > 0)
		tw(k, k->pos[0], PW_OP_OPEN_WRITE, false, false);
}

/* gzip & co: FILE becomes FILE.EXT (FILE removed); -d reverses; -c writes to stdout. */
static void h_compress(bw_cmd *k)
{
	static const struct {
		const char *name, *ext;
		bool decompress, keeps;
	} tools[] = {
	    {"gzip", ".gz", false, false},   {"gunzip", ".gz", true, false},
	    {"bzip2", ".bz2", false, false}, {"bunzip2", ".bz2", true, false},
	    {"xz", ".xz", false, false},     {"unxz", ".xz", true, false},
	    {"zstd", ".zst", false, true},   {"unzstd", ".zst", true, true},
	    {"lz4", ".lz4", false, true},
	};
	const char *ext = ".gz";
	bool dec = false, keeps = false;
	for (size_t i = 0; i < ELEMENTSOF(tools); i++)
		if (streq(k->w->name, tools[i].name)) {
			ext = tools[i].ext;
			dec = tools[i].decompress;
			keeps = tools[i].keeps;
		}
	if (opt_has(k, 'c', "stdout") || opt_has(k, 'l', "list") || opt_has(k, 't', "test"))
		return;
	dec |= opt_has(k, 'd', "decompress") || opt_has(k, 0, "uncompress");
	keeps |= opt_has(k, 'k', "keep");
	if (opt_has(k, 0, "rm"))
		keeps = false;
	size_t el = strlen(ext);
	for (size_t i = 0; i < k->n_pos; i++) {
		const bw_word *w = k->pos[i];
		if (w->unknown || !w->pat) {
			tw(k, w, PW_OP_CREATE, false, false);
			continue;
		}
		bw_word out = {0};
		size_t n = strlen(w->pat);
		out.raw = strdup(w->raw ? w->raw : w->pat);
		if (dec)
			out.pat =
			    n > el && streq(w->pat + n - el, ext) ? strndup(w->pat, n - el) : NULL;
		else if (asprintf(&out.pat, "%s%s", w->pat, ext) < 0)
			out.pat = NULL;
		out.lit = out.pat ? strdup(out.pat) : NULL;
		out.glob = w->glob;
		out.tilde = w->tilde;
		if (out.pat && out.lit)
			tw(k, &out, PW_OP_CREATE, false, false);
		else if (dec)
			unknown(k, "a file name without the expected suffix");
		if (!keeps)
			tw(k, w, PW_OP_UNLINK, false, false);
		bw_word_done(&out);
	}
}

/* curl: -o FILE, --output-dir, -O (named after the URL, here), -D/-c FILE. */
static void h_curl(bw_cmd *k)
{
	tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
	tw_opt(k, 'D', "dump-header", PW_OP_OPEN_WRITE, false, false);
	tw_opt(k, 'c', "cookie-jar", PW_OP_OPEN_WRITE, false, false);
	if (opt_has(k, 'O', "remote-name") || opt_has(k, 0, "remote-name-all")) {
		if (!tw_opt(k, 0, "output-dir", PW_OP_CREATE, true, true))
			tw_lit(k, ".", PW_OP_CREATE, true, true);
	}
}

/* wget: -O FILE ("-": stdout), -P DIR, -o LOG; by default a file named after the URL
 * here (anything, with -r). */
static void h_wget(bw_cmd *k)
{
	tw_opt(k, 'o', "output-file", PW_OP_OPEN_WRITE, false, false);
	tw_opt(k, 'a', "append-output", PW_OP_OPEN_WRITE, false, false);
	bw_word tmp = {0};
	const bw_word *O = opt_word(k, opt_get(k, 'O', "output-document"), &tmp);
	if (O) {
		if (!(O->lit && streq(O->lit, "-")))
			tw(k, O, PW_OP_OPEN_WRITE, false, false);
	} else if (!tw_opt(k, 'P', "directory-prefix", PW_OP_CREATE, true, true)) {
		tw_lit(k, ".", PW_OP_CREATE, true, true);
	}
	bw_word_done(&tmp);
}

/* patch: -o OUT, FILE, or the files named inside the patch (unknown: here). */
static void h_patch(bw_cmd *k)
{
	if (opt_has(k, 0, "dry-run"))
		return;
	if (tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false))
		return;
	bw_word tmp = {0};
	const bw_word *in = opt_word(k, opt_get(k, 'i', "input"), &tmp);
	if (in)
		tr(k, in);
	bw_word_done(&tmp);
	if (k->n_pos > 0)
		tw(k, k->pos[0], PW_OP_OPEN_WRITE, false, false);
	else if (!tw_opt(k, 'd', "directory", PW_OP_CREATE, true, true))
		tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* make/ninja: the recipes are unknown; conservatively the whole directory (-C DIR). */
static void h_make(bw_cmd *k)
{
	if (opt_has(k, 'n', "dry-run") || opt_has(k, 'q', "question") ||
	    opt_has(k, 0, "just-print") || opt_has(k, 0, "version") || opt_has(k, 0, "help"))
		return;
	if (!tw_opt(k, 'C', "directory", PW_OP_CREATE, true, true))
		tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* cmake --build DIR / -B DIR / configure here; cmake -E runs arbitrary tools. */
static void h_cmake(bw_cmd *k)
{
	if (opt_has(k, 'E', NULL) || opt_has(k, 'P', NULL)) {
		unknown(k, "cmake -E/-P runs commands the analysis does not follow");
		return;
	}
	if (opt_has(k, 0, "version") || opt_has(k, 0, "help"))
		return;
	if (opt_has(k, 0, "install")) {
		outside(k, "(install prefix)", "installs outside the project");
		return;
	}
	if (tw_opt(k, 0, "build", PW_OP_CREATE, true, true))
		return;
	if (!tw_opt(k, 'B', NULL, PW_OP_CREATE, true, true))
		tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* cargo: build & co write target/ and Cargo.lock; run/install go further. */
static void h_cargo(bw_cmd *k)
{
	const char *sub = k->n_pos > 0 && k->pos[0]->lit ? k->pos[0]->lit : NULL;
	static const char *const builds[] = {
	    "build", "b",      "check", "c",	 "test",   "t",	    "doc",
	    "d",     "clippy", "bench", "clean", "update", "fetch", "generate-lockfile",
	    NULL};
	if (!sub || opt_has(k, 'V', "version") || opt_has(k, 'h', "help"))
		return;
	set_label(k, "cargo", sub);
	if (streq(sub, "install")) {
		outside(k, "~/.cargo", "installs outside the project");
		return;
	}
	if (streq(sub, "fmt")) {
		tw_lit(k, ".", PW_OP_OPEN_WRITE, true, true);
		return;
	}
	bool known = false;
	for (size_t i = 0; builds[i]; i++)
		known |= streq(sub, builds[i]);
	if (!known && !streq(sub, "run") && !streq(sub, "r")) {
		unknown(k, "a cargo subcommand the analysis does not know");
		return;
	}
	if (!tw_opt(k, 0, "target-dir", PW_OP_CREATE, true, true))
		tw_lit(k, "target", PW_OP_CREATE, true, true);
	tw_lit(k, "Cargo.lock", PW_OP_OPEN_WRITE, false, false);
	if (streq(sub, "run") || streq(sub, "r"))
		unknown(k, "runs the program it builds");
}

/* go build (-o FILE, or a binary here), go mod tidy, go fmt; install writes outside. */
static void h_go(bw_cmd *k)
{
	const char *sub = k->n_pos > 0 && k->pos[0]->lit ? k->pos[0]->lit : NULL;
	if (!sub)
		return;
	set_label(k, "go", sub);
	if (streq(sub, "build")) {
		if (!tw_opt(k, 'o', NULL, PW_OP_CREATE, false, false))
			tw_lit(k, ".", PW_OP_CREATE, true, false);
	} else if (streq(sub, "install") || streq(sub, "get")) {
		outside(k, "$GOPATH", "installs outside the project");
		if (streq(sub, "get")) {
			tw_lit(k, "go.mod", PW_OP_OPEN_WRITE, false, false);
			tw_lit(k, "go.sum", PW_OP_OPEN_WRITE, false, false);
		}
	} else if (streq(sub, "mod")) {
		const char *m = k->n_pos > 1 && k->pos[1]->lit ? k->pos[1]->lit : "";
		if (streq(m, "tidy") || streq(m, "edit") || streq(m, "init")) {
			tw_lit(k, "go.mod", PW_OP_OPEN_WRITE, false, false);
			tw_lit(k, "go.sum", PW_OP_OPEN_WRITE, false, false);
		} else if (streq(m, "vendor")) {
			tw_lit(k, "vendor", PW_OP_CREATE, true, true);
		} else if (!streq(m, "graph") && !streq(m, "verify") && !streq(m, "why")) {
			unknown(k, "a go mod subcommand the analysis does not know");
		}
	} else if (streq(sub, "fmt")) {
		tw_lit(k, ".", PW_OP_OPEN_WRITE, true, true);
	} else if (streq(sub, "vet") || streq(sub, "version") || streq(sub, "env") ||
		   streq(sub, "list") || streq(sub, "doc") || streq(sub, "help")) {
		/* nothing in the project */
	} else if (streq(sub, "test")) {
		unknown(k, "runs tests the analysis does not follow");
	} else {
		unknown(k, "a go subcommand the analysis does not know");
	}
}

/* pip install: site-packages (outside), or --target DIR. */
static void h_pip_args(bw_cmd *k, size_t sub_i)
{
	const char *sub = sub_i < k->n_pos && k->pos[sub_i]->lit ? k->pos[sub_i]->lit : NULL;
	if (!sub)
		return;
	set_label(k, "pip", sub);
	if (streq(sub, "install") || streq(sub, "uninstall") || streq(sub, "download") ||
	    streq(sub, "wheel")) {
		if (tw_opt(k, 't', "target", PW_OP_CREATE, true, true) ||
		    tw_opt(k, 'd', "dest", PW_OP_CREATE, true, true) ||
		    tw_opt(k, 'w', "wheel-dir", PW_OP_CREATE, true, true))
			return;
		outside(k, "(site-packages)", "installs into the Python environment");
		return;
	}
	if (streq(sub, "list") || streq(sub, "show") || streq(sub, "freeze") ||
	    streq(sub, "check") || streq(sub, "help") || streq(sub, "search"))
		return;
	unknown(k, "a pip subcommand the analysis does not know");
}

static void h_pip(bw_cmd *k)
{
	h_pip_args(k, 0);
}

/* python: -m pip / -m venv DIR are understood; anything else runs code. */
static void h_python(bw_cmd *k)
{
	bw_word tmp = {0};
	const bw_word *m = opt_word(k, opt_get(k, 'm', NULL), &tmp);
	if (opt_has(k, 'V', "version") && !m && k->n_pos == 0)
		goto out;
	if (m && m->lit && streq(m->lit, "pip")) {
		h_pip_args(k, 0);
	} else if (m && m->lit && streq(m->lit, "venv") && k->n_pos > 0) {
		set_label(k, "python -m", "venv");
		tw(k, k->pos[k->n_pos - 1], PW_OP_MKDIR, true, true);
	} else if (m && m->lit && (streq(m->lit, "json.tool") || streq(m->lit, "py_compile"))) {
		/* harmless modules */
	} else {
		unknown(k, "runs Python code the analysis does not follow");
	}
out:
	bw_word_done(&tmp);
}

/* npm/pnpm/yarn/bun: installs write node_modules, package.json and the lock file; scripts
 * are unknown. */
static void h_node_pkg(bw_cmd *k)
{
	const char *tool = k->w->name;
	const char *sub = k->n_pos > 0 && k->pos[0]->lit ? k->pos[0]->lit : NULL;
	static const char *const writes[] = {"install", "i",	     "ci",     "add",	 "remove",
					     "rm",	"uninstall", "un",     "update", "up",
					     "upgrade", "prune",     "dedupe", "link",	 "unlink",
					     "init",	NULL};
	static const char *const reads[] = {"ls",	 "list", "view",   "info",   "outdated",
					    "why",	 "help", "whoami", "search", "explain",
					    "--version", "-v",	 NULL};
	if (!sub && streq(tool, "yarn"))
		sub = "install";
	if (!sub)
		return;
	set_label(k, tool, sub);
	for (size_t i = 0; reads[i]; i++)
		if (streq(sub, reads[i]))
			return;
	bool w = false;
	for (size_t i = 0; writes[i]; i++)
		w |= streq(sub, writes[i]);
	if (!w) {
		unknown(k, "runs package scripts the analysis does not follow");
		return;
	}
	if (opt_has(k, 'g', "global")) {
		outside(k, "(global node_modules)", "installs outside the project");
		return;
	}
	const char *lock = streq(tool, "pnpm")	 ? "pnpm-lock.yaml"
			   : streq(tool, "yarn") ? "yarn.lock"
			   : streq(tool, "bun")	 ? "bun.lockb"
						 : "package-lock.json";
	tw_lit(k, "node_modules", PW_OP_CREATE, true, true);
	tw_lit(k, "package.json", PW_OP_OPEN_WRITE, false, false);
	tw_lit(k, lock, PW_OP_OPEN_WRITE, false, false);
}

/* awk: read-only unless the program can write (>, |, system) or -i inplace. */
static void h_awk(bw_cmd *k)
{
	bw_word tmp = {0};
	const bw_word *inc = opt_word(k, opt_get(k, 'i', "include"), &tmp);
	bool inplace = inc && inc->lit && streq(inc->lit, "inplace");
	bw_word_done(&tmp);
	if (opt_has(k, 'f', "file")) {
		unknown(k, "runs an awk program file the analysis does not read");
		return;
	}
	if (k->n_pos == 0)
		return;
	const bw_word *prog = k->pos[0];
	if (!prog->lit || prog->unknown || strpbrk(prog->lit, ">|") ||
	    strstr(prog->lit, "system")) {
		unknown(k, "the awk program may write files or run commands");
		return;
	}
	for (size_t i = 1; i < k->n_pos; i++) {
		if (inplace)
			tw(k, k->pos[i], PW_OP_OPEN_WRITE, false, false);
		else
			tr(k, k->pos[i]);
	}
}

/* yq -i / formatters that rewrite files in place given a flag (clang-format -i, gofmt -w,
 * prettier --write, eslint --fix) or always (rustfmt, black). */
static void h_inplace(bw_cmd *k)
{
	const char *n = k->w->name;
	bool w = streq(n, "rustfmt") || streq(n, "black") ||
		 (streq(n, "clang-format") && opt_has(k, 'i', NULL)) ||
		 (streq(n, "yq") && opt_has(k, 'i', "inplace")) ||
		 (streq(n, "gofmt") && opt_has(k, 'w', NULL)) ||
		 (streq(n, "prettier") && (opt_has(k, 'w', "write"))) ||
		 (streq(n, "eslint") && opt_has(k, 0, "fix"));
	if (streq(n, "black") && (opt_has(k, 0, "check") || opt_has(k, 0, "diff")))
		w = false;
	if (streq(n, "rustfmt") && opt_has(k, 0, "check"))
		w = false;
	size_t first = streq(n, "yq") ? 1 : 0;
	for (size_t i = first; i < k->n_pos; i++) {
		if (w)
			tw(k, k->pos[i], PW_OP_OPEN_WRITE, word_is_dir(k, k->pos[i]),
			   word_is_dir(k, k->pos[i]));
		else
			tr(k, k->pos[i]);
	}
}

/* source FILE / . FILE: runs the file's commands in this shell. */
static void h_source(bw_cmd *k)
{
	if (k->n_pos > 0)
		tr(k, k->pos[0]);
	unknown(k, "runs a script the analysis does not read");
}

/* time -o FILE (GNU time) then the command. */
/* ---------- git ---------- */

/* The repository root: the nearest directory from the cwd up holding .git; the project root
 * when none is found or the tree cannot be read. Returns false when the cwd is not known. */
static bool git_root_walk(bw_ctx *c, char out[PW_PATH_MAX]);

static bool git_root(bw_ctx *c, char out[PW_PATH_MAX], bool *ret_found)
{
	if (c->st->cwd_state != BW_CWD_KNOWN)
		return false;
	if (c->git_memo_cwd && streq(c->git_memo_cwd, c->st->cwd)) {
		snprintf(out, PW_PATH_MAX, "%s", c->git_memo_root);
		*ret_found = c->git_memo_found;
		return true;
	}
	bool found = git_root_walk(c, out);
	*ret_found = found;
	free(c->git_memo_cwd);
	free(c->git_memo_root);
	c->git_memo_cwd = strdup(c->st->cwd);
	c->git_memo_root = strdup(out);
	if (!c->git_memo_cwd || !c->git_memo_root) {
		free(c->git_memo_cwd);
		free(c->git_memo_root);
		c->git_memo_cwd = c->git_memo_root = NULL;
	}
	c->git_memo_found = found;
	return true;
}

/* Walks up from the cwd probing for .git; OUT gets the root ("" when none). */
static bool git_root_walk(bw_ctx *c, char out[PW_PATH_MAX])
{
	snprintf(out, PW_PATH_MAX, "%s", c->st->cwd);
	for (;;) {
		char probe[PW_PATH_MAX + 8];
		snprintf(probe, sizeof(probe), "%s%s.git", out, out[0] ? "/" : "");
		if (bw_exists(c, probe))
			return true;
		if (!out[0])
			break;
		char *slash = strrchr(out, '/');
		if (slash)
			*slash = '\0';
		else
			out[0] = '\0';
	}
	out[0] = '\0';
	return false;
}

enum { GIT_DIR = 1, GIT_TREE = 2 };

static void git_targets(bw_cmd *k, int which, const char *sub_file)
{
	char root[PW_PATH_MAX], p[PW_PATH_MAX + 32];
	bool found;
	if (!git_root(k->c, root, &found)) {
		if (which & GIT_DIR)
			tw_lit(k, ".git", PW_OP_WRITE, true, true);
		if (which & GIT_TREE)
			tw_lit(k, ".", PW_OP_WRITE, true, true);
		return;
	}
	if (!found && k->c->opts->root_fd >= 0 && (which & GIT_DIR)) {
		outside(k, ".git", "the repository is not inside the project (no .git found)");
		which &= ~GIT_DIR;
	}
	if (which & GIT_DIR) {
		snprintf(p, sizeof(p), "%s%s.git%s%s", root, root[0] ? "/" : "",
			 sub_file ? "/" : "", sub_file ? sub_file : "");
		bw_add(k->c, k->label, PW_BASH_WRITE, PW_OP_WRITE, PW_BASH_KIND_PATH, p,
		       PW_BASH_ALLOWED, !sub_file, !sub_file, NULL);
	}
	if (which & GIT_TREE)
		bw_add(k->c, k->label, PW_BASH_WRITE, PW_OP_WRITE, PW_BASH_KIND_PATH, root,
		       PW_BASH_ALLOWED, true, true, "the work tree");
}

static const bw_writer git_sub_spec = {
    .name = "git",
    .arg_short = "bBcCmoOsSjuFXt",
    .arg_long = "|branch|origin|depth|reference|template|separate-git-dir|initial-branch|"
		"source|config|upload-pack|message|file|author|date|jobs|output|format|"
		"pathspec-from-file|strategy|strategy-option|onto|",
};

/* ---------- git subcommands: one table (git_subs[] below), one row per subcommand ---------- */

typedef struct git_sub git_sub;
struct git_sub {
	const char *name;
	void (*fn)(bw_cmd *k, const git_sub *g); /* K: argv[0] is the subcommand, options scanned */
	int which;				 /* g_targets: GIT_DIR and/or GIT_TREE */
};

/* Writes nothing. */
static void g_none(bw_cmd *k, const git_sub *g)
{
}

/* Writes the repository (GIT_DIR) and/or the work tree (GIT_TREE), as the row says. */
static void g_targets(bw_cmd *k, const git_sub *g)
{
	git_targets(k, g->which, NULL);
}

/* branch/tag: writes refs only when it makes, moves, copies or deletes one. */
static void g_branch(bw_cmd *k, const git_sub *g)
{
	bool change = k->n_pos > 0 || opt_has(k, 'd', "delete") || opt_has(k, 'D', NULL) ||
		      opt_has(k, 'm', "move") || opt_has(k, 'M', NULL) || opt_has(k, 'c', "copy") ||
		      opt_has(k, 'C', NULL) || opt_has(k, 'f', "force") ||
		      opt_has(k, 'u', "set-upstream-to") || opt_has(k, 'a', "annotate") ||
		      opt_has(k, 's', "sign");
	if (opt_has(k, 'l', "list") || opt_has(k, 0, "contains") || !change)
		return;
	git_targets(k, GIT_DIR, NULL);
}

static const char *git_action(const bw_cmd *k)
{
	return k->n_pos > 0 && k->pos[0]->lit ? k->pos[0]->lit : "";
}

static void g_remote(bw_cmd *k, const git_sub *g)
{
	const char *a = git_action(k);
	if (!a[0] || streq(a, "show") || streq(a, "get-url"))
		return;
	git_targets(k, GIT_DIR, "config");
}

static void g_stash(bw_cmd *k, const git_sub *g)
{
	const char *a = git_action(k);
	if (streq(a, "list") || streq(a, "show"))
		return;
	git_targets(k, GIT_DIR | GIT_TREE, NULL);
}

static void g_config(bw_cmd *k, const git_sub *g)
{
	if (opt_has(k, 0, "global") || opt_has(k, 0, "system")) {
		outside(k, "~/.gitconfig", "git's global configuration");
		return;
	}
	if (opt_has(k, 0, "get") || opt_has(k, 0, "get-all") || opt_has(k, 'l', "list") ||
	    opt_has(k, 0, "get-regexp") || k->n_pos <= 1)
		return;
	git_targets(k, GIT_DIR, "config");
}

static void g_rm_mv(bw_cmd *k, const git_sub *g)
{
	if (!opt_has(k, 0, "cached") && !opt_has(k, 'n', "dry-run")) {
		bool rm = streq(g->name, "rm");
		bool rec = opt_has(k, 'r', NULL);
		for (size_t i = 0; i < k->n_pos; i++)
			tw(k, k->pos[i], rm ? PW_OP_UNLINK : PW_OP_RENAME,
			   rec && word_is_dir(k, k->pos[i]), rec);
	}
	git_targets(k, GIT_DIR, NULL);
}

/* git restore PATHS / git checkout [REV] -- PATHS: only those paths. */
static void g_restore(bw_cmd *k, const git_sub *g)
{
	size_t first = 0;
	bool paths = streq(g->name, "restore") && k->n_pos > 0;
	for (size_t i = 1; i < k->argc; i++)
		if (k->argv[i].lit && streq(k->argv[i].lit, "--")) {
			paths = true;
			for (first = 0; first < k->n_pos && k->pos[first] <= &k->argv[i];)
				first++;
		}
	if (paths && !opt_has(k, 'S', "staged")) {
		for (size_t i = first; i < k->n_pos; i++)
			tw(k, k->pos[i], PW_OP_OPEN_WRITE, word_is_dir(k, k->pos[i]),
			   word_is_dir(k, k->pos[i]));
		return;
	}
	git_targets(k, (paths ? 0 : GIT_TREE) | GIT_DIR, NULL);
}

static void g_reset(bw_cmd *k, const git_sub *g)
{
	bool tree = opt_has(k, 0, "hard") || opt_has(k, 0, "merge") || opt_has(k, 0, "keep");
	git_targets(k, GIT_DIR | (tree ? GIT_TREE : 0), NULL);
}

static void g_clean(bw_cmd *k, const git_sub *g)
{
	if (opt_has(k, 'n', "dry-run"))
		return;
	if (k->n_pos == 0) {
		git_targets(k, GIT_TREE, NULL);
		return;
	}
	for (size_t i = 0; i < k->n_pos; i++)
		tw(k, k->pos[i], PW_OP_UNLINK, true, true);
}

static void g_apply(bw_cmd *k, const git_sub *g)
{
	if (opt_has(k, 0, "check") || opt_has(k, 0, "stat") || opt_has(k, 0, "numstat"))
		return;
	git_targets(k,
		    opt_has(k, 0, "cached")  ? GIT_DIR
		    : opt_has(k, 0, "index") ? GIT_DIR | GIT_TREE
					     : GIT_TREE,
		    NULL);
}

/* clone URL [DIR]: DIR, or the URL's last component without ".git". */
static void g_clone(bw_cmd *k, const git_sub *g)
{
	if (k->n_pos >= 2) {
		tw(k, k->pos[1], PW_OP_MKDIR, true, true);
		return;
	}
	if (k->n_pos == 0)
		return;
	if (!k->pos[0]->lit || k->pos[0]->unknown) {
		unknown(k, "a clone destination the analysis cannot tell");
		return;
	}
	_cleanup_free_ char *u = strdup(k->pos[0]->lit);
	if (!u)
		return;
	size_t n = strlen(u);
	while (n > 0 && u[n - 1] == '/')
		u[--n] = '\0';
	if (n > 4 && streq(u + n - 4, ".git"))
		u[n - 4] = '\0';
	char *b = strrchr(u, '/');
	char *colon = strrchr(u, ':');
	b = b ? b + 1 : colon ? colon + 1 : u;
	if (b[0] && !streq(b, "..") && !streq(b, "."))
		tw_lit(k, b, PW_OP_MKDIR, true, true);
	else
		unknown(k, "a clone destination the analysis cannot tell");
}

static void g_init(bw_cmd *k, const git_sub *g)
{
	if (k->n_pos > 0)
		tw(k, k->pos[0], PW_OP_MKDIR, true, true);
	else
		tw_lit(k, ".git", PW_OP_MKDIR, true, true);
}

static void g_worktree(bw_cmd *k, const git_sub *g)
{
	const char *a = git_action(k);
	if (streq(a, "list"))
		return;
	if (streq(a, "add") && k->n_pos > 1)
		tw(k, k->pos[1], PW_OP_MKDIR, true, true);
	git_targets(k, GIT_DIR, NULL);
}

static void g_archive(bw_cmd *k, const git_sub *g)
{
	tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
}

static void g_format_patch(bw_cmd *k, const git_sub *g)
{
	if (!opt_has(k, 0, "stdout") &&
	    !tw_opt(k, 'o', "output-directory", PW_OP_CREATE, true, true))
		tw_lit(k, ".", PW_OP_CREATE, true, true);
}

#define GRO(n)                                                                                     \
	{                                                                                          \
		.name = n, .fn = g_none                                                            \
	}
#define GW(n, w)                                                                                   \
	{                                                                                          \
		.name = n, .fn = g_targets, .which = w                                             \
	}
#define GFN(n, f)                                                                                  \
	{                                                                                          \
		.name = n, .fn = f                                                                 \
	}

/* A subcommand that is not here is unknown. */
static const git_sub git_subs[] = {
    /* Read-only. */
    GRO("status"),
    GRO("log"),
    GRO("diff"),
    GRO("show"),
    GRO("grep"),
    GRO("blame"),
    GRO("rev-parse"),
    GRO("ls-files"),
    GRO("ls-tree"),
    GRO("ls-remote"),
    GRO("describe"),
    GRO("shortlog"),
    GRO("cat-file"),
    GRO("rev-list"),
    GRO("whatchanged"),
    GRO("help"),
    GRO("version"),
    GRO("show-ref"),
    GRO("for-each-ref"),
    GRO("name-rev"),
    GRO("merge-base"),
    GRO("check-ignore"),
    GRO("var"),
    GRO("count-objects"),
    GRO("cherry"),
    GRO("range-diff"),
    GRO("diff-tree"),
    GRO("diff-files"),
    GRO("diff-index"),
    GRO("verify-commit"),
    GRO("verify-tag"),
    GRO("fsck"),

    /* The repository only. */
    GW("add", GIT_DIR),
    GW("commit", GIT_DIR),
    GW("fetch", GIT_DIR),
    GW("gc", GIT_DIR),
    GW("notes", GIT_DIR),
    GW("prune", GIT_DIR),
    GW("repack", GIT_DIR),
    GW("update-index", GIT_DIR),
    GW("reflog", GIT_DIR),
    GW("commit-tree", GIT_DIR),
    GW("update-ref", GIT_DIR),
    GW("symbolic-ref", GIT_DIR),
    GW("pack-refs", GIT_DIR),
    GW("maintenance", GIT_DIR),

    /* The repository and the work tree. */
    GW("switch", GIT_DIR | GIT_TREE),
    GW("merge", GIT_DIR | GIT_TREE),
    GW("rebase", GIT_DIR | GIT_TREE),
    GW("pull", GIT_DIR | GIT_TREE),
    GW("am", GIT_DIR | GIT_TREE),
    GW("cherry-pick", GIT_DIR | GIT_TREE),
    GW("revert", GIT_DIR | GIT_TREE),
    GW("bisect", GIT_DIR | GIT_TREE),
    GW("submodule", GIT_DIR | GIT_TREE),
    GW("sparse-checkout", GIT_DIR | GIT_TREE),
    GW("read-tree", GIT_DIR | GIT_TREE),
    GW("checkout-index", GIT_DIR | GIT_TREE),

    /* Depends on the arguments. */
    GFN("branch", g_branch),
    GFN("tag", g_branch),
    GFN("remote", g_remote),
    GFN("stash", g_stash),
    GFN("config", g_config),
    GFN("rm", g_rm_mv),
    GFN("mv", g_rm_mv),
    GFN("restore", g_restore),
    GFN("checkout", g_restore),
    GFN("reset", g_reset),
    GFN("clean", g_clean),
    GFN("apply", g_apply),
    GFN("clone", g_clone),
    GFN("init", g_init),
    GFN("worktree", g_worktree),
    GFN("archive", g_archive),
    GFN("format-patch", g_format_patch),
};

#undef GRO
#undef GW
#undef GFN

static void git_sub_dispatch(bw_cmd *k, const char *sub)
{
	for (size_t i = 0; i < ELEMENTSOF(git_subs); i++)
		if (streq(git_subs[i].name, sub)) {
			git_subs[i].fn(k, &git_subs[i]);
			return;
		}
	unknown(k, "a git subcommand the analysis does not know");
}

static void h_git(bw_cmd *k)
{
	size_t i = 1;
	const bw_word *dir = NULL;
	for (; i < k->argc; i++) {
		const char *s = k->argv[i].lit;
		if (!s || k->argv[i].unknown) {
			unknown(k, "a git argument the analysis cannot resolve");
			return;
		}
		if (s[0] != '-')
			break;
		if (streq(s, "--version") || streq(s, "--help") || streq(s, "--exec-path"))
			return;
		if ((streq(s, "-C") || streq(s, "-c")) && i + 1 < k->argc) {
			if (s[1] == 'C')
				dir = &k->argv[i + 1];
			i++;
		} else if (startswith(s, "--git-dir") || startswith(s, "--work-tree")) {
			unknown(k, "git with an explicit --git-dir/--work-tree");
			return;
		}
	}
	if (i >= k->argc)
		return;
	const char *sub = k->argv[i].lit;
	bw_cmd s = {.c = k->c,
		    .argv = &k->argv[i],
		    .argc = k->argc - i,
		    .depth = k->depth,
		    .w = &git_sub_spec};
	set_label(&s, "git", sub);
	scan(&s, &git_sub_spec, 1, false);

	bw_state *saved = k->c->st, *copy = NULL;
	if (dir) {
		copy = bw_state_copy(saved);
		if (!copy) {
			k->c->res->oom = true;
			goto out;
		}
		k->c->st = copy;
		bw_cd(k->c, dir);
	}
	git_sub_dispatch(&s, sub);
	k->c->st = saved;
	bw_state_free(copy);
out:
	free(s.pos);
	free(s.opts);
}

/* ---------- wrappers: commands that run a command ---------- */

static void run_inner(bw_cmd *k, size_t idx)
{
	if (idx < k->argc)
		bw_dispatch(k->c, &k->argv[idx], k->argc - idx, k->depth + 1);
}

/* nohup, nice, timeout, stdbuf, ionice, chrt, taskset, command, exec, builtin, time, ...:
 * options, then W->note-free positional skips (timeout's DURATION), then the command. */
static void h_wrap(bw_cmd *k)
{
	const char *n = k->w->name;
	size_t idx = scan(k, k->w, 1, true);
	size_t skip = streq(n, "timeout") || streq(n, "chrt") || streq(n, "taskset") ? 1 : 0;

	if ((streq(n, "command") || streq(n, "type")) &&
	    (opt_has(k, 'v', NULL) || opt_has(k, 'V', NULL)))
		return;
	if (streq(n, "time"))
		tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
	if (streq(n, "ionice") && opt_has(k, 'p', NULL))
		return;
	if (streq(n, "taskset") && opt_has(k, 'p', "pid"))
		return;
	if (streq(n, "sudo") || streq(n, "doas")) {
		if (opt_has(k, 'e', "edit")) {
			for (size_t i = idx; i < k->argc; i++)
				tw(k, &k->argv[i], PW_OP_OPEN_WRITE, false, false);
			return;
		}
		if (idx >= k->argc && (opt_has(k, 'i', "login") || opt_has(k, 's', "shell"))) {
			unknown(k, "opens an interactive shell");
			return;
		}
	}
	if (streq(n, "env")) {
		if (opt_has(k, 'S', "split-string")) {
			unknown(k, "env -S splits a string the analysis does not follow");
			return;
		}
		while (idx < k->argc && k->argv[idx].lit && strchr(k->argv[idx].lit, '=') &&
		       k->argv[idx].lit[0] != '=')
			idx++;
	}
	idx += skip;
	if (idx >= k->argc)
		return;
	bw_word tmp = {0};
	const bw_word *dir = streq(n, "env") ? opt_word(k, opt_get(k, 'C', "chdir"), &tmp) : NULL;
	if (dir) {
		bw_state *saved = k->c->st, *copy = bw_state_copy(saved);
		if (copy) {
			k->c->st = copy;
			bw_cd(k->c, dir);
			run_inner(k, idx);
			k->c->st = saved;
			bw_state_free(copy);
		}
	} else {
		run_inner(k, idx);
	}
	bw_word_done(&tmp);
}

/* flock [opts] FILE COMMAND / flock [opts] FILE -c STRING: the lock file is created. */
static void h_flock(bw_cmd *k)
{
	size_t idx = scan(k, k->w, 1, true);
	if (idx >= k->argc)
		return;
	const bw_word *file = &k->argv[idx];
	if (file->lit && strspn(file->lit, "0123456789") == strlen(file->lit))
		return; /* a descriptor */
	tw(k, file, PW_OP_CREATE, false, false);
	bw_word tmp = {0};
	const bw_word *cmd = opt_word(k, opt_get(k, 'c', "command"), &tmp);
	if (cmd) {
		if (cmd->unknown || !cmd->lit)
			unknown(k, "runs a command string the analysis cannot resolve");
		else
			k->c->analyze_string(k->c, cmd->lit, strlen(cmd->lit), k->depth + 1,
					     "flock -c");
	} else {
		run_inner(k, idx + 1);
	}
	bw_word_done(&tmp);
}

/* xargs [opts] CMD ARGS: CMD runs with arguments read from its input (unknown). */
static void h_xargs(bw_cmd *k)
{
	size_t idx = scan(k, k->w, 1, true);
	bw_word tmp = {0};
	const bw_word *rep = opt_word(k, opt_get(k, 'I', "replace"), &tmp);
	const char *r = rep && rep->lit ? rep->lit : opt_has(k, 'i', "replace") ? "{}" : NULL;
	bw_word tmp2 = {0};
	const bw_word *af = opt_word(k, opt_get(k, 'a', "arg-file"), &tmp2);
	if (af)
		tr(k, af);
	bw_word_done(&tmp2);
	if (idx >= k->argc) {
		bw_word_done(&tmp);
		return; /* echo */
	}
	size_t n = k->argc - idx;
	bw_word *v = calloc(n + 1, sizeof(*v));
	if (!v) {
		k->c->res->oom = true;
		bw_word_done(&tmp);
		return;
	}
	static const char why[] = "an argument xargs reads from its input";
	for (size_t i = 0; i < n; i++) {
		v[i] = k->argv[idx + i];
		if (r && r[0] && v[i].lit && strstr(v[i].lit, r) && i > 0)
			v[i] =
			    (bw_word){.unknown = true, .raw = (char *)"(xargs input)", .why = why};
	}
	if (!r)
		v[n++] = (bw_word){.unknown = true, .raw = (char *)"(xargs input)", .why = why};
	bw_dispatch(k->c, v, n, k->depth + 1);
	free(v); /* the words are borrowed */
	bw_word_done(&tmp);
}

/* find PATHS EXPR: -delete, -exec/-execdir/-ok CMD {} ;, -fprint FILE. */
static void h_find(bw_cmd *k)
{
	size_t i = 1;
	while (i < k->argc && k->argv[i].lit &&
	       (streq(k->argv[i].lit, "-H") || streq(k->argv[i].lit, "-L") ||
		streq(k->argv[i].lit, "-P") || startswith(k->argv[i].lit, "-O")))
		i++;
	if (i < k->argc && k->argv[i].lit && streq(k->argv[i].lit, "-D"))
		i += 2;
	size_t p0 = i;
	while (i < k->argc &&
	       !(k->argv[i].lit && (k->argv[i].lit[0] == '-' || streq(k->argv[i].lit, "(") ||
				    streq(k->argv[i].lit, "!"))))
		i++;
	size_t p1 = i;
	bw_word dot;
	if (bw_word_literal(&dot, ".", NULL) < 0) {
		k->c->res->oom = true;
		return;
	}
	bw_word *starts = p1 > p0 ? &k->argv[p0] : &dot;
	size_t n_starts = p1 > p0 ? p1 - p0 : 1;

	for (; i < k->argc; i++) {
		const char *s = k->argv[i].lit;
		if (!s)
			continue;
		if (streq(s, "-delete")) {
			set_label(k, "find", "-delete");
			for (size_t j = 0; j < n_starts; j++)
				tw(k, &starts[j], PW_OP_UNLINK, true, true);
		} else if ((streq(s, "-fprint") || streq(s, "-fprint0") || streq(s, "-fls") ||
			    streq(s, "-fprintf")) &&
			   i + 1 < k->argc) {
			set_label(k, "find", s);
			tw(k, &k->argv[++i], PW_OP_OPEN_WRITE, false, false);
		} else if (streq(s, "-exec") || streq(s, "-execdir") || streq(s, "-ok") ||
			   streq(s, "-okdir")) {
			size_t b = i + 1, e = b;
			while (e < k->argc && !(k->argv[e].lit && (streq(k->argv[e].lit, ";") ||
								   streq(k->argv[e].lit, "+"))))
				e++;
			for (size_t j = 0; j < n_starts && j < 8 && e > b; j++) {
				bw_word *v = calloc(e - b, sizeof(*v));
				if (!v)
					break;
				for (size_t m = 0; m < e - b; m++) {
					v[m] = k->argv[b + m];
					if (m > 0 && v[m].lit && strstr(v[m].lit, "{}")) {
						v[m] = starts[j];
						v[m].under = true;
					}
				}
				bw_dispatch(k->c, v, e - b, k->depth + 1);
				free(v);
			}
			i = e;
		}
	}
	bw_word_done(&dot);
}

/* sh/bash -c 'STRING': analyzed recursively. A script file or stdin: unknown. */
static void h_shell(bw_cmd *k)
{
	bool c_flag = false;
	size_t i = 1;
	for (; i < k->argc; i++) {
		const char *s = k->argv[i].lit;
		if (!s || k->argv[i].unknown || s[0] != '-' || streq(s, "-") || streq(s, "--"))
			break;
		if (s[1] != '-' && strchr(s, 'c'))
			c_flag = true;
		if ((streq(s, "-o") || streq(s, "-O") || streq(s, "+O") || streq(s, "+o") ||
		     streq(s, "--rcfile") || streq(s, "--init-file")) &&
		    i + 1 < k->argc)
			i++;
	}
	if (i < k->argc && k->argv[i].lit && streq(k->argv[i].lit, "--"))
		i++;
	if (!c_flag) {
		unknown(k, i < k->argc ? "runs a script the analysis does not read"
				       : "runs commands read from its input");
		return;
	}
	if (i >= k->argc)
		return;
	const bw_word *w = &k->argv[i];
	if (w->unknown || !w->lit) {
		unknown(k, "runs a command string the analysis cannot resolve");
		return;
	}
	char label[64];
	snprintf(label, sizeof(label), "%s -c", k->w->name);
	k->c->analyze_string(k->c, w->lit, strlen(w->lit), k->depth + 1, label);
}

/* ---------- the table ---------- */

#define RO(n)                                                                                      \
	{                                                                                          \
		.name = n, .fn = h_none                                                            \
	}
#define ALL(n, o, s, l)                                                                            \
	{                                                                                          \
		.name = n, .fn = h_all, .op = o, .arg_short = s, .arg_long = l                     \
	}
#define WRAP(n, s, l)                                                                              \
	{                                                                                          \
		.name = n, .fn = h_wrap, .arg_short = s, .arg_long = l                             \
	}
#define RUNS(n, why)                                                                               \
	{                                                                                          \
		.name = n, .fn = h_unknown, .note = why                                            \
	}

/* Sorted by nothing in particular; lookup is linear over ~200 rows, once per command. */
static const bw_writer writers[] = {
    /* Read-only: write nothing in the project. */
    RO("cat"),
    RO("ls"),
    RO("grep"),
    RO("egrep"),
    RO("fgrep"),
    RO("rg"),
    RO("ag"),
    RO("ack"),
    RO("head"),
    RO("tail"),
    RO("wc"),
    RO("echo"),
    RO("printf"),
    RO("test"),
    RO("["),
    RO("[["),
    RO("true"),
    RO("false"),
    RO(":"),
    RO("pwd"),
    RO("which"),
    RO("whereis"),
    RO("type"),
    RO("hash"),
    RO("diff"),
    RO("cmp"),
    RO("comm"),
    RO("stat"),
    RO("file"),
    RO("less"),
    RO("more"),
    RO("tree"),
    RO("du"),
    RO("df"),
    RO("id"),
    RO("whoami"),
    RO("date"),
    RO("uname"),
    RO("hostname"),
    RO("cut"),
    RO("tr"),
    RO("basename"),
    RO("dirname"),
    RO("realpath"),
    RO("readlink"),
    RO("seq"),
    RO("sleep"),
    RO("ps"),
    RO("kill"),
    RO("export"),
    RO("set"),
    RO("unset"),
    RO("local"),
    RO("declare"),
    RO("typeset"),
    RO("readonly"),
    RO("shift"),
    RO("exit"),
    RO("return"),
    RO("break"),
    RO("continue"),
    RO("wait"),
    RO("trap"),
    RO("alias"),
    RO("unalias"),
    RO("shopt"),
    RO("umask"),
    RO("ulimit"),
    RO("jobs"),
    RO("fg"),
    RO("bg"),
    RO("disown"),
    RO("printenv"),
    RO("nproc"),
    RO("free"),
    RO("uptime"),
    RO("tput"),
    RO("clear"),
    RO("column"),
    RO("xxd"),
    RO("od"),
    RO("hexdump"),
    RO("md5sum"),
    RO("sha1sum"),
    RO("sha256sum"),
    RO("sha512sum"),
    RO("cksum"),
    RO("b2sum"),
    RO("nl"),
    RO("fold"),
    RO("rev"),
    RO("paste"),
    RO("join"),
    RO("expand"),
    RO("unexpand"),
    RO("fmt"),
    RO("tac"),
    RO("base64"),
    RO("fd"),
    RO("fdfind"),
    RO("locate"),
    RO("man"),
    RO("help"),
    RO("jq"),
    RO("bat"),
    RO("batcat"),
    RO("lsof"),
    RO("getconf"),
    RO("locale"),
    RO("zcat"),
    RO("bzcat"),
    RO("xzcat"),
    RO("zgrep"),
    RO("strings"),
    RO("nm"),
    RO("objdump"),
    RO("readelf"),
    RO("ldd"),
    RO("size"),
    RO("cloc"),
    RO("tokei"),
    RO("getent"),
    RO("groups"),
    RO("history"),
    RO("dirs"),
    RO("let"),
    RO("caller"),
    RO("compgen"),
    RO("complete"),
    RO("yes"),
    RO("numfmt"),
    RO("tsort"),
    RO("expr"),
    RO("bc"),
    RO("factor"),
    RO("shuf"),
    RO("look"),
    RO("pgrep"),
    RO("top"),
    RO("htop"),

    /* Plain writers: every file argument. */
    ALL("rm", PW_OP_UNLINK, NULL, NULL),
    ALL("unlink", PW_OP_UNLINK, NULL, NULL),
    ALL("shred", PW_OP_OPEN_WRITE, "nsx", "|iterations|size|random-source|"),
    ALL("rmdir", PW_OP_RMDIR, NULL, NULL),
    ALL("mkdir", PW_OP_MKDIR, "m", "|mode|context|"),
    ALL("touch", PW_OP_UTIMENS, "rdt", "|reference|date|time|"),
    ALL("truncate", PW_OP_TRUNCATE, "sro", "|size|reference|io-blocks|"),
    ALL("tee", PW_OP_OPEN_WRITE, NULL, "|output-error|"),
    ALL("mkfifo", PW_OP_MKNOD, "mZ", "|mode|context|"),
    ALL("mknod", PW_OP_MKNOD, "mZ", "|mode|context|"),
    ALL("sponge", PW_OP_OPEN_WRITE, NULL, NULL),
    ALL("setfattr", PW_OP_SETXATTR, "nvx", "|name|value|remove|"),
    ALL("chattr", PW_OP_SETXATTR, "pv", NULL),
    ALL("fallocate", PW_OP_FALLOCATE, "olx", "|offset|length|"),
    {.name = "chmod", .fn = h_mode_first, .op = PW_OP_CHMOD, .arg_long = "|reference|"},
    {.name = "chown", .fn = h_mode_first, .op = PW_OP_CHOWN, .arg_long = "|from|"},
    {.name = "chgrp", .fn = h_mode_first, .op = PW_OP_CHOWN},
    {.name = "setfacl", .fn = h_mode_first, .op = PW_OP_SETXATTR, .arg_short = "mMxX"},

    /* Source and destination. */
    {.name = "cp", .fn = h_copy, .arg_short = "tS", .arg_long = "|target-directory|suffix|"},
    {.name = "mv", .fn = h_copy, .arg_short = "tS", .arg_long = "|target-directory|suffix|"},
    {.name = "install",
     .fn = h_copy,
     .arg_short = "tSmogZ",
     .arg_long = "|target-directory|suffix|mode|owner|group|strip-program|"},
    {.name = "ln", .fn = h_copy, .arg_short = "tS", .arg_long = "|target-directory|suffix|"},
    {.name = "rsync",
     .fn = h_rsync,
     .arg_short = "efTB",
     .arg_long = "|rsh|filter|exclude|include|exclude-from|include-from|temp-dir|"
		 "backup-dir|suffix|chmod|chown|"},
    {.name = "dd", .fn = h_dd},

    /* Editors of files in place. */
    {.name = "sed",
     .fn = h_sed,
     .arg_short = "efl",
     .opt_short = "i",
     .arg_long = "|expression|file|line-length|"},
    {.name = "gsed",
     .fn = h_sed,
     .arg_short = "efl",
     .opt_short = "i",
     .arg_long = "|expression|file|line-length|"},
    {.name = "perl", .fn = h_perl, .arg_short = "eEIMmx", .opt_short = "i0lCd"},
    {.name = "awk", .fn = h_awk, .arg_short = "fvFi", .arg_long = "|file|assign|include|"},
    {.name = "gawk", .fn = h_awk, .arg_short = "fvFi", .arg_long = "|file|assign|include|"},
    {.name = "mawk", .fn = h_awk, .arg_short = "fvF"},
    {.name = "yq", .fn = h_inplace, .arg_short = "o", .arg_long = "|output-format|"},
    {.name = "clang-format", .fn = h_inplace, .arg_long = "|style|assume-filename|"},
    {.name = "gofmt", .fn = h_inplace, .arg_short = "r"},
    {.name = "rustfmt", .fn = h_inplace, .arg_long = "|edition|config-path|"},
    {.name = "black", .fn = h_inplace, .arg_short = "lt", .arg_long = "|line-length|"},
    {.name = "prettier", .fn = h_inplace, .arg_long = "|config|parser|"},
    {.name = "eslint", .fn = h_inplace, .arg_short = "cf", .arg_long = "|config|format|"},

    /* Output files given by an option. */
    {.name = "sort",
     .fn = h_sort,
     .arg_short = "otkST",
     .arg_long = "|output|field-separator|key|buffer-size|temporary-directory|"},
    {.name = "uniq", .fn = h_sort, .arg_short = "fsw"},
    {.name = "split",
     .fn = h_split,
     .arg_short = "abCdlnt",
     .arg_long = "|suffix-length|bytes|line-bytes|lines|number|additional-suffix|"},
    {.name = "csplit", .fn = h_split, .arg_short = "bfn", .arg_long = "|prefix|digits|"},
    {.name = "curl",
     .fn = h_curl,
     .arg_short = "oDcdHXuAeEbFKrTwxyYzmU",
     .arg_long = "|output|dump-header|cookie-jar|data|header|request|user|user-agent|"
		 "referer|cert|form|config|range|upload-file|write-out|proxy|max-time|"
		 "output-dir|data-raw|data-binary|json|connect-timeout|cookie|"},
    {.name = "wget",
     .fn = h_wget,
     .arg_short = "OoaiBtTwQPDRAlXIUe",
     .arg_long = "|output-document|output-file|append-output|directory-prefix|tries|"
		 "timeout|user-agent|header|input-file|level|"},
    {.name = "patch",
     .fn = h_patch,
     .arg_short = "pioDdrBYzFVg",
     .arg_long = "|strip|input|output|directory|reject-file|"},

    /* Archives and compression. */
    {.name = "tar",
     .fn = h_tar,
     .arg_short = "fCTXbKNgIH",
     .arg_long = "|file|directory|files-from|exclude-from|exclude|use-compress-program|"
		 "transform|owner|group|mode|format|"},
    {.name = "bsdtar", .fn = h_tar, .arg_short = "fCTXb", .arg_long = "|file|directory|"},
    {.name = "unzip", .fn = h_unzip, .arg_short = "dxP"},
    {.name = "zip", .fn = h_zip, .arg_short = "xitn"},
    {.name = "gzip", .fn = h_compress, .arg_short = "S", .arg_long = "|suffix|"},
    {.name = "gunzip", .fn = h_compress, .arg_short = "S", .arg_long = "|suffix|"},
    {.name = "bzip2", .fn = h_compress},
    {.name = "bunzip2", .fn = h_compress},
    {.name = "xz", .fn = h_compress, .arg_short = "FCT"},
    {.name = "unxz", .fn = h_compress},
    {.name = "zstd", .fn = h_compress, .arg_short = "oD"},
    {.name = "unzstd", .fn = h_compress, .arg_short = "oD"},
    {.name = "lz4", .fn = h_compress},

    /* Version control, packages and builds. */
    {.name = "git", .fn = h_git},
    {.name = "npm", .fn = h_node_pkg, .arg_long = "|prefix|registry|workspace|"},
    {.name = "pnpm", .fn = h_node_pkg, .arg_short = "C", .arg_long = "|dir|filter|"},
    {.name = "yarn", .fn = h_node_pkg, .arg_long = "|cwd|"},
    {.name = "bun", .fn = h_node_pkg, .arg_long = "|cwd|"},
    {.name = "make", .fn = h_make, .arg_short = "CfIjlo", .arg_long = "|directory|file|"},
    {.name = "gmake", .fn = h_make, .arg_short = "CfIjlo", .arg_long = "|directory|file|"},
    {.name = "ninja", .fn = h_make, .arg_short = "Cfjkldt"},
    {.name = "cmake",
     .fn = h_cmake,
     .arg_short = "BSGDTAUC",
     .arg_long = "|build|target|config|parallel|preset|"},
    {.name = "cargo",
     .fn = h_cargo,
     .arg_short = "pjFZ",
     .arg_long = "|target-dir|manifest-path|package|jobs|features|target|bin|example|"
		 "test|bench|profile|color|config|"},
    {.name = "go", .fn = h_go, .arg_short = "o", .arg_long = "|ldflags|gcflags|tags|"},
    {.name = "pip",
     .fn = h_pip,
     .arg_short = "trcedw",
     .arg_long = "|target|requirement|constraint|editable|dest|wheel-dir|index-url|"},
    {.name = "pip3",
     .fn = h_pip,
     .arg_short = "trcedw",
     .arg_long = "|target|requirement|constraint|editable|dest|wheel-dir|index-url|"},
    {.name = "python",
     .fn = h_python,
     .arg_short = "mcWXtrdw",
     .arg_long = "|target|requirement|dest|wheel-dir|"},
    {.name = "python3",
     .fn = h_python,
     .arg_short = "mcWXtrdw",
     .arg_long = "|target|requirement|dest|wheel-dir|"},

    /* Wrappers: run the command that follows. */
    WRAP("env", "uCS", "|unset|chdir|split-string|"),
    WRAP("sudo", "ugCDhprtUT", "|user|group|prompt|chdir|host|"),
    WRAP("doas", "uC", NULL),
    WRAP("nice", "n", "|adjustment|"),
    WRAP("nohup", NULL, NULL),
    WRAP("timeout", "sk", "|signal|kill-after|"),
    WRAP("stdbuf", "ioe", "|input|output|error|"),
    WRAP("ionice", "cnpPu", "|class|classdata|pid|pgid|uid|"),
    WRAP("time", "of", "|output|format|"),
    WRAP("command", NULL, NULL),
    WRAP("builtin", NULL, NULL),
    WRAP("exec", "a", NULL),
    WRAP("chrt", NULL, NULL),
    WRAP("taskset", NULL, NULL),
    WRAP("setsid", NULL, NULL),
    WRAP("chronic", NULL, NULL),
    WRAP("unbuffer", NULL, NULL),
    WRAP("watch", "nd", "|interval|"),
    {.name = "flock", .fn = h_flock, .arg_short = "wEc", .arg_long = "|timeout|command|"},
    {.name = "xargs",
     .fn = h_xargs,
     .arg_short = "IaEdLnPs",
     .arg_long = "|replace|arg-file|eof|delimiter|max-lines|max-args|max-procs|max-chars|"},
    {.name = "find", .fn = h_find},
    {.name = "sh", .fn = h_shell},
    {.name = "bash", .fn = h_shell},
    {.name = "dash", .fn = h_shell},
    {.name = "zsh", .fn = h_shell},
    {.name = "ksh", .fn = h_shell},
    {.name = "source", .fn = h_source},
    {.name = ".", .fn = h_source},

    /* Known, but they run code the analysis does not follow. */
    RUNS("node", "runs JavaScript the analysis does not follow"),
    RUNS("npx", "runs a package binary the analysis does not follow"),
    RUNS("ruby", "runs Ruby code the analysis does not follow"),
    RUNS("php", "runs PHP code the analysis does not follow"),
    RUNS("deno", "runs code the analysis does not follow"),
    RUNS("vim", "an editor: it may write any file"),
    RUNS("vi", "an editor: it may write any file"),
    RUNS("nvim", "an editor: it may write any file"),
    RUNS("nano", "an editor: it may write any file"),
    RUNS("emacs", "an editor: it may write any file"),
    RUNS("code", "an editor: it may write any file"),
    RUNS("parallel", "runs commands the analysis does not follow"),
    RUNS("pytest", "runs tests the analysis does not follow"),
    RUNS("meson", "a build tool the analysis does not follow"),
};

#undef RO
#undef ALL
#undef WRAP
#undef RUNS

/* Resolves a command name: the table's name, or the basename of /bin, /usr/bin,
 * /usr/local/bin or /sbin paths (a ./rm is someone's script, not rm). */
static const bw_writer *lookup(const char *name)
{
	static const char *const dirs[] = {"/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/",
					   "/usr/sbin/"};
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		if (startswith(name, dirs[i]) && !strchr(name + strlen(dirs[i]), '/')) {
			name += strlen(dirs[i]);
			break;
		}
	for (size_t i = 0; i < ELEMENTSOF(writers); i++)
		if (streq(writers[i].name, name))
			return &writers[i];
	return NULL;
}

void bw_dispatch(bw_ctx *c, bw_word *argv, size_t argc, unsigned depth)
{
	if (argc == 0 || !bw_spend(c, 1))
		return;
	if (depth > PW_BASH_DEPTH_MAX) {
		c->res->truncated = true;
		bw_add_unknown_cmd(c, "(analysis)", "nesting too deep");
		return;
	}
	if (argv[0].unknown || !argv[0].lit) {
		bw_add_unknown_cmd(c, argv[0].raw ? argv[0].raw : "?",
				   "the command name is an expansion the analysis cannot resolve");
		return;
	}
	const bw_writer *w = lookup(argv[0].lit);
	if (!w) {
		bw_add_unknown_cmd(c, argv[0].lit,
				   "unknown command: the analysis cannot tell what it writes");
		return;
	}
	bw_cmd k = {.c = c, .argv = argv, .argc = argc, .depth = depth, .w = w};
	set_label(&k, w->name, NULL);
	if (w->fn != h_wrap && w->fn != h_xargs && w->fn != h_flock && w->fn != h_git &&
	    w->fn != h_find && w->fn != h_shell && w->fn != h_dd)
		scan(&k, w, 1, false);
	w->fn(&k);
	free(k.pos);
	free(k.opts);
}

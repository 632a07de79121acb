/* SPDX-License-Identifier: MIT */
/*
 * File utilities (bash_files.h): what coreutils-like commands write. The plain writers (every
 * file argument: rm, touch, mkdir, chmod...), source and destination (cp, mv, install, ln,
 * rsync, dd), editors in place (sed -i, perl -i, awk -i inplace, formatters) and commands
 * whose output file is an option or an argument (sort -o, uniq, split, curl, wget, patch).
 */
#include <errno.h>
#include <string.h>

#include "bash_cmd.h"
#include "bash_files.h"
#include "bash_path.h"
#include "util.h"

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

/* Every file argument is written (rm, touch, mkdir, tee, shred, ...). */
void bw_h_all(bw_cmd *k)
{
	bool dir = k->w->op == PW_OP_MKDIR || k->w->op == PW_OP_RMDIR;
	bool rec = k->w->op == PW_OP_UNLINK &&
		   (bw_opt_has(k, 'r', "recursive") || bw_opt_has(k, 'R', NULL));
	if (k->w->op == PW_OP_TRUNCATE) {
		bw_word tmp = {0};
		const bw_word *ref = bw_opt_word(k, bw_opt_get(k, 'r', "reference"), &tmp);
		if (ref)
			bw_tr(k, ref);
		bw_word_done(&tmp);
	}
	for (size_t i = 0; i < k->n_pos; i++)
		bw_tw(k, k->pos[i], k->w->op, dir || (rec && bw_arg_is_dir(k, k->pos[i])), rec);
}

/* chmod/chown/chgrp: the first argument is the mode or owner, unless --reference. */
void bw_h_mode_first(bw_cmd *k)
{
	size_t first = 1;
	bool rec = bw_opt_has(k, 'R', "recursive");
	if (bw_opt_has(k, 0, "reference"))
		first = 0;
	/* chmod -w FILE: the mode looks like an option. */
	for (size_t i = 1; i < k->argc && first; i++) {
		const char *s = k->argv[i].lit;
		if (s && s[0] == '-' && s[1] && strspn(s + 1, "rwxXst") == strlen(s + 1) &&
		    streq(k->w->name, "chmod"))
			first = 0;
	}
	for (size_t i = first; i < k->n_pos; i++)
		bw_tw(k, k->pos[i], k->w->op, rec && bw_arg_is_dir(k, k->pos[i]), rec);
}

/* cp, mv, install, ln: -t DIR or the last argument is the destination. */
void bw_h_copy(bw_cmd *k)
{
	bool is_mv = streq(k->w->name, "mv"), is_ln = streq(k->w->name, "ln");
	bool rec = bw_opt_has(k, 'r', "recursive") || bw_opt_has(k, 'R', NULL) ||
		   bw_opt_has(k, 'a', "archive");
	bw_word tmp = {0};
	const bw_word *dir = bw_opt_word(k, bw_opt_get(k, 't', "target-directory"), &tmp);
	size_t n_src = k->n_pos;
	const bw_word *dest = NULL;

	if (streq(k->w->name, "install") && bw_opt_has(k, 'd', "directory")) {
		for (size_t i = 0; i < k->n_pos; i++)
			bw_tw(k, k->pos[i], PW_OP_MKDIR, true, false);
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
					bw_tw(k, &j, PW_OP_SYMLINK, false, false);
					bw_word_done(&j);
				} else {
					bw_tw(k, &dot, PW_OP_SYMLINK, true,
					      true); /* some name here */
				}
				bw_word_done(&dot);
			}
			goto out;
		}
		if (k->n_pos == 1)
			goto out; /* missing destination: the command fails */
		dest = k->pos[--n_src];
		if (!bw_opt_has(k, 'T', "no-target-directory") &&
		    (n_src > 1 || bw_arg_is_dir(k, dest)))
			dir = dest;
	}
	pw_op op = is_mv ? PW_OP_RENAME : is_ln ? PW_OP_SYMLINK : PW_OP_CREATE;
	for (size_t i = 0; i < n_src; i++) {
		const bw_word *src = k->pos[i];
		if (is_mv)
			bw_tw(k, src, PW_OP_RENAME, bw_arg_is_dir(k, src), false);
		else if (!is_ln)
			bw_tr(k, src);
		if (!dir)
			continue;
		bw_word j;
		if (src->unknown || dir->unknown || !src->pat || !dir->pat) {
			bw_tw(k, dir, op, true, true); /* somewhere in DIR */
		} else if (join_base(&j, dir, src) == 0) {
			bw_tw(k, &j, op, bw_arg_is_dir(k, src), rec);
			bw_word_done(&j);
		}
	}
	if (!dir && dest)
		bw_tw(k, dest, op, rec && n_src == 1 && bw_arg_is_dir(k, k->pos[0]), rec);
out:
	bw_word_done(&tmp);
}

/* rsync SRC... DEST: DEST (a remote host:path is outside). */
void bw_h_rsync(bw_cmd *k)
{
	if (k->n_pos < 2)
		return;
	const bw_word *dest = k->pos[k->n_pos - 1];
	for (size_t i = 0; i + 1 < k->n_pos; i++)
		if (!(k->pos[i]->lit && strchr(k->pos[i]->lit, ':')))
			bw_tr(k, k->pos[i]);
	if (dest->lit && strchr(dest->lit, ':') &&
	    strchr(dest->lit, ':') < (strchr(dest->lit, '/') ? strchr(dest->lit, '/') : "\xff"))
		bw_outside(k, dest->lit, "a remote destination");
	else
		bw_tw(k, dest, PW_OP_CREATE, true, true);
}

/* sed: with -i/--in-place the file arguments are written (and FILE+SUFFIX as backups). */
void bw_h_sed(bw_cmd *k)
{
	const bw_opt *in = bw_opt_get(k, 'i', "in-place");
	bool script_opt = bw_opt_has(k, 'e', "expression") || bw_opt_has(k, 'f', "file");
	size_t first = script_opt ? 0 : 1;
	if (!in) {
		for (size_t i = first; i < k->n_pos; i++)
			bw_tr(k, k->pos[i]);
		return;
	}
	bw_set_label(k, k->w->name, "-i");
	const char *suffix = in->attached && in->attached[0] ? in->attached : NULL;
	for (size_t i = first; i < k->n_pos; i++) {
		bw_tw(k, k->pos[i], PW_OP_OPEN_WRITE, false, false);
		if (suffix && k->pos[i]->lit && !k->pos[i]->unknown && !strchr(suffix, '*')) {
			_cleanup_free_ char *b = NULL;
			if (asprintf(&b, "%s%s", k->pos[i]->lit, suffix) >= 0)
				bw_tw_lit(k, b, PW_OP_CREATE, false, false);
		}
	}
}

/* perl -i[SUFFIX] -e CODE FILES: the files are written. Without -i, perl runs code. */
void bw_h_perl(bw_cmd *k)
{
	const bw_opt *in = bw_opt_get(k, 'i', NULL);
	bool code = bw_opt_has(k, 'e', NULL) || bw_opt_has(k, 'E', NULL);
	if (!in || !code) {
		bw_unknown(k, "runs perl code the analysis does not follow");
		return;
	}
	bw_set_label(k, "perl", "-i");
	for (size_t i = 0; i < k->n_pos; i++)
		bw_tw(k, k->pos[i], PW_OP_OPEN_WRITE, false, false);
}

/* dd of=FILE if=FILE. */
void bw_h_dd(bw_cmd *k)
{
	for (size_t i = 1; i < k->argc; i++) {
		bw_word *a = &k->argv[i], tmp;
		if (!a->lit || a->unknown) {
			bw_unknown(k, "an operand the analysis cannot resolve");
			continue;
		}
		bool of = startswith(a->lit, "of="), in = startswith(a->lit, "if=");
		if (!of && !in)
			continue;
		if (bw_word_literal(&tmp, a->lit + 3, a->raw) < 0)
			continue;
		tmp.glob = false;
		if (of)
			bw_tw(k, &tmp, PW_OP_OPEN_WRITE, false, false);
		else
			bw_tr(k, &tmp);
		bw_word_done(&tmp);
	}
}

/* sort -o FILE; uniq IN OUT. */
void bw_h_sort(bw_cmd *k)
{
	bw_tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
	if (streq(k->w->name, "uniq") && k->n_pos >= 2)
		bw_tw(k, k->pos[1], PW_OP_OPEN_WRITE, false, false);
}

/* split [INPUT [PREFIX]]: PREFIX* (default "x"); csplit -f PREFIX (default "xx"). */
void bw_h_split(bw_cmd *k)
{
	bool cs = streq(k->w->name, "csplit");
	const char *prefix = cs ? "xx" : "x";
	bw_word tmp = {0};
	const bw_word *pw = cs ? bw_opt_word(k, bw_opt_get(k, 'f', "prefix"), &tmp)
			       : (k->n_pos >= 2 ? k->pos[1] : NULL);
	if (pw && (pw->unknown || !pw->lit)) {
		bw_tw(k, pw, PW_OP_CREATE, false, false);
	} else {
		bw_word w;
		if (bw_word_literal(&w, pw ? pw->lit : prefix, NULL) == 0) {
			char *p = NULL;
			if (asprintf(&p, "%s*", w.pat) >= 0) {
				free(w.pat);
				w.pat = p;
				w.glob = true;
				bw_tw(k, &w, PW_OP_CREATE, false, false);
			}
			bw_word_done(&w);
		}
	}
	bw_word_done(&tmp);
}

/* curl: -o FILE, --output-dir, -O (named after the URL, here), -D/-c FILE. */
void bw_h_curl(bw_cmd *k)
{
	bw_tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
	bw_tw_opt(k, 'D', "dump-header", PW_OP_OPEN_WRITE, false, false);
	bw_tw_opt(k, 'c', "cookie-jar", PW_OP_OPEN_WRITE, false, false);
	if (bw_opt_has(k, 'O', "remote-name") || bw_opt_has(k, 0, "remote-name-all")) {
		if (!bw_tw_opt(k, 0, "output-dir", PW_OP_CREATE, true, true))
			bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
	}
}

/* wget: -O FILE ("-": stdout), -P DIR, -o LOG; by default a file named after the URL
 * here (anything, with -r). */
void bw_h_wget(bw_cmd *k)
{
	bw_tw_opt(k, 'o', "output-file", PW_OP_OPEN_WRITE, false, false);
	bw_tw_opt(k, 'a', "append-output", PW_OP_OPEN_WRITE, false, false);
	bw_word tmp = {0};
	const bw_word *O = bw_opt_word(k, bw_opt_get(k, 'O', "output-document"), &tmp);
	if (O) {
		if (!(O->lit && streq(O->lit, "-")))
			bw_tw(k, O, PW_OP_OPEN_WRITE, false, false);
	} else if (!bw_tw_opt(k, 'P', "directory-prefix", PW_OP_CREATE, true, true)) {
		bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
	}
	bw_word_done(&tmp);
}

/* patch: -o OUT, FILE, or the files named inside the patch (unknown: here). */
void bw_h_patch(bw_cmd *k)
{
	if (bw_opt_has(k, 0, "dry-run"))
		return;
	if (bw_tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false))
		return;
	bw_word tmp = {0};
	const bw_word *in = bw_opt_word(k, bw_opt_get(k, 'i', "input"), &tmp);
	if (in)
		bw_tr(k, in);
	bw_word_done(&tmp);
	if (k->n_pos > 0)
		bw_tw(k, k->pos[0], PW_OP_OPEN_WRITE, false, false);
	else if (!bw_tw_opt(k, 'd', "directory", PW_OP_CREATE, true, true))
		bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* awk: read-only unless the program can write (>, |, system) or -i inplace. */
void bw_h_awk(bw_cmd *k)
{
	bw_word tmp = {0};
	const bw_word *inc = bw_opt_word(k, bw_opt_get(k, 'i', "include"), &tmp);
	bool inplace = inc && inc->lit && streq(inc->lit, "inplace");
	bw_word_done(&tmp);
	if (bw_opt_has(k, 'f', "file")) {
		bw_unknown(k, "runs an awk program file the analysis does not read");
		return;
	}
	if (k->n_pos == 0)
		return;
	const bw_word *prog = k->pos[0];
	if (!prog->lit || prog->unknown || strpbrk(prog->lit, ">|") ||
	    strstr(prog->lit, "system")) {
		bw_unknown(k, "the awk program may write files or run commands");
		return;
	}
	for (size_t i = 1; i < k->n_pos; i++) {
		if (inplace)
			bw_tw(k, k->pos[i], PW_OP_OPEN_WRITE, false, false);
		else
			bw_tr(k, k->pos[i]);
	}
}

/* yq -i / formatters that rewrite files in place given a flag (clang-format -i, gofmt -w,
 * prettier --write, eslint --fix) or always (rustfmt, black). */
void bw_h_inplace(bw_cmd *k)
{
	const char *n = k->w->name;
	bool w = streq(n, "rustfmt") || streq(n, "black") ||
		 (streq(n, "clang-format") && bw_opt_has(k, 'i', NULL)) ||
		 (streq(n, "yq") && bw_opt_has(k, 'i', "inplace")) ||
		 (streq(n, "gofmt") && bw_opt_has(k, 'w', NULL)) ||
		 (streq(n, "prettier") && (bw_opt_has(k, 'w', "write"))) ||
		 (streq(n, "eslint") && bw_opt_has(k, 0, "fix"));
	if (streq(n, "black") && (bw_opt_has(k, 0, "check") || bw_opt_has(k, 0, "diff")))
		w = false;
	if (streq(n, "rustfmt") && bw_opt_has(k, 0, "check"))
		w = false;
	size_t first = streq(n, "yq") ? 1 : 0;
	for (size_t i = first; i < k->n_pos; i++) {
		if (w)
			bw_tw(k, k->pos[i], PW_OP_OPEN_WRITE, bw_arg_is_dir(k, k->pos[i]),
			      bw_arg_is_dir(k, k->pos[i]));
		else
			bw_tr(k, k->pos[i]);
	}
}

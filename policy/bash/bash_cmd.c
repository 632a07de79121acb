/* SPDX-License-Identifier: MIT */
/*
 * One simple command being judged (bash_cmd.h): the option scan that tells option values
 * from file arguments, per the command's row of the table, and the helpers through which
 * every handler adds its targets under the command's label.
 */
#include <errno.h>
#include <string.h>

#include "bash_cmd.h"
#include "bash_path.h"
#include "bash_targets.h"
#include "util.h"

/* ---- options ---- */

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

size_t bw_scan(bw_cmd *k, const bw_writer *w, size_t from, bool stop_at_pos)
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
			if (!eq && pw_list_has(w->arg_long, '|', name, n) && i + 1 < k->argc)
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

const bw_opt *bw_opt_get(const bw_cmd *k, char sc, const char *lname)
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

bool bw_opt_has(const bw_cmd *k, char sc, const char *lname)
{
	return bw_opt_get(k, sc, lname) != NULL;
}

const bw_word *bw_opt_word(bw_cmd *k, const bw_opt *o, bw_word *tmp)
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

void bw_cmd_done(bw_cmd *k)
{
	free(k->pos);
	free(k->opts);
	k->pos = NULL;
	k->opts = NULL;
	k->n_pos = k->n_opts = 0;
}

/* ---- targets ---- */

void bw_tw(bw_cmd *k, const bw_word *w, pw_op op, bool is_dir, bool subtree)
{
	bw_target_word(k->c, k->label, w, PW_BASH_WRITE, op, is_dir, subtree);
}

void bw_tr(bw_cmd *k, const bw_word *w)
{
	bw_target_word(k->c, k->label, w, PW_BASH_READ, PW_OP_READ, false, false);
}

void bw_tw_lit(bw_cmd *k, const char *rel, pw_op op, bool is_dir, bool subtree)
{
	bw_target_lit(k->c, k->label, rel, PW_BASH_WRITE, op, is_dir, subtree);
}

bool bw_tw_opt(bw_cmd *k, char sc, const char *lname, pw_op op, bool is_dir, bool subtree)
{
	bw_word tmp = {0};
	const bw_word *w = bw_opt_word(k, bw_opt_get(k, sc, lname), &tmp);
	if (w && !(w->lit && streq(w->lit, "-")))
		bw_tw(k, w, op, is_dir, subtree);
	bw_word_done(&tmp);
	return w != NULL;
}

void bw_unknown(bw_cmd *k, const char *why)
{
	bw_add_unknown_cmd(k->c, k->label, why);
}

void bw_outside(bw_cmd *k, const char *what, const char *why)
{
	bw_add(k->c, k->label, PW_BASH_WRITE, PW_OP_WRITE, PW_BASH_KIND_RAW, what, PW_BASH_OUTSIDE,
	       true, true, why);
}

void bw_set_label(bw_cmd *k, const char *a, const char *b)
{
	snprintf(k->label, sizeof(k->label), "%s%s%s", a, b ? " " : "", b ? b : "");
}

bool bw_arg_is_dir(bw_cmd *k, const bw_word *w)
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

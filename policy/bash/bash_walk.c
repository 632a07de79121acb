/* SPDX-License-Identifier: MIT */
/*
 * The walk over a tree-sitter-bash syntax tree.
 *
 * Why a recursive walk with a depth cap rather than an explicit stack: the meaning of a
 * construct depends on the shell state around it (cd, variables, function definitions), and
 * that state is copied into subshells and discarded after them, which a recursion expresses
 * directly. Every recursive call passes DEPTH + 1 and stops at PW_BASH_DEPTH_MAX with an
 * unknown target ("nesting too deep"), so 10,000 nested $( ) cost 256 small frames, never
 * the stack. Children are visited with a TSTreeCursor (O(1) per step; ts_node_child(i) is
 * O(i)), so 500,000 commands in one list stay linear. Every node visited spends one step of
 * the analysis budget (bash_internal.h).
 *
 * Approximations, all in the conservative direction or documented in docs/BASH.md:
 * branches (if/case/loops, the right side of ||) are all walked; a cd inside them makes the
 * directory unknown afterwards; a for loop over at most PW_BASH_FOR_VALUES_MAX words walks its
 * body once per value; functions run in the caller's state, not recursively.
 */
#include <errno.h>
#include <string.h>
#include <tree_sitter/api.h>

#include "bash_heuristic.h"
#include "bash_internal.h"
#include "bash_path.h"
#include "bash_targets.h"
#include "bash_walk.h"
#include "bash_writers.h"
#include "pw_limits.h"
#include "util.h"

const TSLanguage *tree_sitter_bash(void);

/* ---------- small helpers ---------- */

typedef struct kids {
	TSTreeCursor cur;
	bool started;
} kids;

static kids kids_of(TSNode n)
{
	return (kids){.cur = ts_tree_cursor_new(n)};
}

static bool kids_next(kids *k, TSNode *ret, const char **ret_field)
{
	bool ok = k->started ? ts_tree_cursor_goto_next_sibling(&k->cur)
			     : ts_tree_cursor_goto_first_child(&k->cur);
	k->started = true;
	if (!ok)
		return false;
	*ret = ts_tree_cursor_current_node(&k->cur);
	if (ret_field)
		*ret_field = ts_tree_cursor_current_field_name(&k->cur);
	return true;
}

static void kids_done(kids *k)
{
	ts_tree_cursor_delete(&k->cur);
}

static bool is(TSNode n, const char *type)
{
	return streq(ts_node_type(n), type);
}

static char *node_text(const bw_ctx *c, TSNode n)
{
	uint32_t a = ts_node_start_byte(n), b = ts_node_end_byte(n);
	return strndup(c->src + a, b - a);
}

static bool too_deep(bw_ctx *c, unsigned depth)
{
	if (depth <= PW_BASH_DEPTH_MAX)
		return !bw_spend(c, 1);
	c->res->truncated = true;
	bw_add_unknown_cmd(c, "(analysis)", "nesting too deep");
	return true;
}

static void walk_stmt(bw_ctx *c, TSNode n, unsigned depth);
static void walk_any(bw_ctx *c, TSNode n, unsigned depth);

/* Runs FN on N in a copy of the state: a subshell, whose cd and assignments vanish. */
static void in_subshell(bw_ctx *c, TSNode n, unsigned depth, void (*fn)(bw_ctx *, TSNode, unsigned))
{
	bw_state *saved = c->st, *copy = bw_state_copy(c->st);
	if (!copy) {
		c->res->oom = true;
		return;
	}
	c->st = copy;
	fn(c, n, depth);
	c->st = saved;
	bw_state_free(copy);
}

static void walk_children(bw_ctx *c, TSNode n, unsigned depth)
{
	kids k = kids_of(n);
	TSNode ch;
	while (kids_next(&k, &ch, NULL))
		if (ts_node_is_named(ch))
			walk_any(c, ch, depth + 1);
	kids_done(&k);
}

/* ---------- word expansion ---------- */

typedef struct wbuf {
	char *lit, *pat;
	size_t n_lit, n_pat, cap_lit, cap_pat;
	bool unknown, glob, tilde, special, oom;
	const char *why;
} wbuf;

static bool grow(char **s, size_t *cap, size_t need)
{
	if (need <= *cap)
		return true;
	size_t nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	char *p = realloc(*s, nc);
	if (!p)
		return false;
	*s = p;
	*cap = nc;
	return true;
}

static void wb_unknown(wbuf *b, const char *why)
{
	if (!b->unknown)
		b->why = why;
	b->unknown = true;
}

/* Appends byte CH: to lit as is, to pat escaped when QUOTED and the byte is special. */
static void wb_put(wbuf *b, char ch, bool quoted)
{
	if (b->unknown || b->oom)
		return;
	if (b->n_pat + 3 > PW_BASH_INPUT_MAX) {
		wb_unknown(b, "a word longer than the input limit");
		return;
	}
	if (!grow(&b->lit, &b->cap_lit, b->n_lit + 2) ||
	    !grow(&b->pat, &b->cap_pat, b->n_pat + 3)) {
		b->oom = true;
		return;
	}
	b->lit[b->n_lit++] = ch;
	bool special = ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\' ||
		       ch == '{' || ch == '}' || ch == ',';
	if (special && quoted)
		b->pat[b->n_pat++] = '\\';
	else if (!quoted && (ch == '*' || ch == '?' || ch == '['))
		b->glob = true;
	b->pat[b->n_pat++] = ch;
}

static void wb_puts(wbuf *b, const char *s, size_t n, bool quoted)
{
	for (size_t i = 0; i < n; i++)
		wb_put(b, s[i], quoted);
}

/* Unquoted text: backslash quotes the next byte, a backslash-newline disappears. */
static void wb_unquoted(wbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 1 < n) {
			i++;
			if (s[i] != '\n')
				wb_put(b, s[i], true);
			continue;
		}
		if (s[i] == '~' && i == 0 && b->n_lit == 0)
			b->tilde = true;
		wb_put(b, s[i], false);
	}
}

/* Inside double quotes, a backslash quotes only $ ` " \ and newline. */
static void wb_dquoted(wbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 1 < n && strchr("$`\"\\\n", s[i + 1])) {
			i++;
			if (s[i] != '\n')
				wb_put(b, s[i], true);
			continue;
		}
		wb_put(b, s[i], true);
	}
}

/* $'...': the common escapes; anything exotic makes the word unknown. */
static void wb_ansi_c(wbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '\\' || i + 1 >= n) {
			wb_put(b, s[i], true);
			continue;
		}
		char e = s[++i];
		switch (e) {
		case 'n':
			wb_put(b, '\n', true);
			break;
		case 't':
			wb_put(b, '\t', true);
			break;
		case '\\':
		case '\'':
		case '"':
		case '?':
			wb_put(b, e, true);
			break;
		default:
			wb_unknown(b, "an ANSI-C escape the analysis does not decode");
			return;
		}
	}
}

static void expand_into(bw_ctx *c, TSNode n, unsigned depth, wbuf *b, bool quoted);

static void expand_var(bw_ctx *c, const char *name, wbuf *b, bool quoted)
{
	const bw_var *v = bw_var_get(c->st, name);
	if (v && v->value) {
		if (v->glob) {
			/* A for-loop variable over a pattern: stands for each match. */
			for (const char *s = v->value; *s; s++) {
				if (*s == '\\' && s[1]) {
					wb_put(b, *++s, true);
					continue;
				}
				wb_put(b, *s, false);
			}
			return;
		}
		if (!quoted && strpbrk(v->value, " \t\n")) {
			wb_unknown(b, "an unquoted variable that splits into several words");
			return;
		}
		wb_puts(b, v->value, strlen(v->value), quoted);
		return;
	}
	if (streq(name, "HOME") && b->n_lit == 0) {
		b->tilde = true;
		wb_put(b, '~', true);
		return;
	}
	wb_unknown(b, "a variable the analysis cannot resolve");
}

static void expand_expansion(bw_ctx *c, TSNode n, unsigned depth, wbuf *b, bool quoted)
{
	/* ${NAME} alone resolves; any operator (${X:-d}, ${#X}, ${X/a/b}) does not. */
	kids k = kids_of(n);
	TSNode ch, var = {0};
	int named = 0, anon = 0;
	bool has_var = false;
	while (kids_next(&k, &ch, NULL)) {
		if (ts_node_is_named(ch)) {
			named++;
			if (is(ch, "variable_name")) {
				var = ch;
				has_var = true;
			} else {
				walk_any(c, ch, depth + 1);
			}
		} else {
			anon++;
		}
	}
	kids_done(&k);
	if (named == 1 && has_var && anon == 2) { /* "${" NAME "}" */
		_cleanup_free_ char *name = node_text(c, var);
		if (name)
			expand_var(c, name, b, quoted);
		return;
	}
	wb_unknown(b, "a parameter expansion the analysis cannot resolve");
}

/* Walks the children of a string or concatenation, copying the text between them. */
static void expand_seq(bw_ctx *c, TSNode n, unsigned depth, wbuf *b, bool quoted, uint32_t from,
		       uint32_t to)
{
	kids k = kids_of(n);
	TSNode ch;
	uint32_t pos = from;
	while (kids_next(&k, &ch, NULL)) {
		uint32_t s = ts_node_start_byte(ch), e = ts_node_end_byte(ch);
		if (s < from || e > to)
			continue; /* the quotes themselves */
		if (s > pos)
			(quoted ? wb_dquoted : wb_unquoted)(b, c->src + pos, s - pos);
		if (ts_node_is_named(ch))
			expand_into(c, ch, depth + 1, b, quoted);
		else
			(quoted ? wb_dquoted : wb_unquoted)(b, c->src + s, e - s);
		pos = e;
	}
	kids_done(&k);
	if (to > pos)
		(quoted ? wb_dquoted : wb_unquoted)(b, c->src + pos, to - pos);
}

static void expand_into(bw_ctx *c, TSNode n, unsigned depth, wbuf *b, bool quoted)
{
	const char *t = ts_node_type(n);
	uint32_t s = ts_node_start_byte(n), e = ts_node_end_byte(n);
	const char *txt = c->src + s;
	size_t len = e - s;

	if (too_deep(c, depth)) {
		wb_unknown(b, "nesting too deep");
		return;
	}
	if (streq(t, "word") || streq(t, "number") || streq(t, "brace_expression") ||
	    streq(t, "extglob_pattern") || streq(t, "regex") || streq(t, "variable_name")) {
		if (quoted)
			wb_dquoted(b, txt, len);
		else
			wb_unquoted(b, txt, len);
	} else if (streq(t, "string_content")) {
		wb_dquoted(b, txt, len);
	} else if (streq(t, "raw_string")) {
		if (len >= 2)
			wb_puts(b, txt + 1, len - 2, true);
	} else if (streq(t, "ansi_c_string")) {
		if (len >= 3)
			wb_ansi_c(b, txt + 2, len - 3);
	} else if (streq(t, "string")) {
		if (len >= 2)
			expand_seq(c, n, depth, b, true, s + 1, e - 1);
	} else if (streq(t, "translated_string")) {
		kids k = kids_of(n);
		TSNode ch;
		while (kids_next(&k, &ch, NULL))
			if (ts_node_is_named(ch))
				expand_into(c, ch, depth + 1, b, true);
		kids_done(&k);
	} else if (streq(t, "concatenation")) {
		expand_seq(c, n, depth, b, quoted, s, e);
	} else if (streq(t, "simple_expansion")) {
		TSNode v = ts_node_named_child(n, 0);
		_cleanup_free_ char *name = ts_node_is_null(v) ? NULL : node_text(c, v);
		if (name && is(v, "variable_name"))
			expand_var(c, name, b, quoted);
		else
			wb_unknown(b, "a special parameter ($1, $@, $?, ...)");
	} else if (streq(t, "expansion")) {
		expand_expansion(c, n, depth, b, quoted);
	} else if (streq(t, "command_substitution")) {
		in_subshell(c, n, depth + 1, walk_children);
		wb_unknown(b, "the output of a command substitution");
	} else if (streq(t, "process_substitution")) {
		in_subshell(c, n, depth + 1, walk_children);
		b->special = true;
	} else {
		walk_children(c, n, depth);
		wb_unknown(b, "an expansion the analysis cannot resolve");
	}
}

/* Expands node N into *RET (always initialized; unknown on failure). */
static void expand_word(bw_ctx *c, TSNode n, unsigned depth, bw_word *ret)
{
	wbuf b = {0};
	expand_into(c, n, depth, &b, false);
	*ret = (bw_word){0};
	ret->raw = node_text(c, n);
	if (b.oom || !ret->raw)
		c->res->oom = true;
	if (b.unknown || b.oom) {
		ret->unknown = true;
		ret->why = b.why;
		free(b.lit);
		free(b.pat);
	} else {
		b.lit = b.lit ? b.lit : strdup("");
		b.pat = b.pat ? b.pat : strdup("");
		if (b.lit && b.pat) {
			b.lit[b.n_lit] = '\0';
			b.pat[b.n_pat] = '\0';
		}
		ret->lit = b.lit;
		ret->pat = b.pat;
		ret->glob = b.glob;
		ret->tilde = b.tilde;
		if (!ret->lit || !ret->pat) {
			c->res->oom = true;
			ret->unknown = true;
		}
	}
	ret->special = b.special;
}

/* ---------- redirections ---------- */

static void redirect_file(bw_ctx *c, TSNode n, unsigned depth)
{
	kids k = kids_of(n);
	TSNode ch, dest = {0};
	const char *field, *op = NULL;
	bool has_dest = false;
	while (kids_next(&k, &ch, &field)) {
		if (!ts_node_is_named(ch)) {
			if (!op)
				op = ts_node_type(ch);
		} else if (field && streq(field, "destination") && !has_dest) {
			dest = ch;
			has_dest = true;
		}
	}
	kids_done(&k);
	if (!op || !has_dest)
		return;

	bw_word w;
	expand_word(c, dest, depth + 1, &w);
	bool dup = streq(op, ">&") || streq(op, "<&") || streq(op, ">&-") || streq(op, "<&-");
	if (dup && (w.unknown || !w.lit || w.lit[0] == '-' ||
		    strspn(w.lit, "0123456789-") == strlen(w.lit) || !streq(op, ">&"))) {
		bw_word_done(&w); /* N>&M duplicates a descriptor: not a file */
		return;
	}
	char label[32];
	snprintf(label, sizeof(label), "redirect %s", op);
	if (streq(op, "<"))
		bw_target_word(c, label, &w, PW_BASH_READ, PW_OP_READ, false, false);
	else
		bw_target_word(c, label, &w, PW_BASH_WRITE, PW_OP_OPEN_WRITE, false, false);
	bw_word_done(&w);
}

static void walk_redirect(bw_ctx *c, TSNode n, unsigned depth)
{
	if (too_deep(c, depth))
		return;
	if (is(n, "file_redirect")) {
		redirect_file(c, n, depth);
	} else if (is(n, "heredoc_redirect")) {
		/* The body's substitutions run; a redirect or pipeline after the opener too. */
		kids k = kids_of(n);
		TSNode ch;
		const char *field;
		while (kids_next(&k, &ch, &field)) {
			if (!ts_node_is_named(ch))
				continue;
			if (field && streq(field, "redirect"))
				walk_redirect(c, ch, depth + 1);
			else if (is(ch, "heredoc_body"))
				walk_children(c, ch, depth);
			else if (!is(ch, "heredoc_start") && !is(ch, "heredoc_end"))
				walk_any(c, ch, depth + 1);
		}
		kids_done(&k);
	} else {
		walk_children(c, n, depth); /* herestring: only its substitutions matter */
	}
}

/* ---------- commands ---------- */

static void assign(bw_ctx *c, TSNode n, unsigned depth)
{
	TSNode name = ts_node_child_by_field_name(n, "name", 4);
	TSNode value = ts_node_child_by_field_name(n, "value", 5);
	_cleanup_free_ char *vname = ts_node_is_null(name) ? NULL : node_text(c, name);

	if (ts_node_is_null(value)) {
		if (vname && is(name, "variable_name"))
			bw_var_set(c->st, vname, "", false);
		return;
	}
	bw_word w;
	wbuf b = {0};
	/* Assignments are neither split nor globbed: expand as if quoted. */
	if (is(value, "array")) {
		walk_children(c, value, depth);
		w = (bw_word){.unknown = true};
	} else {
		expand_into(c, value, depth + 1, &b, true);
		w = (bw_word){.unknown = b.unknown || b.oom};
		if (!w.unknown) {
			w.lit = b.lit ? b.lit : strdup("");
			b.lit = NULL;
			if (w.lit && b.n_lit)
				w.lit[b.n_lit] = '\0';
		}
	}
	free(b.lit);
	free(b.pat);
	/* X+=..., X[i]=...: not tracked. */
	bool plain = vname && is(name, "variable_name") &&
		     !memmem(c->src + ts_node_end_byte(name), 1, "+", 1);
	if (vname && is(name, "variable_name"))
		bw_var_set(c->st, vname, plain && !w.unknown ? w.lit : NULL, false);
	bw_word_done(&w);
}

static bw_func *func_find(bw_ctx *c, const char *name)
{
	for (size_t i = c->n_funcs; i-- > 0;)
		if (streq(c->funcs[i].name, name))
			return &c->funcs[i];
	return NULL;
}

static void func_define(bw_ctx *c, TSNode n)
{
	TSNode name = ts_node_child_by_field_name(n, "name", 4);
	TSNode body = ts_node_child_by_field_name(n, "body", 4);
	if (ts_node_is_null(name) || ts_node_is_null(body) || c->n_funcs >= PW_BASH_FUNCS_MAX)
		return;
	TSNode *keep = malloc(sizeof(*keep));
	char *fname = node_text(c, name);
	bw_func *f = reallocarray(c->funcs, c->n_funcs + 1, sizeof(*f));
	if (!keep || !fname || !f) {
		free(keep);
		free(fname);
		if (f)
			c->funcs = f;
		c->res->oom = true;
		return;
	}
	*keep = body;
	c->funcs = f;
	c->funcs[c->n_funcs++] = (bw_func){.name = fname, .body = keep, .src = c->src};
}

static void func_call(bw_ctx *c, bw_func *f, unsigned depth)
{
	if (f->active)
		return; /* recursion: the body is being walked already */
	if (f->calls >= PW_BASH_FUNC_CALLS_MAX) {
		bw_add_unknown_cmd(c, f->name, "a function called too often to follow");
		return;
	}
	f->calls++;
	f->active = true;
	/* f may move if the body defines functions: keep its index. */
	size_t idx = (size_t)(f - c->funcs);
	const char *saved_src = c->src;
	c->src = f->src;
	walk_stmt(c, *(const TSNode *)f->body, depth + 1);
	c->src = saved_src;
	c->funcs[idx].active = false;
}

static void eval_words(bw_ctx *c, bw_word *argv, size_t argc, unsigned depth)
{
	size_t len = 0;
	for (size_t i = 1; i < argc; i++) {
		if (argv[i].unknown || !argv[i].lit) {
			bw_add_unknown_cmd(c, "eval", "evaluates text the analysis cannot resolve");
			return;
		}
		len += strlen(argv[i].lit) + 1;
	}
	_cleanup_free_ char *text = malloc(len + 1);
	if (!text) {
		c->res->oom = true;
		return;
	}
	char *p = text;
	for (size_t i = 1; i < argc; i++)
		p = stpcpy(stpcpy(p, argv[i].lit), i + 1 < argc ? " " : "");
	bw_analyze_string(c, text, (size_t)(p - text), depth + 1, "eval");
}

/* Commands that change the shell's own state, and functions; false when not one. */
static bool builtin(bw_ctx *c, bw_word *argv, size_t argc, unsigned depth)
{
	const char *name = argv[0].lit;

	if (streq(name, "cd") || streq(name, "pushd")) {
		size_t i = 1;
		while (i < argc && argv[i].lit && argv[i].lit[0] == '-' && argv[i].lit[1] &&
		       !streq(argv[i].lit, "-")) {
			if (streq(argv[i].lit, "--")) {
				i++;
				break;
			}
			i++;
		}
		bw_cd(c, i < argc ? &argv[i] : NULL);
		return true;
	}
	if (streq(name, "popd")) {
		bw_set_cwd(c->st, BW_CWD_UNKNOWN, NULL);
		return true;
	}
	if (streq(name, "read") || streq(name, "mapfile") || streq(name, "readarray")) {
		for (size_t i = 1; i < argc; i++)
			if (argv[i].lit && argv[i].lit[0] != '-')
				bw_var_set(c->st, argv[i].lit, NULL, false);
		return true;
	}
	if (streq(name, "eval")) {
		eval_words(c, argv, argc, depth);
		return true;
	}
	bw_func *f = func_find(c, name);
	if (f) {
		func_call(c, f, depth);
		return true;
	}
	return false;
}

static void walk_command(bw_ctx *c, TSNode n, unsigned depth)
{
	kids k = kids_of(n);
	TSNode ch;
	const char *field;
	bw_word *argv = NULL;
	size_t argc = 0;

	/* Redirections are set up before the command runs, in the current directory. */
	while (kids_next(&k, &ch, &field))
		if (field && streq(field, "redirect"))
			walk_redirect(c, ch, depth + 1);
	kids_done(&k);

	k = kids_of(n);
	while (kids_next(&k, &ch, &field)) {
		if (!ts_node_is_named(ch) || (field && streq(field, "redirect")))
			continue;
		if (is(ch, "variable_assignment")) {
			/* A prefix assignment lives in the command's environment only; its value
			 * may still run substitutions. */
			bw_state *saved = c->st, *copy = bw_state_copy(c->st);
			if (copy) {
				c->st = copy;
				assign(c, ch, depth + 1);
				c->st = saved;
				bw_state_free(copy);
			}
			continue;
		}
		if (is(ch, "subshell") || is(ch, "comment")) {
			walk_any(c, ch, depth + 1);
			continue;
		}
		TSNode word = ch;
		if (is(ch, "command_name")) {
			if (ts_node_named_child_count(ch) < 1)
				continue;
			word = ts_node_named_child(ch, 0);
		}
		bw_word *nv = reallocarray(argv, argc + 1, sizeof(*nv));
		if (!nv) {
			c->res->oom = true;
			break;
		}
		argv = nv;
		expand_word(c, word, depth + 1, &argv[argc++]);
		if (!bw_spend(c, 1))
			break;
	}
	kids_done(&k);

	if (argc > 0) {
		if (argv[0].unknown || !argv[0].lit)
			bw_add_unknown_cmd(c, argv[0].raw ? argv[0].raw : "?",
					   "the command name is an expansion the analysis cannot "
					   "resolve");
		else if (!builtin(c, argv, argc, depth))
			bw_dispatch(c, argv, argc, depth + 1);
	}
	PW_FREE_ARRAY(argv, argc, bw_word_done);
}

static void walk_declaration(bw_ctx *c, TSNode n, unsigned depth)
{
	kids k = kids_of(n);
	TSNode ch;
	while (kids_next(&k, &ch, NULL)) {
		if (is(ch, "variable_assignment")) {
			assign(c, ch, depth + 1);
		} else if (ts_node_is_named(ch) && !is(ch, "variable_name") && !is(ch, "word")) {
			bw_word w;
			expand_word(c, ch, depth + 1, &w);
			bw_word_done(&w);
		}
	}
	kids_done(&k);
}

static void walk_unset(bw_ctx *c, TSNode n)
{
	kids k = kids_of(n);
	TSNode ch;
	while (kids_next(&k, &ch, NULL)) {
		if (!ts_node_is_named(ch))
			continue;
		_cleanup_free_ char *name = node_text(c, ch);
		if (name)
			bw_var_set(c->st, name, NULL, false);
	}
	kids_done(&k);
}

/* Walks N; if the cwd it ends with differs from the one it started with, the branches did
 * not agree (or may not have run): the directory becomes unknown. */
static void walk_branchy(bw_ctx *c, TSNode n, unsigned depth,
			 void (*fn)(bw_ctx *, TSNode, unsigned))
{
	bw_state before = {0};
	bw_set_cwd(&before, c->st->cwd_state, c->st->cwd);
	fn(c, n, depth);
	if (!bw_state_same_cwd(&before, c->st))
		bw_set_cwd(c->st, BW_CWD_UNKNOWN, NULL);
	free(before.cwd);
}

static void walk_list(bw_ctx *c, TSNode n, unsigned depth)
{
	bool has_or = false;
	kids k = kids_of(n);
	TSNode ch;
	while (kids_next(&k, &ch, NULL))
		if (!ts_node_is_named(ch) && is(ch, "||"))
			has_or = true;
	kids_done(&k);
	if (has_or)
		walk_branchy(c, n, depth, walk_children);
	else
		walk_children(c, n, depth);
}

static void walk_pipeline(bw_ctx *c, TSNode n, unsigned depth)
{
	/* Each element of a pipeline runs in its own subshell. */
	kids k = kids_of(n);
	TSNode ch;
	while (kids_next(&k, &ch, NULL))
		if (ts_node_is_named(ch))
			in_subshell(c, ch, depth + 1, walk_any);
	kids_done(&k);
}

static void walk_for(bw_ctx *c, TSNode n, unsigned depth)
{
	TSNode var = ts_node_child_by_field_name(n, "variable", 8);
	TSNode body = ts_node_child_by_field_name(n, "body", 4);
	_cleanup_free_ char *vname = ts_node_is_null(var) ? NULL : node_text(c, var);
	bw_word vals[PW_BASH_FOR_VALUES_MAX];
	size_t nv = 0;
	bool unknown = false, any = false;

	kids k = kids_of(n);
	TSNode ch;
	const char *field;
	while (kids_next(&k, &ch, &field)) {
		if (!field || !streq(field, "value"))
			continue;
		any = true;
		if (nv == PW_BASH_FOR_VALUES_MAX) {
			unknown = true;
			bw_word w;
			expand_word(c, ch, depth + 1, &w); /* still walk its substitutions */
			bw_word_done(&w);
			continue;
		}
		expand_word(c, ch, depth + 1, &vals[nv]);
		if (vals[nv].unknown || vals[nv].special)
			unknown = true;
		nv++;
	}
	kids_done(&k);
	if (ts_node_is_null(body) || !vname)
		goto done;
	if (!any || unknown || nv == 0) {
		bw_var_set(c->st, vname, NULL, false);
		walk_any(c, body, depth + 1);
	} else {
		for (size_t i = 0; i < nv && bw_spend(c, 1); i++) {
			bool glob = vals[i].glob;
			bw_var_set(c->st, vname, glob ? vals[i].pat : vals[i].lit, glob);
			walk_any(c, body, depth + 1);
		}
	}
	bw_var_set(c->st, vname, NULL, false);
done:
	for (size_t i = 0; i < nv; i++)
		bw_word_done(&vals[i]);
}

/* The redirections of redirected_statement R (everything but its body). */
static void redirects_of(bw_ctx *c, TSNode r, unsigned depth)
{
	kids k = kids_of(r);
	TSNode ch;
	const char *field;
	while (kids_next(&k, &ch, &field))
		if (ts_node_is_named(ch) && !(field && streq(field, "body")))
			walk_redirect(c, ch, depth + 1);
	kids_done(&k);
}

/*
 * tree-sitter-bash attaches a redirection that ends `a && b > f` or `a | b > f` to the
 * whole list or pipeline; bash binds it to the last command. So descend to the last element
 * and apply R's redirections there, in that element's state (after a cd earlier in the list,
 * inside the last pipeline element's subshell).
 */
static void walk_with_redirects(bw_ctx *c, TSNode body, TSNode r, unsigned depth)
{
	bool list = is(body, "list"), pipe = is(body, "pipeline");

	if (too_deep(c, depth))
		return;
	if (!list && !pipe) {
		redirects_of(c, r, depth);
		walk_stmt(c, body, depth + 1);
		return;
	}
	uint32_t n = ts_node_named_child_count(body);
	TSNode last = {0};
	bool has_last = false;
	kids k = kids_of(body);
	TSNode ch;
	uint32_t i = 0;
	while (kids_next(&k, &ch, NULL)) {
		if (!ts_node_is_named(ch))
			continue;
		if (++i == n) {
			last = ch;
			has_last = true;
		} else if (pipe) {
			in_subshell(c, ch, depth + 1, walk_any);
		} else {
			walk_any(c, ch, depth + 1);
		}
	}
	kids_done(&k);
	if (!has_last)
		return;
	if (!pipe) {
		walk_with_redirects(c, last, r, depth + 1);
		return;
	}
	bw_state *saved = c->st, *copy = bw_state_copy(c->st);
	if (!copy) {
		c->res->oom = true;
		return;
	}
	c->st = copy;
	walk_with_redirects(c, last, r, depth + 1);
	c->st = saved;
	bw_state_free(copy);
}

static void walk_redirected(bw_ctx *c, TSNode n, unsigned depth)
{
	TSNode body = ts_node_child_by_field_name(n, "body", 4);
	if (ts_node_is_null(body))
		redirects_of(c, n, depth); /* `> file` alone */
	else
		walk_with_redirects(c, body, n, depth + 1);
}

static void walk_stmt(bw_ctx *c, TSNode n, unsigned depth)
{
	const char *t = ts_node_type(n);

	if (too_deep(c, depth))
		return;
	if (streq(t, "command"))
		walk_command(c, n, depth);
	else if (streq(t, "redirected_statement"))
		walk_redirected(c, n, depth);
	else if (streq(t, "list"))
		walk_list(c, n, depth);
	else if (streq(t, "pipeline"))
		walk_pipeline(c, n, depth);
	else if (streq(t, "subshell"))
		in_subshell(c, n, depth + 1, walk_children);
	else if (streq(t, "if_statement") || streq(t, "while_statement") ||
		 streq(t, "case_statement") || streq(t, "c_style_for_statement"))
		walk_branchy(c, n, depth, walk_children);
	else if (streq(t, "for_statement"))
		walk_branchy(c, n, depth, walk_for);
	else if (streq(t, "function_definition"))
		func_define(c, n);
	else if (streq(t, "variable_assignment"))
		assign(c, n, depth);
	else if (streq(t, "declaration_command"))
		walk_declaration(c, n, depth);
	else if (streq(t, "unset_command"))
		walk_unset(c, n);
	else if (streq(t, "comment") || streq(t, "heredoc_body"))
		return;
	else
		walk_children(c, n, depth); /* program, groups, bodies, negation, tests, ... */
}

/* Any named node: statements are walked, words expanded for their substitutions. */
static void walk_any(bw_ctx *c, TSNode n, unsigned depth)
{
	const char *t = ts_node_type(n);
	if (streq(t, "command_substitution") || streq(t, "process_substitution")) {
		if (!too_deep(c, depth))
			in_subshell(c, n, depth + 1, walk_children);
	} else if (streq(t, "file_redirect") || streq(t, "heredoc_redirect") ||
		   streq(t, "herestring_redirect")) {
		walk_redirect(c, n, depth);
	} else if (streq(t, "word") || streq(t, "string_content") || streq(t, "raw_string") ||
		   streq(t, "number") || streq(t, "variable_name") || streq(t, "comment") ||
		   streq(t, "heredoc_content") || streq(t, "heredoc_start") ||
		   streq(t, "heredoc_end") || streq(t, "file_descriptor") ||
		   streq(t, "test_operator") || streq(t, "special_variable_name") ||
		   streq(t, "ansi_c_string")) {
		return;
	} else {
		walk_stmt(c, n, depth);
	}
}

/* ---------- entry ---------- */

static void walk_tree(bw_ctx *c, const char *text, size_t len, unsigned depth, bool new_shell)
{
	/* A new shell (sh -c) does not see the caller's functions. */
	bw_func *outer = c->funcs;
	size_t n_outer = c->n_funcs;
	if (new_shell) {
		c->funcs = NULL;
		c->n_funcs = 0;
	}
	TSParser *parser = ts_parser_new();
	if (!parser || !ts_parser_set_language(parser, tree_sitter_bash())) {
		if (parser)
			ts_parser_delete(parser);
		c->res->oom = true;
		return;
	}
	TSTree *tree = ts_parser_parse_string(parser, NULL, text, (uint32_t)len);
	TSNode root = tree ? ts_tree_root_node(tree) : (TSNode){0};
	if (!tree || ts_node_has_error(root)) {
		bool saved = c->heuristic;
		c->heuristic = true;
		c->res->heuristic = true;
		bw_heuristic_scan(c, text, len);
		c->heuristic = saved;
	} else {
		const char *saved_src = c->src;
		size_t saved_funcs = c->n_funcs;
		c->src = text;
		walk_stmt(c, root, depth);
		/* Functions defined here point into this tree: forget them with it. */
		for (size_t i = saved_funcs; i < c->n_funcs; i++) {
			free(c->funcs[i].name);
			free((void *)c->funcs[i].body);
		}
		c->n_funcs = saved_funcs;
		c->src = saved_src;
	}
	if (tree)
		ts_tree_delete(tree);
	ts_parser_delete(parser);
	if (new_shell) {
		free(c->funcs);
		c->funcs = outer;
		c->n_funcs = n_outer;
	}
}

void bw_analyze_string(bw_ctx *c, const char *text, size_t len, unsigned depth, const char *command)
{
	if (!command) {
		walk_tree(c, text, len, depth, false);
		return;
	}
	if (c->shell_level >= PW_BASH_SHELL_NEST_MAX || depth > PW_BASH_DEPTH_MAX) {
		c->res->truncated = true;
		bw_add_unknown_cmd(c, command, "nesting too deep");
		return;
	}
	if (!bw_spend(c, len / 4 + 1))
		return;
	bw_state *saved = c->st, *copy = bw_state_copy(c->st);
	if (!copy) {
		c->res->oom = true;
		return;
	}
	/* eval runs in the current shell; sh -c in a new one. */
	bool same_shell = streq(command, "eval");
	if (!same_shell)
		c->st = copy;
	c->shell_level++;
	walk_tree(c, text, len, depth + 1, !same_shell);
	c->shell_level--;
	c->st = saved;
	bw_state_free(copy);
}

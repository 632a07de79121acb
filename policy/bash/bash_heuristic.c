/* SPDX-License-Identifier: MIT */
/*
 * The fallback for a command line tree-sitter cannot parse cleanly (an unterminated quote,
 * a stray ')', a construct the grammar does not know). It does not try to be right, only
 * safe: it splits the text into tokens with bash's quoting rules, cuts commands at
 * operators (; & | && || newline parentheses backquotes $( ), reports every redirection
 * target and hands each command's words to the same writer table as the parser's walk.
 * Words holding an expansion ($, backquote) are unknown. The caller flags every target as
 * heuristic and the verdict is never "allowed".
 */
#include <string.h>

#include "bash_heuristic.h"
#include "bash_internal.h"
#include "bash_path.h"
#include "bash_targets.h"
#include "bash_writers.h"
#include "pw_limits.h"
#include "util.h"

typedef enum tok_kind {
	TOK_WORD,
	TOK_SEP,   /* ; & | && || newline ( ) ` $( */
	TOK_REDIR, /* > >> >| &> &>> < <> N> N>> >& <& <<< << */
} tok_kind;

typedef struct scanner {
	const char *s;
	size_t n, i;
} scanner;

typedef struct token {
	tok_kind kind;
	char op[8];   /* the operator text, for SEP and REDIR */
	bw_word word; /* for WORD */
	bool fd_dup;  /* >&N, N>&M, >&- */
} token;

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r';
}

static bool is_meta(char ch)
{
	return is_blank(ch) || ch == '\n' || ch == ';' || ch == '&' || ch == '|' || ch == '(' ||
	       ch == ')' || ch == '<' || ch == '>' || ch == '`';
}

/* Reads one word with quote removal. Returns false at the end of input. */
static void read_word(scanner *sc, bw_word *ret)
{
	size_t cap = 64, n = 0, start = sc->i;
	char *lit = malloc(cap);
	bool unknown = false, glob = false, tilde = sc->s[sc->i] == '~';

	while (lit && sc->i < sc->n && !is_meta(sc->s[sc->i])) {
		char ch = sc->s[sc->i];
		if (n + 4 >= cap) {
			char *l = realloc(lit, cap *= 2);
			if (!l) {
				free(lit);
				lit = NULL;
				break;
			}
			lit = l;
		}
		if (ch == '\\' && sc->i + 1 < sc->n) {
			lit[n++] = sc->s[sc->i + 1];
			sc->i += 2;
		} else if (ch == '\'') {
			const char *e = memchr(sc->s + sc->i + 1, '\'', sc->n - sc->i - 1);
			size_t end = e ? (size_t)(e - sc->s) : sc->n;
			size_t len = end - sc->i - 1;
			if (n + len + 4 >= cap) {
				char *l = realloc(lit, cap = n + len + 64);
				if (!l) {
					free(lit);
					lit = NULL;
					break;
				}
				lit = l;
			}
			memcpy(lit + n, sc->s + sc->i + 1, len);
			n += len;
			sc->i = e ? end + 1 : sc->n;
			if (!e)
				unknown = true; /* unterminated */
		} else if (ch == '"') {
			sc->i++;
			while (sc->i < sc->n && sc->s[sc->i] != '"') {
				if (sc->s[sc->i] == '$' || sc->s[sc->i] == '`')
					unknown = true;
				if (sc->s[sc->i] == '\\' && sc->i + 1 < sc->n)
					sc->i++;
				if (n + 4 >= cap) {
					char *l = realloc(lit, cap *= 2);
					if (!l) {
						free(lit);
						lit = NULL;
						goto out;
					}
					lit = l;
				}
				lit[n++] = sc->s[sc->i++];
			}
			if (sc->i >= sc->n)
				unknown = true;
			else
				sc->i++;
		} else {
			if (ch == '$')
				unknown = true;
			if (ch == '*' || ch == '?' || ch == '[')
				glob = true;
			lit[n++] = ch;
			sc->i++;
		}
	}
out:
	*ret = (bw_word){0};
	_cleanup_free_ char *raw = strndup(sc->s + start, sc->i - start);
	if (!lit || unknown || glob) {
		/* Globs in broken input are reported as the raw pattern, unexpanded. */
		if (lit && !unknown) {
			lit[n] = '\0';
			if (bw_word_literal(ret, lit, raw) == 0) {
				ret->tilde = tilde;
				free(lit);
				return;
			}
		}
		free(lit);
		bw_word_unknown(ret, raw, "an expansion in a command that does not parse");
		return;
	}
	lit[n] = '\0';
	if (bw_word_literal(ret, lit, raw) < 0)
		bw_word_unknown(ret, raw, NULL);
	ret->tilde = tilde;
	free(lit);
}

static bool next_token(scanner *sc, token *t)
{
	while (sc->i < sc->n && is_blank(sc->s[sc->i]))
		sc->i++;
	if (sc->i < sc->n && sc->s[sc->i] == '#') {
		while (sc->i < sc->n && sc->s[sc->i] != '\n')
			sc->i++;
	}
	if (sc->i >= sc->n)
		return false;
	*t = (token){0};
	const char *p = sc->s + sc->i;
	size_t left = sc->n - sc->i;
	static const char *const seps[] = {"&&", "||", "$(", ";;", "|&", ";",
					   "&",	 "|",  "\n", "(",  ")",	 "`"};
	static const char *const redirs[] = {"&>>", "<<<", "<<-", ">>", ">|", "&>",
					     "<>",  ">&",  "<&",  "<<", ">",  "<"};
	size_t digits = 0;
	while (digits < left && p[digits] >= '0' && p[digits] <= '9')
		digits++;
	for (size_t i = 0; i < ELEMENTSOF(redirs); i++) {
		size_t l = strlen(redirs[i]);
		if (left >= digits + l && strncmp(p + digits, redirs[i], l) == 0 &&
		    (digits == 0 || redirs[i][0] != '&')) {
			t->kind = TOK_REDIR;
			snprintf(t->op, sizeof(t->op), "%s", redirs[i]);
			sc->i += digits + l;
			return true;
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(seps); i++) {
		size_t l = strlen(seps[i]);
		if (left >= l && strncmp(p, seps[i], l) == 0) {
			t->kind = TOK_SEP;
			snprintf(t->op, sizeof(t->op), "%s", seps[i]);
			sc->i += l;
			return true;
		}
	}
	t->kind = TOK_WORD;
	read_word(sc, &t->word);
	return true;
}

static bool is_keyword(const char *s)
{
	static const char *const kw[] = {
	    "if", "then", "else", "elif", "fi",	      "do", "done",   "while", "until", "{",
	    "}",  "!",	  "case", "esac", "function", "in", "select", "[[",    "]]",	NULL};
	for (size_t i = 0; kw[i]; i++)
		if (streq(s, kw[i]))
			return true;
	return false;
}

static void flush(bw_ctx *c, bw_word *argv, size_t *argc)
{
	size_t first = 0;
	/* Leading keywords (then, do, !) and assignments are not the command. */
	while (first < *argc && argv[first].lit && !argv[first].unknown &&
	       (is_keyword(argv[first].lit) ||
		(strchr(argv[first].lit, '=') && argv[first].lit[0] != '=' &&
		 argv[first].lit[0] != '-')))
		first++;
	if (first < *argc && argv[first].lit &&
	    (streq(argv[first].lit, "for") || streq(argv[first].lit, "case")))
		first = *argc; /* for NAME in WORDS: no command here */
	if (first < *argc)
		bw_dispatch(c, &argv[first], *argc - first, 1);
	for (size_t i = 0; i < *argc; i++)
		bw_word_done(&argv[i]);
	*argc = 0;
}

void bw_heuristic_scan(bw_ctx *c, const char *text, size_t len)
{
	scanner sc = {.s = text, .n = len};
	bw_word *argv = NULL;
	size_t argc = 0, cap = 0;
	token t;

	while (next_token(&sc, &t)) {
		if (!bw_spend(c, 1)) {
			if (t.kind == TOK_WORD)
				bw_word_done(&t.word);
			break;
		}
		if (t.kind == TOK_SEP) {
			flush(c, argv, &argc);
			continue;
		}
		if (t.kind == TOK_REDIR) {
			token d;
			size_t save = sc.i;
			if (!next_token(&sc, &d))
				break;
			if (d.kind != TOK_WORD) {
				sc.i = save;
				continue;
			}
			bool heredoc = startswith(t.op, "<<");
			bool dup = streq(t.op, ">&") || streq(t.op, "<&");
			bool numeric =
			    d.word.lit && strspn(d.word.lit, "0123456789-") == strlen(d.word.lit);
			char label[32];
			snprintf(label, sizeof(label), "redirect %s", t.op);
			if (heredoc || (dup && (numeric || t.op[0] == '<'))) {
				/* not a file */
			} else if (t.op[0] == '<' && !streq(t.op, "<>")) {
				bw_target_word(c, label, &d.word, PW_BASH_READ, PW_OP_READ, false,
					       false);
			} else {
				bw_target_word(c, label, &d.word, PW_BASH_WRITE, PW_OP_OPEN_WRITE,
					       false, false);
			}
			bw_word_done(&d.word);
			continue;
		}
		if (argc == cap) {
			size_t nc = cap ? cap * 2 : 16;
			bw_word *v = reallocarray(argv, nc, sizeof(*v));
			if (!v) {
				bw_word_done(&t.word);
				c->res->oom = true;
				break;
			}
			argv = v, cap = nc;
		}
		argv[argc++] = t.word;
	}
	flush(c, argv, &argc);
	free(argv);
}

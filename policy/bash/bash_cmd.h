/* SPDX-License-Identifier: MIT */
/*
 * One simple command being judged (bash_cmd.c): its argv split into options and positional
 * words by its row of the table (bash_writers.c), and the helpers every handler uses to say
 * what the command writes, reads, or leaves unknown. The handlers live by kind of command
 * (bash_files.c, bash_archives.c, bash_builds.c, bash_git.c, bash_wrappers.c); each maps a
 * bw_cmd to targets through these helpers only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bash_internal.h"

typedef struct bw_cmd bw_cmd;
typedef void (*bw_handler)(bw_cmd *k);

/* A row of the table of known commands. */
typedef struct bw_writer {
	const char *name;
	bw_handler fn;
	const char *arg_short; /* short options that take a value ("t" for -t DIR) */
	const char *arg_long;  /* long options that take a value, "|name|name|" */
	const char *opt_short; /* short options whose value is attached or empty (sed -i) */
	pw_op op;	       /* the operation the file arguments stand for */
	const char *note;      /* for commands that run code (RUNS rows) */
	bool raw; /* the handler reads argv itself (wrappers, git, find, dd): no option scan */
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
	/* Judges a command a wrapper runs (bw_dispatch, bash_writers.h): set by the dispatch,
	 * so the handlers reach it without calling back up the files. */
	void (*dispatch)(bw_ctx *c, bw_word *argv, size_t argc, unsigned depth);
};

/* ---- options ---- */

/* Splits argv[FROM..] into options and positional words per W's option spec. When
 * STOP_AT_POS, the first positional word ends the scan (wrappers: the command follows) and
 * its index is returned; otherwise argc. */
size_t bw_scan(bw_cmd *k, const bw_writer *w, size_t from, bool stop_at_pos);
/* The last option given as short SC or long LNAME (either may be 0/NULL), or NULL. */
const bw_opt *bw_opt_get(const bw_cmd *k, char sc, const char *lname);
bool bw_opt_has(const bw_cmd *k, char sc, const char *lname);
/* The option's value as a word in *TMP (attached) or the following word. NULL if none. */
const bw_word *bw_opt_word(bw_cmd *k, const bw_opt *o, bw_word *tmp);
/* Frees what bw_scan allocated. */
void bw_cmd_done(bw_cmd *k);

/* ---- targets, under the command's label ---- */

void bw_tw(bw_cmd *k, const bw_word *w, pw_op op, bool is_dir, bool subtree); /* written */
void bw_tr(bw_cmd *k, const bw_word *w);				      /* read */
/* A path the command knows (".git", "node_modules"), relative to the cwd, written. */
void bw_tw_lit(bw_cmd *k, const char *rel, pw_op op, bool is_dir, bool subtree);
/* Writes to the option's value (-o FILE), if given ("-" is standard output). */
bool bw_tw_opt(bw_cmd *k, char sc, const char *lname, pw_op op, bool is_dir, bool subtree);
void bw_unknown(bw_cmd *k, const char *why);
/* A write outside the project that no word names ("~/.cargo", "(site-packages)"). */
void bw_outside(bw_cmd *k, const char *what, const char *why);
/* The label targets are reported under: A, or "A B" ("git commit", "sed -i"). */
void bw_set_label(bw_cmd *k, const char *a, const char *b);
/* Does W name a directory: a trailing '/', "." or "..", or an existing one? */
bool bw_arg_is_dir(bw_cmd *k, const bw_word *w);

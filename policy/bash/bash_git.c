/* SPDX-License-Identifier: MIT */
/*
 * git (bash_git.h): ONE table of subcommands (git_subs[] below), one row per subcommand,
 * naming what it writes: nothing, the repository (.git), the work tree, or a handler that
 * reads its arguments. The repository is found from the cwd up, as git finds it.
 */
#include <string.h>

#include "bash_cmd.h"
#include "bash_git.h"
#include "bash_path.h"
#include "bash_targets.h"
#include "pw_limits.h"
#include "util.h"

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
			bw_tw_lit(k, ".git", PW_OP_WRITE, true, true);
		if (which & GIT_TREE)
			bw_tw_lit(k, ".", PW_OP_WRITE, true, true);
		return;
	}
	if (!found && k->c->opts->root_fd >= 0 && (which & GIT_DIR)) {
		bw_outside(k, ".git", "the repository is not inside the project (no .git found)");
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

/* ---- the subcommands ---- */

typedef struct git_sub {
	const char *name;
	void (*fn)(bw_cmd *k, const char *name); /* K: argv[0] is the subcommand, options scanned */
} git_sub;

/* branch/tag: writes refs only when it makes, moves, copies or deletes one. */
static void g_branch(bw_cmd *k, const char *name)
{
	bool change = k->n_pos > 0 || bw_opt_has(k, 'd', "delete") || bw_opt_has(k, 'D', NULL) ||
		      bw_opt_has(k, 'm', "move") || bw_opt_has(k, 'M', NULL) ||
		      bw_opt_has(k, 'c', "copy") || bw_opt_has(k, 'C', NULL) ||
		      bw_opt_has(k, 'f', "force") || bw_opt_has(k, 'u', "set-upstream-to") ||
		      bw_opt_has(k, 'a', "annotate") || bw_opt_has(k, 's', "sign");
	if (bw_opt_has(k, 'l', "list") || bw_opt_has(k, 0, "contains") || !change)
		return;
	git_targets(k, GIT_DIR, NULL);
}

static const char *git_action(const bw_cmd *k)
{
	return k->n_pos > 0 && k->pos[0]->lit ? k->pos[0]->lit : "";
}

static void g_remote(bw_cmd *k, const char *name)
{
	const char *a = git_action(k);
	if (!a[0] || streq(a, "show") || streq(a, "get-url"))
		return;
	git_targets(k, GIT_DIR, "config");
}

static void g_stash(bw_cmd *k, const char *name)
{
	const char *a = git_action(k);
	if (streq(a, "list") || streq(a, "show"))
		return;
	git_targets(k, GIT_DIR | GIT_TREE, NULL);
}

static void g_config(bw_cmd *k, const char *name)
{
	if (bw_opt_has(k, 0, "global") || bw_opt_has(k, 0, "system")) {
		bw_outside(k, "~/.gitconfig", "git's global configuration");
		return;
	}
	if (bw_opt_has(k, 0, "get") || bw_opt_has(k, 0, "get-all") || bw_opt_has(k, 'l', "list") ||
	    bw_opt_has(k, 0, "get-regexp") || k->n_pos <= 1)
		return;
	git_targets(k, GIT_DIR, "config");
}

static void g_rm_mv(bw_cmd *k, const char *name)
{
	if (!bw_opt_has(k, 0, "cached") && !bw_opt_has(k, 'n', "dry-run")) {
		bool rm = streq(name, "rm");
		bool rec = bw_opt_has(k, 'r', NULL);
		for (size_t i = 0; i < k->n_pos; i++)
			bw_tw(k, k->pos[i], rm ? PW_OP_UNLINK : PW_OP_RENAME,
			      rec && bw_arg_is_dir(k, k->pos[i]), rec);
	}
	git_targets(k, GIT_DIR, NULL);
}

/* git restore PATHS / git checkout [REV] -- PATHS: only those paths. */
static void g_restore(bw_cmd *k, const char *name)
{
	size_t first = 0;
	bool paths = streq(name, "restore") && k->n_pos > 0;
	for (size_t i = 1; i < k->argc; i++)
		if (k->argv[i].lit && streq(k->argv[i].lit, "--")) {
			paths = true;
			for (first = 0; first < k->n_pos && k->pos[first] <= &k->argv[i];)
				first++;
		}
	if (paths && !bw_opt_has(k, 'S', "staged")) {
		for (size_t i = first; i < k->n_pos; i++)
			bw_tw(k, k->pos[i], PW_OP_OPEN_WRITE, bw_arg_is_dir(k, k->pos[i]),
			      bw_arg_is_dir(k, k->pos[i]));
		return;
	}
	git_targets(k, (paths ? 0 : GIT_TREE) | GIT_DIR, NULL);
}

static void g_reset(bw_cmd *k, const char *name)
{
	bool tree =
	    bw_opt_has(k, 0, "hard") || bw_opt_has(k, 0, "merge") || bw_opt_has(k, 0, "keep");
	git_targets(k, GIT_DIR | (tree ? GIT_TREE : 0), NULL);
}

static void g_clean(bw_cmd *k, const char *name)
{
	if (bw_opt_has(k, 'n', "dry-run"))
		return;
	if (k->n_pos == 0) {
		git_targets(k, GIT_TREE, NULL);
		return;
	}
	for (size_t i = 0; i < k->n_pos; i++)
		bw_tw(k, k->pos[i], PW_OP_UNLINK, true, true);
}

static void g_apply(bw_cmd *k, const char *name)
{
	if (bw_opt_has(k, 0, "check") || bw_opt_has(k, 0, "stat") || bw_opt_has(k, 0, "numstat"))
		return;
	git_targets(k,
		    bw_opt_has(k, 0, "cached")	? GIT_DIR
		    : bw_opt_has(k, 0, "index") ? GIT_DIR | GIT_TREE
						: GIT_TREE,
		    NULL);
}

/* clone URL [DIR]: DIR, or the URL's last component without ".git". */
static void g_clone(bw_cmd *k, const char *name)
{
	if (k->n_pos >= 2) {
		bw_tw(k, k->pos[1], PW_OP_MKDIR, true, true);
		return;
	}
	if (k->n_pos == 0)
		return;
	if (!k->pos[0]->lit || k->pos[0]->unknown) {
		bw_unknown(k, "a clone destination the analysis cannot tell");
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
		bw_tw_lit(k, b, PW_OP_MKDIR, true, true);
	else
		bw_unknown(k, "a clone destination the analysis cannot tell");
}

static void g_init(bw_cmd *k, const char *name)
{
	if (k->n_pos > 0)
		bw_tw(k, k->pos[0], PW_OP_MKDIR, true, true);
	else
		bw_tw_lit(k, ".git", PW_OP_MKDIR, true, true);
}

static void g_worktree(bw_cmd *k, const char *name)
{
	const char *a = git_action(k);
	if (streq(a, "list"))
		return;
	if (streq(a, "add") && k->n_pos > 1)
		bw_tw(k, k->pos[1], PW_OP_MKDIR, true, true);
	git_targets(k, GIT_DIR, NULL);
}

static void g_archive(bw_cmd *k, const char *name)
{
	bw_tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
}

static void g_format_patch(bw_cmd *k, const char *name)
{
	if (!bw_opt_has(k, 0, "stdout") &&
	    !bw_tw_opt(k, 'o', "output-directory", PW_OP_CREATE, true, true))
		bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* Whatever their arguments: subcommands that write nothing, the repository only, or the
 * repository and the work tree. */
static const char git_reads[] =
    "|status|log|diff|show|grep|blame|rev-parse|ls-files|ls-tree|ls-remote|describe|shortlog|"
    "cat-file|rev-list|whatchanged|help|version|show-ref|for-each-ref|name-rev|merge-base|"
    "check-ignore|var|count-objects|cherry|range-diff|diff-tree|diff-files|diff-index|"
    "verify-commit|verify-tag|fsck|";
static const char git_writes_repo[] =
    "|add|commit|fetch|gc|notes|prune|repack|update-index|reflog|commit-tree|update-ref|"
    "symbolic-ref|pack-refs|maintenance|";
static const char git_writes_both[] =
    "|switch|merge|rebase|pull|am|cherry-pick|revert|bisect|submodule|sparse-checkout|read-tree|"
    "checkout-index|";

/* What the others write depends on their arguments. A subcommand in none of these is
 * unknown. */
static const git_sub git_subs[] = {
    {"branch", g_branch},
    {"tag", g_branch},
    {"remote", g_remote},
    {"stash", g_stash},
    {"config", g_config},
    {"rm", g_rm_mv},
    {"mv", g_rm_mv},
    {"restore", g_restore},
    {"checkout", g_restore},
    {"reset", g_reset},
    {"clean", g_clean},
    {"apply", g_apply},
    {"clone", g_clone},
    {"init", g_init},
    {"worktree", g_worktree},
    {"archive", g_archive},
    {"format-patch", g_format_patch},
};

static void git_sub_dispatch(bw_cmd *k, const char *sub)
{
	size_t n = strlen(sub);
	if (pw_list_has(git_reads, '|', sub, n))
		return;
	if (pw_list_has(git_writes_repo, '|', sub, n)) {
		git_targets(k, GIT_DIR, NULL);
		return;
	}
	if (pw_list_has(git_writes_both, '|', sub, n)) {
		git_targets(k, GIT_DIR | GIT_TREE, NULL);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(git_subs); i++)
		if (streq(git_subs[i].name, sub)) {
			git_subs[i].fn(k, sub);
			return;
		}
	bw_unknown(k, "a git subcommand the analysis does not know");
}

void bw_h_git(bw_cmd *k)
{
	size_t i = 1;
	const bw_word *dir = NULL;
	for (; i < k->argc; i++) {
		const char *s = k->argv[i].lit;
		if (!s || k->argv[i].unknown) {
			bw_unknown(k, "a git argument the analysis cannot resolve");
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
			bw_unknown(k, "git with an explicit --git-dir/--work-tree");
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
		    .w = &git_sub_spec,
		    .dispatch = k->dispatch};
	bw_set_label(&s, "git", sub);
	bw_scan(&s, &git_sub_spec, 1, false);

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
	bw_cmd_done(&s);
}

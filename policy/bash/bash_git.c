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
	bool change = k->n_pos > 0 || bw_opt_has(k, 'd', "delete") || bw_opt_has(k, 'D', NULL) ||
		      bw_opt_has(k, 'm', "move") || bw_opt_has(k, 'M', NULL) || bw_opt_has(k, 'c', "copy") ||
		      bw_opt_has(k, 'C', NULL) || bw_opt_has(k, 'f', "force") ||
		      bw_opt_has(k, 'u', "set-upstream-to") || bw_opt_has(k, 'a', "annotate") ||
		      bw_opt_has(k, 's', "sign");
	if (bw_opt_has(k, 'l', "list") || bw_opt_has(k, 0, "contains") || !change)
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
	if (bw_opt_has(k, 0, "global") || bw_opt_has(k, 0, "system")) {
		bw_outside(k, "~/.gitconfig", "git's global configuration");
		return;
	}
	if (bw_opt_has(k, 0, "get") || bw_opt_has(k, 0, "get-all") || bw_opt_has(k, 'l', "list") ||
	    bw_opt_has(k, 0, "get-regexp") || k->n_pos <= 1)
		return;
	git_targets(k, GIT_DIR, "config");
}

static void g_rm_mv(bw_cmd *k, const git_sub *g)
{
	if (!bw_opt_has(k, 0, "cached") && !bw_opt_has(k, 'n', "dry-run")) {
		bool rm = streq(g->name, "rm");
		bool rec = bw_opt_has(k, 'r', NULL);
		for (size_t i = 0; i < k->n_pos; i++)
			bw_tw(k, k->pos[i], rm ? PW_OP_UNLINK : PW_OP_RENAME,
			   rec && bw_arg_is_dir(k, k->pos[i]), rec);
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
	if (paths && !bw_opt_has(k, 'S', "staged")) {
		for (size_t i = first; i < k->n_pos; i++)
			bw_tw(k, k->pos[i], PW_OP_OPEN_WRITE, bw_arg_is_dir(k, k->pos[i]),
			   bw_arg_is_dir(k, k->pos[i]));
		return;
	}
	git_targets(k, (paths ? 0 : GIT_TREE) | GIT_DIR, NULL);
}

static void g_reset(bw_cmd *k, const git_sub *g)
{
	bool tree = bw_opt_has(k, 0, "hard") || bw_opt_has(k, 0, "merge") || bw_opt_has(k, 0, "keep");
	git_targets(k, GIT_DIR | (tree ? GIT_TREE : 0), NULL);
}

static void g_clean(bw_cmd *k, const git_sub *g)
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

static void g_apply(bw_cmd *k, const git_sub *g)
{
	if (bw_opt_has(k, 0, "check") || bw_opt_has(k, 0, "stat") || bw_opt_has(k, 0, "numstat"))
		return;
	git_targets(k,
		    bw_opt_has(k, 0, "cached")  ? GIT_DIR
		    : bw_opt_has(k, 0, "index") ? GIT_DIR | GIT_TREE
					     : GIT_TREE,
		    NULL);
}

/* clone URL [DIR]: DIR, or the URL's last component without ".git". */
static void g_clone(bw_cmd *k, const git_sub *g)
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

static void g_init(bw_cmd *k, const git_sub *g)
{
	if (k->n_pos > 0)
		bw_tw(k, k->pos[0], PW_OP_MKDIR, true, true);
	else
		bw_tw_lit(k, ".git", PW_OP_MKDIR, true, true);
}

static void g_worktree(bw_cmd *k, const git_sub *g)
{
	const char *a = git_action(k);
	if (streq(a, "list"))
		return;
	if (streq(a, "add") && k->n_pos > 1)
		bw_tw(k, k->pos[1], PW_OP_MKDIR, true, true);
	git_targets(k, GIT_DIR, NULL);
}

static void g_archive(bw_cmd *k, const git_sub *g)
{
	bw_tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
}

static void g_format_patch(bw_cmd *k, const git_sub *g)
{
	if (!bw_opt_has(k, 0, "stdout") &&
	    !bw_tw_opt(k, 'o', "output-directory", PW_OP_CREATE, true, true))
		bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
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

/* SPDX-License-Identifier: MIT */
/* Build tools and package managers (bash_builds.h): the directories, lock files and
 * manifests they write; installs outside the project; scripts and recipes they run, unknown. */
#include <string.h>

#include "bash_builds.h"
#include "bash_cmd.h"
#include "bash_path.h"
#include "util.h"

/* make/ninja: the recipes are unknown; conservatively the whole directory (-C DIR). */
void bw_h_make(bw_cmd *k)
{
	if (bw_opt_has(k, 'n', "dry-run") || bw_opt_has(k, 'q', "question") ||
	    bw_opt_has(k, 0, "just-print") || bw_opt_has(k, 0, "version") ||
	    bw_opt_has(k, 0, "help"))
		return;
	if (!bw_tw_opt(k, 'C', "directory", PW_OP_CREATE, true, true))
		bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* cmake --build DIR / -B DIR / configure here; cmake -E runs arbitrary tools. */
void bw_h_cmake(bw_cmd *k)
{
	if (bw_opt_has(k, 'E', NULL) || bw_opt_has(k, 'P', NULL)) {
		bw_unknown(k, "cmake -E/-P runs commands the analysis does not follow");
		return;
	}
	if (bw_opt_has(k, 0, "version") || bw_opt_has(k, 0, "help"))
		return;
	if (bw_opt_has(k, 0, "install")) {
		bw_outside(k, "(install prefix)", "installs outside the project");
		return;
	}
	if (bw_tw_opt(k, 0, "build", PW_OP_CREATE, true, true))
		return;
	if (!bw_tw_opt(k, 'B', NULL, PW_OP_CREATE, true, true))
		bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* cargo: build & co write target/ and Cargo.lock; run/install go further. */
void bw_h_cargo(bw_cmd *k)
{
	const char *sub = k->n_pos > 0 && k->pos[0]->lit ? k->pos[0]->lit : NULL;
	static const char *const builds[] = {
	    "build", "b",      "check", "c",	 "test",   "t",	    "doc",
	    "d",     "clippy", "bench", "clean", "update", "fetch", "generate-lockfile",
	    NULL};
	if (!sub || bw_opt_has(k, 'V', "version") || bw_opt_has(k, 'h', "help"))
		return;
	bw_set_label(k, "cargo", sub);
	if (streq(sub, "install")) {
		bw_outside(k, "~/.cargo", "installs outside the project");
		return;
	}
	if (streq(sub, "fmt")) {
		bw_tw_lit(k, ".", PW_OP_OPEN_WRITE, true, true);
		return;
	}
	bool known = false;
	for (size_t i = 0; builds[i]; i++)
		known |= streq(sub, builds[i]);
	if (!known && !streq(sub, "run") && !streq(sub, "r")) {
		bw_unknown(k, "a cargo subcommand the analysis does not know");
		return;
	}
	if (!bw_tw_opt(k, 0, "target-dir", PW_OP_CREATE, true, true))
		bw_tw_lit(k, "target", PW_OP_CREATE, true, true);
	bw_tw_lit(k, "Cargo.lock", PW_OP_OPEN_WRITE, false, false);
	if (streq(sub, "run") || streq(sub, "r"))
		bw_unknown(k, "runs the program it builds");
}

/* go build (-o FILE, or a binary here), go mod tidy, go fmt; install writes outside. */
void bw_h_go(bw_cmd *k)
{
	const char *sub = k->n_pos > 0 && k->pos[0]->lit ? k->pos[0]->lit : NULL;
	if (!sub)
		return;
	bw_set_label(k, "go", sub);
	if (streq(sub, "build")) {
		if (!bw_tw_opt(k, 'o', NULL, PW_OP_CREATE, false, false))
			bw_tw_lit(k, ".", PW_OP_CREATE, true, false);
	} else if (streq(sub, "install") || streq(sub, "get")) {
		bw_outside(k, "$GOPATH", "installs outside the project");
		if (streq(sub, "get")) {
			bw_tw_lit(k, "go.mod", PW_OP_OPEN_WRITE, false, false);
			bw_tw_lit(k, "go.sum", PW_OP_OPEN_WRITE, false, false);
		}
	} else if (streq(sub, "mod")) {
		const char *m = k->n_pos > 1 && k->pos[1]->lit ? k->pos[1]->lit : "";
		if (streq(m, "tidy") || streq(m, "edit") || streq(m, "init")) {
			bw_tw_lit(k, "go.mod", PW_OP_OPEN_WRITE, false, false);
			bw_tw_lit(k, "go.sum", PW_OP_OPEN_WRITE, false, false);
		} else if (streq(m, "vendor")) {
			bw_tw_lit(k, "vendor", PW_OP_CREATE, true, true);
		} else if (!streq(m, "graph") && !streq(m, "verify") && !streq(m, "why")) {
			bw_unknown(k, "a go mod subcommand the analysis does not know");
		}
	} else if (streq(sub, "fmt")) {
		bw_tw_lit(k, ".", PW_OP_OPEN_WRITE, true, true);
	} else if (streq(sub, "vet") || streq(sub, "version") || streq(sub, "env") ||
		   streq(sub, "list") || streq(sub, "doc") || streq(sub, "help")) {
		/* nothing in the project */
	} else if (streq(sub, "test")) {
		bw_unknown(k, "runs tests the analysis does not follow");
	} else {
		bw_unknown(k, "a go subcommand the analysis does not know");
	}
}

/* pip install: site-packages (outside), or --target DIR. */
static void h_pip_args(bw_cmd *k, size_t sub_i)
{
	const char *sub = sub_i < k->n_pos && k->pos[sub_i]->lit ? k->pos[sub_i]->lit : NULL;
	if (!sub)
		return;
	bw_set_label(k, "pip", sub);
	if (streq(sub, "install") || streq(sub, "uninstall") || streq(sub, "download") ||
	    streq(sub, "wheel")) {
		if (bw_tw_opt(k, 't', "target", PW_OP_CREATE, true, true) ||
		    bw_tw_opt(k, 'd', "dest", PW_OP_CREATE, true, true) ||
		    bw_tw_opt(k, 'w', "wheel-dir", PW_OP_CREATE, true, true))
			return;
		bw_outside(k, "(site-packages)", "installs into the Python environment");
		return;
	}
	if (streq(sub, "list") || streq(sub, "show") || streq(sub, "freeze") ||
	    streq(sub, "check") || streq(sub, "help") || streq(sub, "search"))
		return;
	bw_unknown(k, "a pip subcommand the analysis does not know");
}

void bw_h_pip(bw_cmd *k)
{
	h_pip_args(k, 0);
}

/* python: -m pip / -m venv DIR are understood; anything else runs code. */
void bw_h_python(bw_cmd *k)
{
	bw_word tmp = {0};
	const bw_word *m = bw_opt_word(k, bw_opt_get(k, 'm', NULL), &tmp);
	if (bw_opt_has(k, 'V', "version") && !m && k->n_pos == 0)
		goto out;
	if (m && m->lit && streq(m->lit, "pip")) {
		h_pip_args(k, 0);
	} else if (m && m->lit && streq(m->lit, "venv") && k->n_pos > 0) {
		bw_set_label(k, "python -m", "venv");
		bw_tw(k, k->pos[k->n_pos - 1], PW_OP_MKDIR, true, true);
	} else if (m && m->lit && (streq(m->lit, "json.tool") || streq(m->lit, "py_compile"))) {
		/* harmless modules */
	} else {
		bw_unknown(k, "runs Python code the analysis does not follow");
	}
out:
	bw_word_done(&tmp);
}

/* npm/pnpm/yarn/bun: installs write node_modules, package.json and the lock file; scripts
 * are unknown. */
void bw_h_node_pkg(bw_cmd *k)
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
	bw_set_label(k, tool, sub);
	for (size_t i = 0; reads[i]; i++)
		if (streq(sub, reads[i]))
			return;
	bool w = false;
	for (size_t i = 0; writes[i]; i++)
		w |= streq(sub, writes[i]);
	if (!w) {
		bw_unknown(k, "runs package scripts the analysis does not follow");
		return;
	}
	if (bw_opt_has(k, 'g', "global")) {
		bw_outside(k, "(global node_modules)", "installs outside the project");
		return;
	}
	const char *lock = streq(tool, "pnpm")	 ? "pnpm-lock.yaml"
			   : streq(tool, "yarn") ? "yarn.lock"
			   : streq(tool, "bun")	 ? "bun.lockb"
						 : "package-lock.json";
	bw_tw_lit(k, "node_modules", PW_OP_CREATE, true, true);
	bw_tw_lit(k, "package.json", PW_OP_OPEN_WRITE, false, false);
	bw_tw_lit(k, lock, PW_OP_OPEN_WRITE, false, false);
}

/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the bash pre-flight (policy/bash/): any bytes as a command line. The
 * first byte picks the options (working directory, tree access); the rest is the command.
 * Besides crashes, leaks and undefined behaviour, it aborts when a promise breaks:
 *   - a command that did not parse is never "allowed";
 *   - under a policy that writes nothing, a command with a write target inside the
 *     project is never "allowed";
 *   - the JSON form can always be built.
 * Globs expand against a small tree made once per process in a temporary directory.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bash/bash.h"
#include "fuzz.h"
#include "pw_limits.h"
#include "policy.h"
#include "util.h"

static char tree_path[64];
static int tree_dir = -1;

/* The tree's names, children before parents: what remove_tree() takes away at exit, so a
 * corpus replay in CI leaves no directory behind in /tmp. */
static const struct {
	const char *name;
	int flags;
} tree_names[] = {
    {"src/a.c", 0},	    {"docs/design/x.md", 0}, {"up", 0}, {"docs/design", AT_REMOVEDIR},
    {"docs", AT_REMOVEDIR}, {"src", AT_REMOVEDIR},
};

static void remove_tree(void)
{
	for (size_t i = 0; i < sizeof(tree_names) / sizeof(tree_names[0]); i++)
		unlinkat(tree_dir, tree_names[i].name, tree_names[i].flags);
	close(tree_dir);
	rmdir(tree_path);
}

static int tree_fd(char *root, size_t size)
{
	if (tree_dir < 0) {
		snprintf(tree_path, sizeof(tree_path), "/tmp/pw-fuzz-bash-XXXXXX");
		if (!mkdtemp(tree_path))
			return negative_errno();
		int fd = open(tree_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return negative_errno();
		mkdirat(fd, "src", 0755);
		mkdirat(fd, "docs", 0755);
		mkdirat(fd, "docs/design", 0755);
		close(openat(fd, "src/a.c", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
		close(openat(fd, "docs/design/x.md", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
		symlinkat("/", fd, "up");
		tree_dir = fd;
		atexit(remove_tree);
	}
	snprintf(root, size, "%s", tree_path);
	return tree_dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const cwds[] = {"", "src", "docs/design", "nope/deeper"};
	char root[64];
	pw_bash_result *r = NULL;

	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	int fd = (sel & 4) ? tree_fd(root, sizeof(root)) : -1;
	pw_bash_opts o = {
	    .root_fd = fd,
	    .root_path = fd >= 0 ? root : "/project",
	    .cwd = cwds[sel & 3],
	};
	int k = pw_bash_analyze((const char *)data + 1, size - 1, &o, &r);
	if (k < 0) {
		if (k != -EINVAL && k != -E2BIG && k != -ENOMEM)
			abort();
		return 0;
	}

	pw_policy *p = pw_policy_new_fail_closed("fuzz", "fuzzing");
	if (p) {
		pw_bash_decide(r, p);
		pw_bash_status v = pw_bash_verdict(r);
		if (pw_bash_result_heuristic(r) && v == PW_BASH_ALLOWED)
			abort();
		for (size_t i = 0; i < pw_bash_target_count(r); i++) {
			const pw_bash_target *t = pw_bash_target_get(r, i);
			if (t->access == PW_BASH_WRITE && t->kind == PW_BASH_KIND_PATH &&
			    v == PW_BASH_ALLOWED)
				abort();
			if ((t->kind == PW_BASH_KIND_COMMAND) != (t->path == NULL))
				abort();
		}
		pw_policy_unref(p);
	}
	json_t *j = pw_bash_result_json(r);
	if (!j)
		abort();
	json_decref(j);
	pw_bash_result_free(r);
	return 0;
}

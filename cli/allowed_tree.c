/* SPDX-License-Identifier: MIT */
/*
 * piworkfs allowed --tree: the project's tree as `tree` draws it, each entry marked with
 * what the mode lets you do to it: W writable, R read-only, H hidden, P protected (coloured
 * on a terminal). A directory whose whole subtree shares its verdict is one line with a
 * count of its files, so a project of thousands of files reads in a screen. --why adds the
 * deciding rule; --json gives the same entries as data.
 *
 * The walk goes through descriptors (openat, O_NOFOLLOW: symbolic links are listed, never
 * followed), skips names starting with '.' as `tree` does, never enters a hidden directory
 * (the view shows nothing of it), and stops at PW_ALLOWED_TREE_MAX entries. Every verdict
 * comes from pw_policy_decide(), the one decision the view makes too.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "allowed.h"
#include "cli.h"
#include "output.h"
#include "report.h"
#include "pw_limits.h"

typedef enum verdict { V_WRITABLE, V_READ_ONLY, V_HIDDEN, V_PROTECTED } verdict;

static const char verdict_letter[] = {'W', 'R', 'H', 'P'};
static const char *const verdict_word[] = {"writable", "read-only", "hidden", "protected"};
static const char *const verdict_color[] = {"\033[32m", "", "\033[2m", "\033[33m"};

typedef struct node {
	char *name;
	bool dir;
	verdict v;
	pw_decision d;
	bool uniform; /* the whole subtree shares V */
	size_t files; /* regular files and links in the subtree (itself, for a file) */
	struct node *children;
	size_t n_children;
} node;

typedef struct tree_ctx {
	const pw_cli_project *p;
	const pw_policy *policy;
	size_t entries;
	bool truncated;
	bool why, color;
} tree_ctx;

static void node_done(node *n)
{
	PW_FREE_ARRAY(n->children, n->n_children, node_done);
	free(n->name);
}

static void judge(const tree_ctx *x, const char *path, bool dir, node *n)
{
	pw_policy_decide(x->policy, PW_OP_WRITE, path, dir, &n->d);
	if (n->d.reason == PW_REASON_HIDDEN)
		n->v = V_HIDDEN;
	else if (n->d.allowed)
		n->v = V_WRITABLE;
	else if (n->d.reason == PW_REASON_PROTECTED)
		n->v = V_PROTECTED;
	else
		n->v = V_READ_ONLY;
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp(((const node *)a)->name, ((const node *)b)->name);
}

/* Reads the directory open at DFD (taken over), PATH[0..LEN) project-relative, into N. */
static int walk(tree_ctx *x, int dfd, char *path, size_t len, unsigned depth, node *n)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	size_t cap = 0;
	int r = 0;

	if (!d) {
		close(dfd);
		return 0; /* unreadable: shown without children */
	}
	while ((de = readdir(d)) && r >= 0) {
		const char *name = de->d_name;
		size_t nlen = strlen(name);
		struct stat st;

		if (name[0] == '.')
			continue;
		if (x->entries >= PW_ALLOWED_TREE_MAX) {
			x->truncated = true;
			break;
		}
		if (len + 1 + nlen + 1 > PW_PATH_MAX ||
		    fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (n->n_children == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			node *c = reallocarray(n->children, ncap, sizeof(*c));
			if (!c) {
				r = -ENOMEM;
				break;
			}
			n->children = c;
			cap = ncap;
		}
		node *c = &n->children[n->n_children];
		*c = (node){.name = strdup(name), .dir = S_ISDIR(st.st_mode), .uniform = true};
		if (!c->name) {
			r = -ENOMEM;
			break;
		}
		n->n_children++;
		x->entries++;
		size_t clen = len ? len + 1 + nlen : nlen;
		if (len)
			path[len] = '/';
		memcpy(path + (len ? len + 1 : 0), name, nlen + 1);
		judge(x, path, c->dir, c);
		if (c->dir && c->v != V_HIDDEN && depth + 1 < PW_PATH_DEPTH_MAX) {
			int cfd =
			    openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd >= 0)
				r = walk(x, cfd, path, clen, depth + 1, c);
		} else if (!c->dir) {
			c->files = 1;
		}
		path[len] = '\0';
	}
	closedir(d);
	if (r < 0)
		return r;
	qsort(n->children, n->n_children, sizeof(node), cmp_node);
	for (size_t i = 0; i < n->n_children; i++) {
		n->files += n->children[i].files;
		if (!n->children[i].uniform || n->children[i].v != n->v)
			n->uniform = false;
	}
	return 0;
}

static void print_why(const tree_ctx *x, const node *n)
{
	char buf[PW_PATH_MAX];
	const char *file =
	    n->d.rule ? pw_cli_display_file(x->p, n->d.rule->file, buf, sizeof(buf)) : NULL;
	_cleanup_free_ char *text = pw_report_decision_text_in(&n->d, x->policy, file);

	if (text)
		printf("  (%s)", text);
}

static void print_entry(const tree_ctx *x, const node *n, const char *prefix, bool last, bool top)
{
	bool collapsed = n->dir && n->uniform && n->n_children > 0;

	if (x->color && verdict_color[n->v][0])
		printf("%s%c\033[0m  ", verdict_color[n->v], verdict_letter[n->v]);
	else
		printf("%c  ", verdict_letter[n->v]);
	printf("%s%s%s%s", prefix, top ? "" : last ? "└── " : "├── ", n->name, n->dir ? "/" : "");
	if (collapsed)
		printf("  (%zu file%s)", n->files, n->files == 1 ? "" : "s");
	else if (n->dir && n->v == V_HIDDEN)
		printf("  (not shown in the view)");
	if (x->why)
		print_why(x, n);
	putchar('\n');
	if (!n->dir || collapsed)
		return;
	_cleanup_free_ char *sub = NULL;
	if (asprintf(&sub, "%s%s", prefix, top ? "" : last ? "    " : "│   ") < 0)
		return;
	for (size_t i = 0; i < n->n_children; i++)
		print_entry(x, &n->children[i], sub, i + 1 == n->n_children, false);
}

static int json_entries(const tree_ctx *x, const node *n, const char *path, json_t *arr)
{
	bool collapsed = n->dir && n->uniform && n->n_children > 0;
	json_t *rule = json_null();

	if (n->d.rule)
		rule = pw_report_rule(n->d.rule);
	json_t *o = json_pack("{s:s,s:s,s:s,s:b,s:I,s:o}", "path", path[0] ? path : ".", "type",
			      n->dir ? "dir" : "file", "verdict", verdict_word[n->v], "collapsed",
			      collapsed, "files", (json_int_t)n->files, "rule", rule);
	if (!o || json_array_append_new(arr, o) < 0)
		return -ENOMEM;
	if (!n->dir || collapsed)
		return 0;
	for (size_t i = 0; i < n->n_children; i++) {
		_cleanup_free_ char *child = NULL;
		if (asprintf(&child, "%s%s%s", path, path[0] ? "/" : "", n->children[i].name) < 0 ||
		    json_entries(x, &n->children[i], child, arr) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * What an untrusted project's own layer declares and the mode therefore ignores: the allow
 * and token rules the mode would have if the project were trusted, appended to ARR as rule
 * objects (docs/JSON.md).
 */
static int ignored_widening(const pw_cli_project *p, const pw_policy *policy, json_t *arr)
{
	pw_cli_project trusted = *p;
	_cleanup_modeset_ pw_modeset *ms = NULL;
	_cleanup_policy_ pw_policy *wide = NULL;

	if (p->trusted)
		return 0;
	trusted.trusted = true;
	if (pw_cli_load_modes(&trusted, &ms, NULL) < 0 ||
	    pw_policy_compile(ms, pw_policy_mode_name(policy), &wide) < 0)
		return 0;
	for (size_t i = 0; i < pw_policy_rule_count(wide); i++) {
		const pw_rule *r = pw_policy_rule(wide, i);
		bool known = false;
		if (r->kind != PW_RULE_ALLOW && r->kind != PW_RULE_TOKEN)
			continue;
		for (size_t j = 0; j < pw_policy_rule_count(policy) && !known; j++) {
			const pw_rule *q = pw_policy_rule(policy, j);
			known = q->kind == r->kind && streq(q->pattern, r->pattern);
		}
		if (known)
			continue;
		json_t *o = pw_report_rule(r);
		if (!o || json_array_append_new(arr, o) < 0)
			return -ENOMEM;
	}
	return 0;
}

int pw_allowed_tree(const pw_cli_project *p, const pw_policy *policy, const char *start, bool why,
		    bool json)
{
	tree_ctx x = {.p = p, .policy = policy, .why = why, .color = !json && pw_use_color(stdout)};
	_cleanup_json_ json_t *ignored = json_array();
	char path[PW_PATH_MAX];
	node root = {.dir = true, .uniform = true};
	int fd, r;

	if (!ignored || ignored_widening(p, policy, ignored) < 0)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s", start);
	root.name = strdup(start[0] ? start : ".");
	if (!root.name)
		return -ENOMEM;
	judge(&x, start, true, &root);
	fd = openat(AT_FDCWD, p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && start[0]) {
		int sub = openat(fd, start, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = sub;
	}
	if (fd < 0) {
		r = negative_errno();
		node_done(&root);
		return r;
	}
	r = root.v == V_HIDDEN ? (close(fd), 0) : walk(&x, fd, path, strlen(path), 0, &root);
	if (r < 0) {
		node_done(&root);
		return r;
	}
	if (json) {
		json_t *o = json_object(), *entries = json_array();
		r = o && entries ? json_entries(&x, &root, start, entries) : -ENOMEM;
		if (r < 0 ||
		    json_object_set_new(o, "project", json_string(pw_cli_project_path(p))) < 0 ||
		    json_object_set_new(o, "mode", json_string(pw_policy_mode_name(policy))) < 0 ||
		    json_object_set_new(o, "trusted", json_boolean(p->trusted)) < 0 ||
		    json_object_set_new(o, "ignored_widening", json_incref(ignored)) < 0 ||
		    json_object_set_new(o, "truncated", json_boolean(x.truncated)) < 0 ||
		    json_object_set_new(o, "tree", TAKE_PTR(entries)) < 0) {
			json_decref(entries);
			json_decref(o);
			node_done(&root);
			return -ENOMEM;
		}
		node_done(&root);
		return pw_print_json(o);
	}
	printf("mode %s in %s%s\n", pw_policy_mode_name(policy), pw_cli_project_path(p),
	       pw_policy_is_fail_closed(policy) ? " (fails closed: nothing is writable)" : "");
	if (json_array_size(ignored) > 0) {
		size_t i;
		json_t *w;
		printf("untrusted project: this mode ignores what its own layer widens:");
		json_array_foreach(ignored, i, w)
		{
			char buf[PW_PATH_MAX];
			const char *file = json_string_value(json_object_get(w, "file"));
			printf("%s %s %s (%s:%lld)", i ? "," : "",
			       json_string_value(json_object_get(w, "kind")),
			       json_string_value(json_object_get(w, "pattern")),
			       file ? pw_cli_display_file(p, file, buf, sizeof(buf)) : "?",
			       (long long)json_integer_value(json_object_get(w, "line")));
		}
		printf("; 'piworkfs trust' lets it\n");
	}
	printf("legend: W writable, R read-only, H hidden, P protected; dot files not shown\n\n");
	print_entry(&x, &root, "", true, true);
	if (x.truncated)
		printf("(stopped after %d entries)\n", PW_ALLOWED_TREE_MAX);
	node_done(&root);
	return 0;
}

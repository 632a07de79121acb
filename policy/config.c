/* SPDX-License-Identifier: MIT */
/*
 * config.yaml, in the global directory and in PROJECT/.piworkfs/:
 *
 *   protected: [globs]     # more protected paths (none of the defaults can be removed)
 *   design:
 *     tokens: [paths]      # the project's design token files
 *   plans: docs/plans      # the plans folder: a directory in the project, not a glob
 *
 * Like mode files, every problem is reported with file:line:column and key; an error skips
 * the whole file (and modeset.c then fails every mode closed: a protection that cannot be
 * read must not silently stop applying); an unknown key is only a warning unless it is a
 * near miss of a known one ("protcted"), which is an error with a hint. Whether a project's
 * design.tokens is honoured (trust) is decided by the caller, which gets the key's position for its
 * warning.
 */
#include <errno.h>
#include <stdarg.h>

#include "pw_limits.h"
#include "config.h"
#include "path.h"
#include "util.h"
#include "yamlx.h"

typedef struct config_parser {
	pw_yaml_parse y; /* no stem: a config's diagnostics name no mode */
	pw_config *c;
} config_parser;

/* An unknown key: an error with a hint when it is a near miss of one of KNOWN (a misspelt
 * "protected" would drop its protections without a word), else a warning. */
static int cp_unknown(config_parser *p, const pw_yx_node *k, const char *key,
		      const char *const *known)
{
	return pw_yaml_unknown(&p->y, k, key, known);
}

static const char *const root_keys[] = {"protected", "design", "plans", NULL};
static const char *const design_keys[] = {"tokens", NULL};

/* One key K of design (KEY is "design.K"). */
static int cp_design_key(const pw_yx_node *k, const pw_yx_node *val, const char *key, void *u)
{
	config_parser *p = u;

	if (!streq(k->text, "tokens"))
		return cp_unknown(p, k, key, design_keys);
	int r = pw_yaml_rules(&p->y, val, key, PW_RULE_TOKEN, &p->c->token_rules, &p->c->n_tokens);
	if (r > 0)
		p->c->tokens_key = (pw_mark){k->line, k->column};
	return r;
}

static int cp_design(config_parser *p, const pw_yx_node *v)
{
	return pw_yaml_map(&p->y, v, "design", "a mapping", cp_design_key, p);
}

/*
 * plans: a directory of the project, written as a plain path ("docs/plans", "/plans"): it
 * becomes the literal glob "/DIR/" "**", so glob characters, "..", the root itself and the
 * protected .piworkfs are refused rather than guessed at.
 */
static int cp_plans(config_parser *p, const pw_yx_node *k, const pw_yx_node *v)
{
	char norm[PW_PATH_MAX];
	const char *err = NULL;

	if (v->kind != PW_YX_SCALAR || pw_yx_is_null(v))
		return pw_yaml_error(&p->y, v, "plans", "expected a directory path, not %s",
				     pw_yx_describe(v));
	if (strpbrk(v->text, "*?[]\\!"))
		return pw_yaml_error(&p->y, v, "plans", "a directory path, not a glob: \"%.100s\"",
				     v->text);
	if (pw_path_normalize(v->text, strlen(v->text), norm, &err) < 0)
		return pw_yaml_error(&p->y, v, "plans", "invalid path \"%.100s\": %s", v->text,
				     err ? err : "not a path");
	if (norm[0] == '\0' || pw_relpath_beneath(norm, ".piworkfs") ||
	    strlen(norm) > PW_GLOB_LEN_MAX - 8)
		return pw_yaml_error(&p->y, v, "plans",
				     "\"%.100s\" cannot hold plans (the project root, "
				     ".piworkfs or too long)",
				     v->text);
	free(p->c->plans_dir);
	p->c->plans_dir = strdup(norm);
	if (!p->c->plans_dir)
		return -ENOMEM;
	p->c->plans_key = (pw_mark){k->line, k->column};
	return 0;
}

/* One key K of the config (KEY is K's text). */
static int cp_key(const pw_yx_node *k, const pw_yx_node *v, const char *key, void *u)
{
	config_parser *p = u;

	if (streq(key, "protected"))
		return pw_yaml_rules(&p->y, v, "protected", PW_RULE_PROTECTED,
				     &p->c->protected_rules, &p->c->n_protected);
	if (streq(key, "design"))
		return cp_design(p, v);
	if (streq(key, "plans"))
		return cp_plans(p, k, v);
	return cp_unknown(p, k, key, root_keys);
}

/* An empty config is a valid one (pw_yaml_map: nothing for a null root). */
static int cp_root(config_parser *p, const pw_yx_node *root)
{
	return pw_yaml_map(&p->y, root, NULL, "a mapping of keys", cp_key, p);
}

void pw_config_done(pw_config *c)
{
	pw_rules_free(c->protected_rules, c->n_protected);
	pw_rules_free(c->token_rules, c->n_tokens);
	free(c->plans_dir);
	*c = (pw_config){0};
}

int pw_config_parse(const char *file, const char *buf, size_t len, pw_layer layer, pw_warnings *w,
		    pw_config *ret)
{
	pw_config c = {0};
	config_parser p = {.y = {.file = file, .layer = layer, .w = w}, .c = &c};
	pw_yx_node *root = NULL;
	pw_yx_error yerr = {0};
	int r;

	if (memchr(buf, '\0', len)) {
		r = pw_warnings_add(w, NULL, PW_ERROR, file, 0, 0, NULL,
				    "the file holds a NUL byte");
		return r < 0 ? r : -EINVAL;
	}
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
		buf += 3;
		len -= 3;
	}
	r = pw_yx_parse(buf, len, 0, &root, &yerr);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		r = pw_warnings_add(w, NULL, PW_ERROR, file, yerr.line, yerr.column, NULL, "%s",
				    yerr.message);
		return r < 0 ? r : -EINVAL;
	}
	r = cp_root(&p, root);
	pw_yx_free(root);
	if (r < 0 || p.y.failed) {
		pw_config_done(&c);
		return r < 0 ? r : -EINVAL;
	}
	*ret = c;
	return 0;
}

int pw_config_load(const char *file, pw_layer layer, pw_warnings *w, pw_config *ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r;

	r = pw_yaml_read(file, NULL, true, w, &buf, &len);
	if (r == -ENOENT) {
		*ret = (pw_config){0};
		return 0;
	}
	return r < 0 ? r : pw_config_parse(file, buf, len, layer, w, ret);
}

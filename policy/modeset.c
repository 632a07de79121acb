/* SPDX-License-Identifier: MIT */
/*
 * The layered set of modes (mode.h has the model). Loading order:
 *
 *   built-in protected paths  <  bundled modes  <  global modes, global config.yaml
 *                             <  project modes, project config.yaml
 *
 * Bundled, global and trusted project layers have full authority: a mode replaces the
 * same-named one below it. An untrusted project may only tighten: its modes' widening keys
 * (writes.allow, writes.tokens: true, protect: false) and its design.tokens are dropped with
 * a warning, its deny and hide rules are added to the same-named mode, and a mode it alone
 * defines writes nothing. Protected paths only accumulate; no layer can remove one.
 *
 * Loading fails only for lack of memory: a bad file is skipped with its errors recorded, and
 * the errors are keyed by the mode they concern so that the daemon can fail closed when the
 * active mode's file (in any layer) is broken. A config.yaml with an error, or a modes
 * directory that cannot be read, concerns every mode: the protected paths, tokens or deny
 * and hide rules it holds are unknown, and dropping them would leave writable what the file
 * protects. Its error is keyed PW_ALL_MODES, so every mode fails closed until it is fixed.
 */
#include <dirent.h>
#include <errno.h>

#include "pw_limits.h"
#include "config.h"
#include "modeset.h"
#include "path.h"
#include "util.h"

struct pw_modeset {
	pw_mode *modes; /* sorted by name once loaded */
	size_t n_modes, cap_modes;
	pw_rule *protected_rules;
	size_t n_protected;
	pw_rule *token_rules;
	size_t n_tokens;
	char *plans_dir;    /* the plans folder, PW_DEFAULT_PLANS_DIR unless configured */
	pw_rule plans_rule; /* allow "/plans_dir/" "**", for modes with writes.plans */
	pw_warnings w;
};

#define PW_DEFAULT_PLANS_DIR "docs/plans"

/* Directories, not globs: pw_glob_match_tree() covers everything beneath each. Each is
 * anchored at the root (a pattern without a slash would name .piworkfs at any depth). */
static const char *const default_protected[] = {".git/hooks", ".git/config", "/.piworkfs"};

void pw_modeset_free(pw_modeset *ms)
{
	if (!ms)
		return;
	PW_FREE_ARRAY(ms->modes, ms->n_modes, pw_mode_done);
	pw_rules_free(ms->protected_rules, ms->n_protected);
	pw_rules_free(ms->token_rules, ms->n_tokens);
	free(ms->plans_dir);
	pw_rule_done(&ms->plans_rule);
	pw_warnings_done(&ms->w);
	free(ms);
}

static pw_mode *modeset_find_mut(pw_modeset *ms, const char *name)
{
	for (size_t i = 0; i < ms->n_modes; i++)
		if (streq(ms->modes[i].name, name))
			return &ms->modes[i];
	return NULL;
}

/* Adds or replaces a mode; takes what M holds. */
static int modeset_put(pw_modeset *ms, pw_mode *m)
{
	pw_mode *old = modeset_find_mut(ms, m->name);

	if (old) {
		pw_mode_done(old);
		*old = *m;
		*m = (pw_mode){0};
		return 0;
	}
	if (PW_GROW(ms->modes, ms->cap_modes, ms->n_modes, 8) < 0)
		return -ENOMEM;
	ms->modes[ms->n_modes++] = *m;
	*m = (pw_mode){0};
	return 0;
}

static int warn_untrusted(pw_modeset *ms, const char *mode, const char *file, pw_mark at,
			  const char *key)
{
	if (at.line == 0)
		return 0;
	return pw_warnings_add(&ms->w, mode, PW_WARNING, file, at.line, at.column, key, "%s",
			       PW_UNTRUSTED_MSG);
}

/* Removes M's allow rules: what an untrusted project's own mode is left with. */
static void drop_allow_rules(pw_mode *m)
{
	size_t k = 0;

	for (size_t i = 0; i < m->n_rules; i++) {
		if (m->rules[i].kind == PW_RULE_ALLOW)
			pw_rule_done(&m->rules[i]);
		else
			m->rules[k++] = m->rules[i];
	}
	m->n_rules = k;
}

/* An untrusted project's mode: only its deny and hide rules count. */
static int merge_untrusted(pw_modeset *ms, pw_mode_file *mf)
{
	pw_mode *m = &mf->mode, *base;
	int r;

	r = warn_untrusted(ms, m->name, m->file, mf->allow_key, "writes.allow");
	if (r >= 0)
		r = warn_untrusted(ms, m->name, m->file, mf->tokens_key, "writes.tokens");
	if (r >= 0)
		r = warn_untrusted(ms, m->name, m->file, mf->plans_key, "writes.plans");
	if (r >= 0)
		r = warn_untrusted(ms, m->name, m->file, mf->protect_key, "protect");
	if (r < 0)
		return r;

	base = modeset_find_mut(ms, m->name);
	if (!base) {
		drop_allow_rules(m);
		m->tokens = false;
		m->plans = false;
		m->protect = true;
		m->keep_originals = true; /* only a trusted layer may stop keeping originals */
		return modeset_put(ms, m);
	}
	for (size_t i = 0; i < m->n_rules; i++) {
		if (m->rules[i].kind == PW_RULE_ALLOW)
			continue;
		r = pw_rules_append_copy(&base->rules, &base->n_rules, &m->rules[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The NAME.md entries of DIR, sorted. A missing directory has none. */
static int list_mode_files(pw_modeset *ms, const char *dir, char ***ret, size_t *ret_n)
{
	DIR *d;
	struct dirent *de;
	char **v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			goto done;
		r = pw_warnings_add(&ms->w, PW_ALL_MODES, PW_ERROR, dir, 0, 0, NULL,
				    "cannot read directory: %s; every mode fails closed until it "
				    "can be read and the modes are reloaded",
				    strerror(errno));
		goto done;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || len < 4 || !streq(de->d_name + len - 3, ".md"))
			continue;
		if (n == cap) {
			char **nv = reallocarray(v, cap ? cap * 2 : 16, sizeof(*nv));

			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
			cap = cap ? cap * 2 : 16;
		}
		v[n] = strdup(de->d_name);
		if (!v[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (r < 0) {
		strv_free(v, n);
		return r;
	}
	if (n > 0)
		qsort(v, n, sizeof(*v), cmp_str);
done:
	if (r < 0)
		return r;
	*ret = v;
	*ret_n = n;
	return 0;
}

static int load_mode_file(pw_modeset *ms, const char *file, pw_layer layer, bool trusted)
{
	pw_mode_file *mf = NULL;
	int r;

	r = pw_mode_load(file, layer, &ms->w, &mf);
	if (r == -EINVAL)
		return 0; /* skipped; its errors are recorded */
	if (r < 0)
		return r;
	if (layer == PW_LAYER_PROJECT && !trusted)
		r = merge_untrusted(ms, mf);
	else
		r = modeset_put(ms, &mf->mode);
	pw_mode_file_free(mf);
	return r;
}

static int load_layer(pw_modeset *ms, const char *dir, pw_layer layer, bool trusted)
{
	char **names = NULL;
	size_t n = 0;
	int r;

	r = list_mode_files(ms, dir, &names, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r >= 0; i++) {
		_cleanup_free_ char *file = NULL;

		size_t dlen = strlen(dir);

		if (asprintf(&file, "%s%s%s", dir, dlen > 0 && dir[dlen - 1] == '/' ? "" : "/",
			     names[i]) < 0) {
			r = -ENOMEM;
			break;
		}
		if (i >= PW_MODES_MAX) {
			names[i][strlen(names[i]) - 3] = '\0';
			r = pw_warnings_add(&ms->w, names[i], PW_ERROR, file, 0, 0, NULL,
					    "too many modes in one directory (limit %d); skipped",
					    PW_MODES_MAX);
			continue;
		}
		r = load_mode_file(ms, file, layer, trusted);
	}
	strv_free(names, n);
	return r;
}

static int add_defaults(pw_modeset *ms)
{
	for (size_t i = 0; i < ELEMENTSOF(default_protected); i++) {
		const char *err;
		int r;

		r = pw_rules_reserve(&ms->protected_rules, ms->n_protected);
		if (r < 0)
			return r;
		r = pw_rule_init(&ms->protected_rules[ms->n_protected], PW_RULE_PROTECTED,
				 default_protected[i], "(built-in)", 0, 0, PW_LAYER_DEFAULT, &err);
		if (r < 0)
			return -ENOMEM;
		ms->n_protected++;
	}
	return 0;
}

/*
 * FILE, a config.yaml, had errors (the warnings from FIRST on): none of its rules apply,
 * which fails every mode closed. The first error says so itself, keyed PW_ALL_MODES: each
 * problem is listed once, and the reason a view gives for failing closed names the line to
 * fix and what is wrong there.
 */
static int config_broken(pw_modeset *ms, const char *file, size_t first)
{
	static const char consequence[] = "; so none of the file's rules apply: every mode "
					  "fails closed (nothing is writable) until it is fixed "
					  "and reloaded";
	char *msg = NULL, *mode = NULL;

	for (size_t i = first; i < ms->w.n; i++) {
		if (ms->w.v[i].severity != PW_ERROR)
			continue;
		if (asprintf(&msg, "%s%s", ms->w.v[i].message, consequence) < 0)
			return -ENOMEM;
		mode = strdup(PW_ALL_MODES);
		if (!mode) {
			free(msg);
			return -ENOMEM;
		}
		free(ms->w.v[i].message);
		ms->w.v[i].message = msg;
		free(ms->w.mode[i]);
		ms->w.mode[i] = mode;
		return 0;
	}
	return pw_warnings_add(&ms->w, PW_ALL_MODES, PW_ERROR, file, 0, 0, NULL,
			       "the file has errors%s", consequence);
}

/* Takes the rules of C (protected always; tokens only with authority). */
static int load_config(pw_modeset *ms, const char *file, pw_layer layer, bool trusted)
{
	pw_config c = {0};
	size_t first = ms->w.n;
	int r;

	r = pw_config_load(file, layer, &ms->w, &c);
	if (r == -EINVAL)
		return config_broken(ms, file, first);
	if (r < 0)
		return r;
	for (size_t i = 0; i < c.n_protected && r >= 0; i++)
		r = pw_rules_append_copy(&ms->protected_rules, &ms->n_protected,
					 &c.protected_rules[i]);
	/* Moving the plans folder moves what plan mode may write: a widening key. */
	if (r >= 0 && layer == PW_LAYER_PROJECT && !trusted)
		r = warn_untrusted(ms, NULL, file, c.plans_key, "plans");
	else if (r >= 0 && c.plans_dir) {
		free(ms->plans_dir);
		ms->plans_dir = TAKE_PTR(c.plans_dir);
	}
	if (r >= 0 && layer == PW_LAYER_PROJECT && !trusted)
		r = warn_untrusted(ms, NULL, file, c.tokens_key, "design.tokens");
	else
		for (size_t i = 0; i < c.n_tokens && r >= 0; i++)
			r = pw_rules_append_copy(&ms->token_rules, &ms->n_tokens,
						 &c.token_rules[i]);
	pw_config_done(&c);
	return r;
}

static int cmp_mode(const void *a, const void *b)
{
	return strcmp(((const pw_mode *)a)->name, ((const pw_mode *)b)->name);
}

static int load_dir(pw_modeset *ms, const char *base, const char *sub, pw_layer layer, bool trusted)
{
	_cleanup_free_ char *modes = NULL, *config = NULL;
	int r;

	if (asprintf(&modes, "%s%smodes", base, sub) < 0 ||
	    asprintf(&config, "%s%sconfig.yaml", base, sub) < 0)
		return -ENOMEM;
	r = load_layer(ms, modes, layer, trusted);
	if (r < 0)
		return r;
	return load_config(ms, config, layer, trusted);
}

/* The allow rule of modes with writes.plans: the folder and everything beneath it (an editor's
 * temporary file, sed -i's, a subfolder of notes), approved plans aside (pw_modeset_freeze_rule).
 */
static int make_plans_rule(pw_modeset *ms)
{
	_cleanup_free_ char *pattern = NULL;
	const char *err = NULL;

	if (!ms->plans_dir) {
		ms->plans_dir = strdup(PW_DEFAULT_PLANS_DIR);
		if (!ms->plans_dir)
			return -ENOMEM;
	}
	if (asprintf(&pattern, "/%s/**", ms->plans_dir) < 0)
		return -ENOMEM;
	/* config.c admits only plain paths, so the glob compiles; any failure is memory. */
	if (pw_rule_init(&ms->plans_rule, PW_RULE_ALLOW, pattern, "(plans folder)", 0, 0,
			 PW_LAYER_DEFAULT, &err) < 0)
		return -ENOMEM;
	return 0;
}

const char *pw_modeset_plans_dir(const pw_modeset *ms)
{
	return ms->plans_dir;
}

const pw_rule *pw_modeset_plans_rule(const pw_modeset *ms)
{
	return &ms->plans_rule;
}

int pw_modeset_freeze_rule(const char *path, pw_rule *ret)
{
	_cleanup_free_ char *pattern = NULL;
	const char *err = NULL;
	int r;

	if (!path || !path[0] || strpbrk(path, "*?[]\\!") || !pw_path_is_normal(path))
		return -EINVAL;
	if (asprintf(&pattern, "/%s", path) < 0)
		return -ENOMEM;
	r = pw_rule_init(ret, PW_RULE_PROTECTED, pattern, PW_FROZEN_RULE_FILE, 0, 0,
			 PW_LAYER_DEFAULT, &err);
	if (r < 0)
		return r == -ENOMEM ? r : -EINVAL;
	return 0;
}

int pw_modeset_load(const pw_load_opts *opts, pw_modeset **ret)
{
	_cleanup_modeset_ pw_modeset *ms = NULL;
	int r;

	ms = calloc(1, sizeof(*ms));
	if (!ms)
		return -ENOMEM;
	r = add_defaults(ms);
	if (r < 0)
		return r;
	if (opts->bundled_dir) {
		r = load_layer(ms, opts->bundled_dir, PW_LAYER_BUNDLED, true);
		if (r < 0)
			return r;
	}
	if (opts->global_dir) {
		r = load_dir(ms, opts->global_dir, "/", PW_LAYER_GLOBAL, true);
		if (r < 0)
			return r;
	}
	if (opts->project_dir) {
		r = load_dir(ms, opts->project_dir, "/.piworkfs/", PW_LAYER_PROJECT, opts->trusted);
		if (r < 0)
			return r;
	}
	if (ms->n_modes > 0)
		qsort(ms->modes, ms->n_modes, sizeof(*ms->modes), cmp_mode);
	r = make_plans_rule(ms);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(ms);
	return 0;
}

size_t pw_modeset_count(const pw_modeset *ms)
{
	return ms->n_modes;
}

const pw_mode *pw_modeset_get(const pw_modeset *ms, size_t i)
{
	return i < ms->n_modes ? &ms->modes[i] : NULL;
}

const pw_mode *pw_modeset_find(const pw_modeset *ms, const char *name)
{
	return modeset_find_mut((pw_modeset *)ms, name);
}

size_t pw_modeset_warning_count(const pw_modeset *ms)
{
	return ms->w.n;
}

const pw_warning *pw_modeset_warning(const pw_modeset *ms, size_t i)
{
	return i < ms->w.n ? &ms->w.v[i] : NULL;
}

const char *pw_modeset_warning_mode(const pw_modeset *ms, size_t i)
{
	return i < ms->w.n ? ms->w.mode[i] : NULL;
}

bool pw_warning_is_untrusted(const pw_warning *w)
{
	return w && w->severity == PW_WARNING && streq_ptr(w->message, PW_UNTRUSTED_MSG);
}

bool pw_modeset_mode_broken(const pw_modeset *ms, const char *name, const pw_warning **ret_w)
{
	for (size_t i = 0; i < ms->w.n; i++) {
		if (ms->w.v[i].severity != PW_ERROR ||
		    !(streq_ptr(ms->w.mode[i], name) || streq_ptr(ms->w.mode[i], PW_ALL_MODES)))
			continue;
		if (ret_w)
			*ret_w = &ms->w.v[i];
		return true;
	}
	return false;
}

size_t pw_modeset_protected_count(const pw_modeset *ms)
{
	return ms->n_protected;
}

const pw_rule *pw_modeset_protected(const pw_modeset *ms, size_t i)
{
	return i < ms->n_protected ? &ms->protected_rules[i] : NULL;
}

size_t pw_modeset_token_count(const pw_modeset *ms)
{
	return ms->n_tokens;
}

const pw_rule *pw_modeset_token(const pw_modeset *ms, size_t i)
{
	return i < ms->n_tokens ? &ms->token_rules[i] : NULL;
}

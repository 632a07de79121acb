/* SPDX-License-Identifier: MIT */
/* Commands that run a command (bash_wrappers.h): each finds the command it runs and judges
 * it again, one level deeper (env, sudo, xargs, find -exec, sh -c, flock, source, ...). */
#include <string.h>

#include "bash_cmd.h"
#include "bash_path.h"
#include "bash_wrappers.h"
#include "util.h"

static void run_inner(bw_cmd *k, size_t idx)
{
	if (idx < k->argc)
		k->dispatch(k->c, &k->argv[idx], k->argc - idx, k->depth + 1);
}

/* nohup, nice, timeout, stdbuf, ionice, chrt, taskset, command, exec, builtin, time, ...:
 * options, then the positional words before the command (timeout's DURATION), then the
 * command. */
void bw_h_wrap(bw_cmd *k)
{
	const char *n = k->w->name;
	size_t idx = bw_scan(k, k->w, 1, true);
	size_t skip = streq(n, "timeout") || streq(n, "chrt") || streq(n, "taskset") ? 1 : 0;

	if ((streq(n, "command") || streq(n, "type")) &&
	    (bw_opt_has(k, 'v', NULL) || bw_opt_has(k, 'V', NULL)))
		return;
	if (streq(n, "time"))
		bw_tw_opt(k, 'o', "output", PW_OP_OPEN_WRITE, false, false);
	if (streq(n, "ionice") && bw_opt_has(k, 'p', NULL))
		return;
	if (streq(n, "taskset") && bw_opt_has(k, 'p', "pid"))
		return;
	if (streq(n, "sudo") || streq(n, "doas")) {
		if (bw_opt_has(k, 'e', "edit")) {
			for (size_t i = idx; i < k->argc; i++)
				bw_tw(k, &k->argv[i], PW_OP_OPEN_WRITE, false, false);
			return;
		}
		if (idx >= k->argc &&
		    (bw_opt_has(k, 'i', "login") || bw_opt_has(k, 's', "shell"))) {
			bw_unknown(k, "opens an interactive shell");
			return;
		}
	}
	if (streq(n, "env")) {
		if (bw_opt_has(k, 'S', "split-string")) {
			bw_unknown(k, "env -S splits a string the analysis does not follow");
			return;
		}
		while (idx < k->argc && k->argv[idx].lit && strchr(k->argv[idx].lit, '=') &&
		       k->argv[idx].lit[0] != '=')
			idx++;
	}
	idx += skip;
	if (idx >= k->argc)
		return;
	bw_word tmp = {0};
	const bw_word *dir =
	    streq(n, "env") ? bw_opt_word(k, bw_opt_get(k, 'C', "chdir"), &tmp) : NULL;
	if (dir) {
		bw_state *saved = k->c->st, *copy = bw_state_copy(saved);
		if (copy) {
			k->c->st = copy;
			bw_cd(k->c, dir);
			run_inner(k, idx);
			k->c->st = saved;
			bw_state_free(copy);
		}
	} else {
		run_inner(k, idx);
	}
	bw_word_done(&tmp);
}

/* flock [opts] FILE COMMAND / flock [opts] FILE -c STRING: the lock file is created. */
void bw_h_flock(bw_cmd *k)
{
	size_t idx = bw_scan(k, k->w, 1, true);
	if (idx >= k->argc)
		return;
	const bw_word *file = &k->argv[idx];
	if (file->lit && strspn(file->lit, "0123456789") == strlen(file->lit))
		return; /* a descriptor */
	bw_tw(k, file, PW_OP_CREATE, false, false);
	bw_word tmp = {0};
	const bw_word *cmd = bw_opt_word(k, bw_opt_get(k, 'c', "command"), &tmp);
	if (cmd) {
		if (cmd->unknown || !cmd->lit)
			bw_unknown(k, "runs a command string the analysis cannot resolve");
		else
			k->c->analyze_string(k->c, cmd->lit, strlen(cmd->lit), k->depth + 1,
					     "flock -c");
	} else {
		run_inner(k, idx + 1);
	}
	bw_word_done(&tmp);
}

/* xargs [opts] CMD ARGS: CMD runs with arguments read from its input (unknown). */
void bw_h_xargs(bw_cmd *k)
{
	size_t idx = bw_scan(k, k->w, 1, true);
	bw_word tmp = {0};
	const bw_word *rep = bw_opt_word(k, bw_opt_get(k, 'I', "replace"), &tmp);
	const char *r = rep && rep->lit ? rep->lit : bw_opt_has(k, 'i', "replace") ? "{}" : NULL;
	bw_word tmp2 = {0};
	const bw_word *af = bw_opt_word(k, bw_opt_get(k, 'a', "arg-file"), &tmp2);
	if (af)
		bw_tr(k, af);
	bw_word_done(&tmp2);
	if (idx >= k->argc) {
		bw_word_done(&tmp);
		return; /* echo */
	}
	size_t n = k->argc - idx;
	bw_word *v = calloc(n + 1, sizeof(*v));
	if (!v) {
		k->c->res->oom = true;
		bw_word_done(&tmp);
		return;
	}
	static const char why[] = "an argument xargs reads from its input";
	for (size_t i = 0; i < n; i++) {
		v[i] = k->argv[idx + i];
		if (r && r[0] && v[i].lit && strstr(v[i].lit, r) && i > 0)
			v[i] =
			    (bw_word){.unknown = true, .raw = (char *)"(xargs input)", .why = why};
	}
	if (!r)
		v[n++] = (bw_word){.unknown = true, .raw = (char *)"(xargs input)", .why = why};
	k->dispatch(k->c, v, n, k->depth + 1);
	free(v); /* the words are borrowed */
	bw_word_done(&tmp);
}

/* find PATHS EXPR: -delete, -exec/-execdir/-ok CMD {} ;, -fprint FILE. */
void bw_h_find(bw_cmd *k)
{
	size_t i = 1;
	while (i < k->argc && k->argv[i].lit &&
	       (streq(k->argv[i].lit, "-H") || streq(k->argv[i].lit, "-L") ||
		streq(k->argv[i].lit, "-P") || startswith(k->argv[i].lit, "-O")))
		i++;
	if (i < k->argc && k->argv[i].lit && streq(k->argv[i].lit, "-D"))
		i += 2;
	size_t p0 = i;
	while (i < k->argc &&
	       !(k->argv[i].lit && (k->argv[i].lit[0] == '-' || streq(k->argv[i].lit, "(") ||
				    streq(k->argv[i].lit, "!"))))
		i++;
	size_t p1 = i;
	bw_word dot;
	if (bw_word_literal(&dot, ".", NULL) < 0) {
		k->c->res->oom = true;
		return;
	}
	bw_word *starts = p1 > p0 ? &k->argv[p0] : &dot;
	size_t n_starts = p1 > p0 ? p1 - p0 : 1;

	for (; i < k->argc; i++) {
		const char *s = k->argv[i].lit;
		if (!s)
			continue;
		if (streq(s, "-delete")) {
			bw_set_label(k, "find", "-delete");
			for (size_t j = 0; j < n_starts; j++)
				bw_tw(k, &starts[j], PW_OP_UNLINK, true, true);
		} else if ((streq(s, "-fprint") || streq(s, "-fprint0") || streq(s, "-fls") ||
			    streq(s, "-fprintf")) &&
			   i + 1 < k->argc) {
			bw_set_label(k, "find", s);
			bw_tw(k, &k->argv[++i], PW_OP_OPEN_WRITE, false, false);
		} else if (streq(s, "-exec") || streq(s, "-execdir") || streq(s, "-ok") ||
			   streq(s, "-okdir")) {
			size_t b = i + 1, e = b;
			while (e < k->argc && !(k->argv[e].lit && (streq(k->argv[e].lit, ";") ||
								   streq(k->argv[e].lit, "+"))))
				e++;
			for (size_t j = 0; j < n_starts && j < 8 && e > b; j++) {
				bw_word *v = calloc(e - b, sizeof(*v));
				if (!v)
					break;
				for (size_t m = 0; m < e - b; m++) {
					v[m] = k->argv[b + m];
					if (m > 0 && v[m].lit && strstr(v[m].lit, "{}")) {
						v[m] = starts[j];
						v[m].under = true;
					}
				}
				k->dispatch(k->c, v, e - b, k->depth + 1);
				free(v);
			}
			i = e;
		}
	}
	bw_word_done(&dot);
}

/* sh/bash -c 'STRING': analyzed recursively. A script file or stdin: unknown. */
void bw_h_shell(bw_cmd *k)
{
	bool c_flag = false;
	size_t i = 1;
	for (; i < k->argc; i++) {
		const char *s = k->argv[i].lit;
		if (!s || k->argv[i].unknown || s[0] != '-' || streq(s, "-") || streq(s, "--"))
			break;
		if (s[1] != '-' && strchr(s, 'c'))
			c_flag = true;
		if ((streq(s, "-o") || streq(s, "-O") || streq(s, "+O") || streq(s, "+o") ||
		     streq(s, "--rcfile") || streq(s, "--init-file")) &&
		    i + 1 < k->argc)
			i++;
	}
	if (i < k->argc && k->argv[i].lit && streq(k->argv[i].lit, "--"))
		i++;
	if (!c_flag) {
		bw_unknown(k, i < k->argc ? "runs a script the analysis does not read"
					  : "runs commands read from its input");
		return;
	}
	if (i >= k->argc)
		return;
	const bw_word *w = &k->argv[i];
	if (w->unknown || !w->lit) {
		bw_unknown(k, "runs a command string the analysis cannot resolve");
		return;
	}
	char label[64];
	snprintf(label, sizeof(label), "%s -c", k->w->name);
	k->c->analyze_string(k->c, w->lit, strlen(w->lit), k->depth + 1, label);
}

/* source FILE / . FILE: runs the file's commands in this shell. */
void bw_h_source(bw_cmd *k)
{
	if (k->n_pos > 0)
		bw_tr(k, k->pos[0]);
	bw_unknown(k, "runs a script the analysis does not read");
}

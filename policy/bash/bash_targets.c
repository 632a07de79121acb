/* SPDX-License-Identifier: MIT */
/*
 * The analysis's targets: each added once (a hash index over command, access, kind and
 * path), at most PW_BASH_TARGETS_MAX of them, and the step budget that bounds the whole
 * analysis. The bottom of the bash pieces: every other one adds targets, none is called.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bash_targets.h"
#include "pw_limits.h"
#include "util.h"

void bw_target_done(pw_bash_target *t)
{
	free(t->command);
	free(t->path);
	free(t->note);
}

bool bw_spend(bw_ctx *c, unsigned long n)
{
	if (c->steps >= n) {
		c->steps -= n;
		return true;
	}
	if (c->steps != 0 || !c->res->truncated) {
		c->steps = 0;
		c->res->truncated = true;
		bw_add_unknown_cmd(c, "(analysis)", "the command is too large to analyze fully");
	}
	return false;
}

static bool target_same(const pw_bash_target *t, const char *command, pw_bash_access access,
			pw_bash_kind kind, const char *path)
{
	return t->access == access && t->kind == kind && streq_ptr(t->path, path) &&
	       streq_ptr(t->command, command);
}

#define BW_INDEX_SLOTS (2u * PW_BASH_TARGETS_MAX)

static uint32_t target_hash(const char *command, pw_bash_access access, pw_bash_kind kind,
			    const char *path)
{
	uint32_t h = PW_FNV1A32_INIT ^ (uint32_t)access ^ ((uint32_t)kind << 8);
	h = pw_fnv1a32(pw_fnv1a32_str(h, command), "", 1); /* a NUL between the two strings */
	return pw_fnv1a32_str(h, path);
}

/* The index slot holding a target equal to the key, or the empty slot where it would go;
 * NULL without an index. */
static uint32_t *index_find(pw_bash_result *r, const char *command, pw_bash_access access,
			    pw_bash_kind kind, const char *path)
{
	if (!r->index)
		return NULL;
	uint32_t i = target_hash(command, access, kind, path) & (BW_INDEX_SLOTS - 1);
	for (;; i = (i + 1) & (BW_INDEX_SLOTS - 1)) {
		uint32_t slot = r->index[i];
		if (!slot || target_same(&r->targets[slot - 1], command, access, kind, path))
			return &r->index[i];
	}
}

static void add_raw(bw_ctx *c, const char *command, pw_bash_access access, pw_op op,
		    pw_bash_kind kind, const char *path, pw_bash_status status, bool is_dir,
		    bool subtree, const char *note)
{
	pw_bash_result *r = c->res;

	if (PW_GROW(r->targets, r->cap_targets, r->n_targets, 16) < 0) {
		r->oom = true;
		return;
	}
	pw_bash_target *t = &r->targets[r->n_targets];
	*t = (pw_bash_target){
	    .command = strdup(command ? command : "?"),
	    .path = pw_dup_or_null(path),
	    .note = pw_dup_or_null(note),
	    .kind = kind,
	    .access = access,
	    .op = op,
	    .is_dir = is_dir,
	    .subtree = subtree,
	    .heuristic = c->heuristic,
	    .status = status,
	};
	if (!t->command || (path && !t->path) || (note && !t->note)) {
		bw_target_done(t);
		r->oom = true;
		return;
	}
	r->n_targets++;
	if (!r->index)
		r->index = calloc(BW_INDEX_SLOTS, sizeof(*r->index));
	uint32_t *slot = index_find(r, t->command, access, kind, t->path);
	if (slot && !*slot)
		*slot = (uint32_t)r->n_targets;
}

void bw_add(bw_ctx *c, const char *command, pw_bash_access access, pw_op op, pw_bash_kind kind,
	    const char *path, pw_bash_status status, bool is_dir, bool subtree, const char *note)
{
	pw_bash_result *r = c->res;

	/* Same command, same path: once is enough (functions and loops repeat themselves).
	 * Found through the hash index; a linear scan only if the index could not be made. */
	const char *cmd = command ? command : "?";
	uint32_t *slot = index_find(r, cmd, access, kind, path);
	pw_bash_target *dup = slot && *slot ? &r->targets[*slot - 1] : NULL;
	for (size_t i = 0; !r->index && !dup && i < r->n_targets; i++)
		if (target_same(&r->targets[i], cmd, access, kind, path))
			dup = &r->targets[i];
	if (dup) {
		dup->subtree |= subtree;
		dup->heuristic |= c->heuristic;
		return;
	}
	if (r->n_targets >= PW_BASH_TARGETS_MAX - 1) {
		if (!r->truncated) {
			r->truncated = true;
			add_raw(c, "(analysis)", PW_BASH_EXEC, PW_OP_WRITE, PW_BASH_KIND_COMMAND,
				NULL, PW_BASH_UNKNOWN, false, false, "too many targets to list");
		}
		return;
	}
	add_raw(c, command, access, op, kind, path, status, is_dir, subtree, note);
}

void bw_add_unknown_cmd(bw_ctx *c, const char *command, const char *note)
{
	bw_add(c, command, PW_BASH_EXEC, PW_OP_WRITE, PW_BASH_KIND_COMMAND, NULL, PW_BASH_UNKNOWN,
	       false, false, note);
}

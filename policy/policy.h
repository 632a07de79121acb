/* SPDX-License-Identifier: MIT */
/*
 * A compiled policy: one mode, with the protected and token rules merged in, immutable
 * once built and reference-counted. The filesystem holds the active one in a pointer
 * guarded by a mutex, held only to take a reference (fs/check.c) or to swap it; a mode
 * switch compiles a new one and swaps the pointer, and operations in flight keep their
 * reference. A policy copies everything it needs, so it outlives its modeset.
 *
 * Decision order for a path:
 *   1. hidden (a hide rule matches the path or an ancestor)  -> ENOENT, for every op
 *   2. reads                                                 -> allowed
 *   3. writes in a mode that writes nothing                  -> EROFS
 *   4. a protected path (unless the mode has protect: false) -> EACCES
 *   5. a deny rule                                           -> EACCES
 *   6. an allow rule, or a token file in a tokens mode       -> allowed
 *   7. nothing matched                                       -> EACCES
 *   8. a write the steps above allow, in a view with a lane,
 *      that no lane glob matches                            -> EACCES
 * "Matches" is pw_glob_match_tree (glob.h: the path or an ancestor, gitignore's meaning);
 * in step 6 a directory is also matched by a rule `dir/` `**` of which it is the dir.
 * In a mode with writes.plans, mkdir of a directory on the way to the plans folder ("docs"
 * for docs/plans) is allowed too, unless a protected or deny rule covers it.
 * A fail-closed policy (the active mode's file, or a config.yaml, is broken) answers EROFS
 * to every write.
 *
 * A lane (`piworkfs mount --only GLOB...`, which `piworkfs run --only` passes to the view
 * it mounts) narrows the writable set of every mode of a view, so that agents working in
 * parallel keep to disjoint parts of the tree. It is tighten-only, as an untrusted project
 * layer is: step 8 can only turn an allowed write into a refusal, never the other way, and
 * a mode that writes nothing still writes nothing. The view compiles every mode it
 * installs with its lane, so the lane holds across every switch. Lane globs have the mode
 * files' syntax and the allow rules' reach (the path or an ancestor matches; a directory
 * `dir` is matched by `dir/` `**` too).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "mode.h"
#include "pw_limits.h"
#include "modeset.h"

typedef enum pw_op {
	PW_OP_LOOKUP,
	PW_OP_READ, /* getattr, readdir, open read-only, read, readlink, getxattr, statfs */
	PW_OP_CREATE,
	PW_OP_MKNOD,
	PW_OP_MKDIR,
	PW_OP_SYMLINK,
	PW_OP_LINK,
	PW_OP_UNLINK,
	PW_OP_RMDIR,
	PW_OP_RENAME,
	PW_OP_OPEN_WRITE, /* open with write access or O_TRUNC */
	PW_OP_WRITE,
	PW_OP_TRUNCATE,
	PW_OP_CHMOD,
	PW_OP_CHOWN,
	PW_OP_UTIMENS,
	PW_OP_SETXATTR,
	PW_OP_REMOVEXATTR,
	PW_OP_FALLOCATE,
	PW_OP_COPY_RANGE,
	PW_OP_ACCESS_WRITE, /* access(W_OK) */
	_PW_OP_MAX,
} pw_op;

const char *pw_op_name(pw_op op);      /* "create", "rename", ... */
int pw_op_from_name(const char *name); /* pw_op, or -EINVAL */
bool pw_op_is_write(pw_op op);

typedef enum pw_reason {
	PW_REASON_READ,	       /* reads are allowed */
	PW_REASON_ALLOW_RULE,  /* an allow rule matched */
	PW_REASON_TOKEN,       /* a declared token file in a tokens mode */
	PW_REASON_HIDDEN,      /* a hide rule matched */
	PW_REASON_READ_ONLY,   /* the mode writes nothing */
	PW_REASON_PROTECTED,   /* a protected path */
	PW_REASON_DENY_RULE,   /* a deny rule matched */
	PW_REASON_NO_ALLOW,    /* no allow rule matched */
	PW_REASON_FAIL_CLOSED, /* the active mode is broken; nothing is writable */
	PW_REASON_OUTSIDE,     /* the path leaves the project */
	PW_REASON_HARDLINK,    /* a file with more links than the names known to be allowed */
	PW_REASON_LANE,	       /* the mode allows it, but it is outside the view's lane */
	PW_REASON_OVERLAP,     /* an allowed write of a path another live view changed
				* in its current change set (fs/overlap.h; audit only) */
} pw_reason;

const char *pw_reason_name(pw_reason r); /* stable identifiers for --json: "deny-rule", ... */

typedef struct pw_decision {
	bool allowed;
	int err; /* 0, EROFS, EACCES or ENOENT */
	pw_reason reason;
	const pw_rule *rule; /* the deciding rule, owned by the policy; NULL when none */
} pw_decision;

typedef struct pw_policy pw_policy;

/* Compiles MODE from MS. Returns 0 with *ret (refcount 1), -ENOENT for an unknown mode,
 * -ENOMEM. */
int pw_policy_compile(const pw_modeset *ms, const char *mode, pw_policy **ret);

/*
 * The lane: compiles each of GLOBS (N of them, at most PW_LANE_MAX) as a lane rule
 * (PW_RULE_LANE, file "(--only)"). Returns 0 with *ret (N rules; free with
 * pw_lane_free), -EINVAL for a bad glob (*ret_bad is its index, *ret_err the glob
 * compiler's reason), -E2BIG for more than PW_LANE_MAX globs, -ENOMEM.
 */
int pw_lane_parse(const char *const *globs, size_t n, pw_rule **ret, size_t *ret_bad,
		  const char **ret_err);
void pw_lane_free(pw_rule *lane, size_t n); /* accepts NULL */

/* pw_policy_compile, narrowed by the lane LANE (N rules from pw_lane_parse; N == 0: no
 * lane). The policy keeps copies of the rules. */
int pw_policy_compile_lane(const pw_modeset *ms, const char *mode, const pw_rule *lane, size_t n,
			   pw_policy **ret);

/*
 * What a view adds to every mode it compiles, beside the modeset's rules: its lane (step 8;
 * pw_lane_parse) and the approved plans (protected rules, pw_modeset_freeze_rule), which join
 * the modeset's protected paths where the mode enforces them (all but protect: false). The
 * policy keeps copies of both.
 */
typedef struct pw_policy_extras {
	const pw_rule *lane;
	size_t n_lane;
	const pw_rule *frozen;
	size_t n_frozen;
} pw_policy_extras;
/* pw_policy_compile with X's rules (NULL: none). */
int pw_policy_compile_extras(const pw_modeset *ms, const char *mode, const pw_policy_extras *x,
			     pw_policy **ret);
/* The policy's lane rules (none without a lane). */
size_t pw_policy_lane_count(const pw_policy *p);
const pw_rule *pw_policy_lane_rule(const pw_policy *p, size_t i);

/*
 * A policy from its parts, as pw_report_policy shows one (report.h: what the CLI rebuilds
 * from a live view's answer, so that it decides with the very rules the view installed). The
 * rules come in decision order: hide, protected, deny, allow, token, and last the plans
 * folder's allow rule when PLANS. Returns 0 with *ret, -EINVAL when the rules are out of that
 * order (or the lane holds another kind), -ENOMEM.
 */
typedef struct pw_policy_parts {
	const char *mode, *description, *source;
	const char *fail_reason; /* non-NULL: fail-closed (the rules are then ignored) */
	bool protect, keep_originals;
	const pw_rule *rules;
	size_t n_rules;
	bool plans;
	const pw_rule *lane;
	size_t n_lane;
} pw_policy_parts;
int pw_policy_assemble(const pw_policy_parts *x, pw_policy **ret);

/* A policy that writes nothing, for a mode whose file is broken or missing. WHY is copied.
 * Returns NULL only on allocation failure. */
pw_policy *pw_policy_new_fail_closed(const char *mode, const char *why);

pw_policy *pw_policy_ref(pw_policy *p);
void pw_policy_unref(pw_policy *p); /* accepts NULL */
static inline void pw_policy_unrefp(pw_policy **p)
{
	pw_policy_unref(*p);
}
#define _cleanup_policy_ __attribute__((cleanup(pw_policy_unrefp)))

/* Decides OP on PATH (normalized, project-relative; "" is the root). Never fails. */
void pw_policy_decide(const pw_policy *p, pw_op op, const char *path, bool is_dir,
		      pw_decision *ret);

/* Decides OP making PATH, a name the view shows as absent (create, mknod, mkdir, symlink,
 * the new name of link and rename). For a hidden path the write rules speak first, and
 * only a write they allow answers ENOENT (hidden): a refused create then reads the same
 * for a hidden name and a free one, so refusals do not tell which hidden names exist. */
void pw_policy_decide_new_name(const pw_policy *p, pw_op op, const char *path, bool is_dir,
			       pw_decision *ret);

/* Fast paths for the filesystem's hot path (same answers as decide). */
bool pw_policy_is_hidden(const pw_policy *p, const char *path, bool is_dir);
bool pw_policy_may_write(const pw_policy *p, const char *path, bool is_dir);
bool pw_policy_has_hide_rules(const pw_policy *p);

bool pw_policy_writes_nothing(const pw_policy *p);
/* Does the policy write its plans folder and nothing else (plan)? */
bool pw_policy_writes_only_plans(const pw_policy *p);
/* The plans folder's allow rule ("/DIR/" "**") of a mode with writes.plans, else NULL. */
const pw_rule *pw_policy_plans_rule(const pw_policy *p);
/* Does the policy allow writing every path (an allow-all rule, nothing denied, protected or
 * hidden)? Only then may a file with links in unknown places be written. */
bool pw_policy_writes_everything(const pw_policy *p);

/* Are protected paths enforced (false only for a mode with protect: false)? */
bool pw_policy_protects(const pw_policy *p);
/* Does the view keep the originals of what it changes in this mode (keep_originals)? */
bool pw_policy_keeps_originals(const pw_policy *p);

/*
 * May the directory DIR be renamed as a whole, or a directory be moved to the name DIR?
 * Only when DIR itself may be written and no enforced deny, protected or hide rule can
 * match anything beneath it (policy_tree.c): moving a tree carries its content out from
 * under such a rule, or into one. On false, *ret holds the deciding rule.
 */
bool pw_policy_may_write_tree(const pw_policy *p, const char *dir, pw_decision *ret);
bool pw_policy_is_fail_closed(const pw_policy *p);
const char *pw_policy_fail_reason(const pw_policy *p); /* NULL unless fail-closed */
const char *pw_policy_mode_name(const pw_policy *p);
const char *pw_policy_description(const pw_policy *p);
const char *pw_policy_body(const pw_policy *p);
const char *pw_policy_source(const pw_policy *p); /* the mode's file */

/* Every rule the policy applies (allow, deny, hide, protected, token), for display. */
size_t pw_policy_rule_count(const pw_policy *p);
const pw_rule *pw_policy_rule(const pw_policy *p, size_t i);

/*
 * Is moving from FROM to TO a tightening? True only when TO is provably no more permissive
 * than FROM: TO writes nothing, or TO's allow rules and token use are a subset of FROM's and
 * its deny, hide and protected rules a superset; and TO hides at least what FROM hides.
 * Anything not provably tighter counts as loosening (the conservative answer).
 */
bool pw_policy_is_tightening(const pw_policy *from, const pw_policy *to);

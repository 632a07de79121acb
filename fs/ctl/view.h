/* SPDX-License-Identifier: MIT */
/*
 * The control-plane state of one mounted view: the loaded modeset, the active mode's name,
 * why it fails closed (if it does), and the handles it persists to (state, audit).
 *
 * The view decides; the filesystem enforces. Every change of the active policy goes
 * through this file: it compiles the target mode, checks the requester's authority
 * (pw_view_authorize_switch), installs it through the FUSE layer's set_policy
 * (pw_view_fs_ops), and only then persists the mode (pw_state_set_last_mode), records the
 * switch (pw_state_record_switch) and audits it.
 *
 * Fail closed, never open: an initial or active mode that is unknown, missing or broken
 * installs pw_policy_new_fail_closed() (nothing writable) and status says why; the view
 * never falls back to another, more permissive mode on its own.
 *
 * Threading: every function is thread-safe (one mutex guards the modeset, the mode name,
 * the fail reason and every use of the pw_state handle). The caller keeps STATE and AUDIT
 * alive until pw_view_free() and does not use STATE concurrently with the view.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs.h"
#include "mode.h"
#include "policy.h"

struct pw_state;
struct pw_audit;

typedef struct pw_view pw_view;

/*
 * The control plane's one way into the FUSE layer: the daemon (daemon.c) hands the view
 * these operations and their context (the pw_fs); tests/ctl hands a double. fs/ctl/ calls
 * no function of the FUSE layer by name, so a build of the control plane without it links.
 * Each must be thread-safe and must not call back into the view: set_policy and get_policy
 * are called with the view's lock held (every install happens under it, so a reader that
 * holds it sees the view's mode and the generation of that mode's policy together);
 * get_stats and policy_installed may be called with it held.
 *
 * The changes methods (undo/changes.c) are not served through this struct: undo acts on the
 * backing tree under the originals store's lock, beside the inode table (fs/undo/), which is
 * an interface as wide as the FUSE layer itself. They are a method table of their own that
 * the daemon registers with the control server together with the pw_fs (changes.h), and
 * that builds without the FUSE layer do not register at all.
 */
typedef struct pw_view_fs_ops {
	/* pw_fs_set_policy: installs P (takes a reference); returns once every operation that
	 * starts afterwards decides with it; returns the new generation. */
	uint64_t (*set_policy)(void *ctx, pw_policy *p);
	/* pw_fs_policy: the active policy (a new reference) and its generation, read together
	 * (the generation that installed that policy). */
	pw_policy *(*get_policy)(void *ctx, uint64_t *ret_generation);
	/* pw_fs_get_stats: the counters status shows. */
	void (*get_stats)(void *ctx, pw_fs_stats *ret);
	/* Optional (NULL: nothing keeps originals): P was installed for REASON ("mount",
	 * "switch", "reload"); NEW_SET starts a new change set of originals (undo/undo.h). */
	void (*policy_installed)(void *ctx, const pw_policy *p, const char *reason, bool new_set);
	/* Optional (NULL: no kernel caches): pw_fs_wait_invalidated, the last step of an install,
	 * so that the answer finds the kernel's cached write bits true to generation GEN. */
	void (*wait_invalidated)(void *ctx, uint64_t gen);
} pw_view_fs_ops;

typedef struct pw_view_opts {
	const char *project;	      /* absolute real path of the backing directory */
	const char *mountpoint;	      /* absolute path of the mount */
	const pw_view_fs_ops *fs_ops; /* the filesystem whose policy the view swaps */
	void *fs_ctx;		      /* their context */
	uid_t owner_uid;	      /* the mounting uid: the only non-root uid with authority */
	const char *bundled_dir;      /* pw_load_opts.bundled_dir; NULL to skip */
	const char *global_dir;	      /* pw_load_opts.global_dir; NULL to skip */
	const char *initial_mode;     /* --mode; NULL: the project's last mode, else "plan" */
	struct pw_state *state;	      /* trust, last mode, switch history; NULL: none persisted */
	struct pw_audit *audit;	      /* audit log and `denied` notifications; NULL: none */
	const char *state_db;	 /* the state database's absolute path, for status; NULL: none */
	const char *const *lane; /* `mount --only` globs: the view's lane (policy.h, step 8) */
	size_t n_lane;		 /* 0: no lane */
	/* A run's own view (`mount --run ID`, cli/run/view.c): its modes are the run's alone,
	 * so no switch of it (nor its initial mode) is remembered as the project's last mode;
	 * status names the run and the pid of the `piworkfs run` it serves. NULL: a bare view. */
	const char *run_id;
	pid_t run_pid; /* with run_id; 0: unknown */
} pw_view_opts;

/*
 * Loads the modeset (trust from pw_state_is_trusted), picks the initial mode and installs
 * its policy with fs_ops->set_policy; every policy the view installs is compiled with its
 * lane (opts->lane: a bad glob is -EINVAL). An unknown or broken initial mode installs a
 * fail-closed policy and still succeeds (status reports why). Returns 0 with *ret, or
 * -EINVAL (missing project, mountpoint, fs_ops or one of its three required operations),
 * -ENOMEM.
 */
int pw_view_new(const pw_view_opts *opts, pw_view **ret);
void pw_view_free(pw_view *v); /* accepts NULL; does not touch fs_ctx, state or audit */

/* Who asks. Filled by the control server from SO_PEERCRED and /proc/PID/comm. */
typedef struct pw_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char comm[32];		 /* process name, "" when unknown */
	bool restricted;	 /* connected through an agent socket: may only tighten */
	const char *origin;	 /* "socket", "agent-socket", "signal", "mount", "request",
				  * "plan-approve", "plan-reopen" (static) */
	const char *reason;	 /* an agent's request: its reason (else NULL) */
	const char *answered_by; /* origin "request": who granted it (else NULL) */
	/* Recorded with the switch (store/state.h pw_switch_record), else NULL or 0: */
	pid_t asked_pid;	/* an agent's request: the process that asked */
	const char *asked_comm; /* and its name */
	const char *plan;	/* origin "plan-approve" or "plan-reopen": the plan's path */
} pw_peer;

/* May PEER talk to this view at all? Only the mounting uid and root. 0 or -EPERM. */
int pw_view_authorize_peer(const pw_view *v, const pw_peer *peer);

/*
 * The one authority decision for any change of the active policy (mode.set, reload).
 * Returns 0 when PEER may replace the active policy with TARGET, or -EPERM with a malloc'd
 * one-line reason in *ret_why (written only on refusal; may stay NULL on ENOMEM):
 *   - a peer that is neither the owner nor root is refused;
 *   - a restricted (agent) peer may only tighten (pw_policy_is_tightening from the active
 *     policy to TARGET); loosening is refused with a message asking the person to run
 *     `piworkfs mode NAME` outside the agent.
 */
int pw_view_authorize_switch(pw_view *v, const pw_peer *peer, const pw_policy *target,
			     char **ret_why);

/*
 * What one change of the active policy installed, all of the same switch: a reply built from
 * it never names one mode with another switch's generation, however many switches race.
 */
typedef struct pw_view_installed {
	pw_policy *policy;   /* the policy installed (a reference) */
	uint64_t generation; /* the generation set_policy gave it */
	char *previous;	     /* the mode active just before (for a reload, the same mode) */
} pw_view_installed;
void pw_view_installed_done(pw_view_installed *in); /* drops both; accepts NULL */

/*
 * Switches to mode NAME for PEER. Returns only after fs_ops->set_policy returned, with what
 * it installed in *ret (may be NULL; filled only on success). Errors (with a malloc'd
 * one-line reason in *ret_why, written only on failure, when ret_why is not NULL):
 *   -ENOENT   no such mode
 *   -EBADMSG  the mode's file is broken (the active policy is unchanged)
 *   -EPERM    refused by pw_view_authorize_switch
 *   -ENOMEM
 * Switching to the mode that is already active succeeds and changes nothing (no new
 * generation, change set, record or notification; *ret is the policy in force), unless
 * the view fails closed: then it re-installs the mode, which clears that state.
 */
int pw_view_switch(pw_view *v, const char *name, const pw_peer *peer, pw_view_installed *ret,
		   char **ret_why);
/* pw_view_switch for callers that need only the new generation (*ret_generation may be NULL). */
int pw_view_set_mode(pw_view *v, const char *name, const pw_peer *peer, uint64_t *ret_generation,
		     char **ret_why);

/*
 * Re-reads the mode files (and trust) and recompiles the active mode. If the active mode's
 * file disappeared or broke, installs a fail-closed policy and returns 0 (status says why);
 * a later reload after a fix, or pw_view_set_mode(), recovers. A restricted peer whose
 * reload would loosen the active policy gets -EPERM (with *ret_why) and nothing changes.
 * Returns 0 with what it installed in *ret (may be NULL), or -EPERM, -ENOMEM.
 */
int pw_view_reload(pw_view *v, const pw_peer *peer, pw_view_installed *ret, char **ret_why);

/*
 * Re-reads the approved plans from the state database (ctl/frozen.h) and, when they differ
 * from those the active policy protects, recompiles the active mode with them and installs
 * it; returns once the filesystem enforces it (every write to a newly approved plan is then
 * refused, through descriptors opened before too: the FUSE layer decides each write with
 * the policy in force). The mode files are not read again (that is pw_view_reload's).
 * Approved plans that cannot be read install the mode failing closed, with the reason in
 * status. PEER NULL: the view's own. Returns 0 with what is in force in *ret (may be NULL;
 * unchanged plans: the policy already in force), or -EPERM (a peer without authority),
 * -ENOMEM (nothing changed).
 */
int pw_view_sync_plans(pw_view *v, const pw_peer *peer, pw_view_installed *ret, char **ret_why);

/* What a view is, fixed by pw_view_new and immutable for its lifetime, so read without its
 * lock: one accessor for all of it (pw_view_info_of). The strings are the view's. */
typedef struct pw_view_info {
	const char *project, *mountpoint;
	uid_t owner;
	struct pw_audit *audit;
	int64_t started_ns;   /* CLOCK_REALTIME of pw_view_new */
	const char *state_db; /* pw_view_opts.state_db, or NULL */
	const char *run_id;   /* pw_view_opts.run_id, or NULL */
	pid_t run_pid;	      /* pw_view_opts.run_pid */
} pw_view_info;
const pw_view_info *pw_view_info_of(const pw_view *v);

/* Read-only accessors. Strings returned by the getters without "dup" are immutable for the
 * view's lifetime. */
/* The view's lane (pw_view_opts.lane; none: count 0), as given at mount. */
size_t pw_view_lane_count(const pw_view *v);
const char *pw_view_lane_glob(const pw_view *v, size_t i);

/* The active policy (new reference) and generation, from fs_ops->get_policy. */
pw_policy *pw_view_policy(pw_view *v, uint64_t *ret_generation);
/* The FUSE layer's counters, from fs_ops->get_stats. */
void pw_view_fs_stats(pw_view *v, pw_fs_stats *ret);

/*
 * A consistent snapshot for status, taken under the view's lock: the mode, its generation
 * and its fail reason are those of one installed policy. Strings are malloc'd; free with
 * pw_view_status_done().
 */
typedef struct pw_view_status {
	char *mode;	   /* the active mode's name (also when failing closed) */
	char *fail_reason; /* NULL unless failing closed */
	bool trusted;
	uint64_t generation;
	uint64_t reloads; /* successful reloads since mount */
	char **warnings;  /* modeset warnings, formatted (pw_warning_format) */
	size_t n_warnings;
} pw_view_status;
int pw_view_get_status(pw_view *v, pw_view_status *ret);
void pw_view_status_done(pw_view_status *st);

/*
 * Read access to the current modeset (modes.list, allowed/check for another mode): lock,
 * use, unlock; the pointer is valid only between the two calls. Do not call other pw_view
 * functions in between.
 */
const pw_modeset *pw_view_lock_modeset(pw_view *v);
void pw_view_unlock_modeset(pw_view *v);

/*
 * The state database (NULL: none) under the view's lock, for the plan methods
 * (ctl/plan_methods.c): lock, use, unlock; no other pw_view function in between. After
 * changing which plans are approved, pw_view_sync_plans() installs the protection.
 */
struct pw_state *pw_view_lock_state(pw_view *v);
void pw_view_unlock_state(pw_view *v);

/* The policy of mode NAME as the view would install it (for check, allowed and bash.check
 * with a mode): for the active mode the very policy in force, else NAME compiled from the
 * current modeset with the lane and the approved plans (failing closed when those could not
 * be read). Returns 0 with *ret, -ENOENT, -EBADMSG (broken file), -ENOMEM. */
int pw_view_compile(pw_view *v, const char *name, pw_policy **ret);

/*
 * Called after every change of the active policy (set_mode, reload), from the thread that
 * made it, with no view lock held; must not block nor call back into the view. The control
 * server uses it to send `mode.changed` notifications. FROM/TO are mode names.
 */
typedef void (*pw_view_listener)(const char *from, const char *to, uint64_t generation,
				 const pw_peer *peer, void *userdata);
void pw_view_set_listener(pw_view *v, pw_view_listener fn, void *userdata);

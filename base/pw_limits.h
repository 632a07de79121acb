/* SPDX-License-Identifier: MIT */
/*
 * Every cap that bounds what an input can make us allocate or compute, in one place.
 * Each overflow is reported as a precise error naming the limit.
 */
#pragma once

/* bytes of a path given as input (command line, control socket), NUL included; the view's own
 * paths shorter than this live on the stack and open in one step */
#define PW_PATH_MAX 4096
/* bytes of the project-relative path of an object in a view, NUL included (see docs/SECURITY.md,
 * Limits) */
#define PW_TREE_PATH_MAX (64 * 1024)
#define PW_NAME_MAX 255 /* bytes of one path component */
/* directory levels a recursive walk descends (allowed --files); a path's depth is bounded by its
 * length */
#define PW_PATH_DEPTH_MAX 1024
#define PW_GLOB_LEN_MAX 1024	      /* bytes of one glob pattern */
#define PW_RULES_MAX 512	      /* rules of one kind in one mode or config */
#define PW_MODES_MAX 64		      /* modes in one layer */
#define PW_MODE_FILE_MAX (256 * 1024) /* bytes of one mode or config file */
#define PW_MODE_NAME_MAX 64	      /* bytes of a mode name */
#define PW_YAML_DEPTH_MAX 16	      /* nesting of YAML collections in a mode file */
#define PW_MSG_MAX (64 * 1024)	      /* bytes of one control-socket message */
#define PW_CLIENTS_MAX 256	      /* connections at once to a view's main (operator) socket */
/* connections at once to each agent socket: its own slots, never the operator's; room for an
 * agent's subscription, concurrent requests and a pending consent request */
#define PW_AGENT_CLIENTS_MAX 32
#define PW_PLAN_FILE_MAX (256 * 1024)	/* bytes of a plan file that is read */
#define PW_PLAN_TASKS_MAX 256		/* tasks of one plan */
#define PW_PLAN_TASK_TEXT_MAX 400	/* bytes of one task's text kept (longer: cut) */
#define PW_PLAN_NAME_MAX 100		/* bytes of a plan's name (the file's stem) */
#define PW_PLANS_MAX 256		/* plans of one project that are read and listed */
#define PW_BASH_INPUT_MAX (1024 * 1024) /* bytes of a command given to check-bash */
#define PW_BASH_DEPTH_MAX 256		/* nesting of constructs the bash analysis follows */
#define PW_BASH_TARGETS_MAX 4096	/* targets one analysis reports */

/*
 * The caps below bound what one piece of the program holds or does for one input; each is
 * named after its room and says why that number. A limit that a user or a client meets is
 * reported as an error naming it, as above; the others cut (and say so) or fail closed.
 */

/* ---- policy/: mode files, the protocol codec ---- */
#define PW_LANE_MAX 64 /* --only globs of one lane: a lane names parts of a tree */
/* entries in one YAML sequence or mapping: a little more than PW_RULES_MAX so the caller can
 * report "too many rules" with its own message */
#define PW_YX_ITEMS_MAX 4096
/* bytes of a key compared for a near miss ("dney" for "deny"): longer ones get no suggestion, and
 * the edit distance's rows stay on the stack */
#define PW_KEY_CMP_MAX 32
/* JSON nesting of a request: ours need 3 (request -> params -> array), and jansson recurses while
 * parsing, so a deep input is refused before it parses */
#define PW_RPC_DEPTH_MAX 32
/* bytes of one line the server sends (a reply or a notification, newline included): requests are
 * capped at PW_MSG_MAX, replies may be longer (a check of many paths) */
#define PW_RPC_REPLY_MAX (1024 * 1024)

/* ---- policy/bash/: the shell pre-flight (its step budget is in bash_internal.h) ---- */
/* sh -c 'sh -c ...' levels followed (deeper: unknown, "nesting too deep"); each level copies the
 * shell state */
#define PW_BASH_SHELL_NEST_MAX 8
#define PW_BASH_FOR_VALUES_MAX 16 /* for-loop values whose body is walked one by one */
/* times one function body is walked: enough for helpers called from a few places, bounded against
 * recursion */
#define PW_BASH_FUNC_CALLS_MAX 8
/* words one brace expansion may produce: {a,b}{c,d}... grows exponentially */
#define PW_BASH_BRACE_MAX 64
/* paths one glob may expand to (more: reported as too many, not listed) */
#define PW_BASH_GLOB_MATCHES_MAX 256
/* slash-separated parts of one glob expanded against the tree (more: -E2BIG, it is not expanded) */
#define PW_BASH_GLOB_SEGMENTS_MAX 64
#define PW_BASH_VARS_MAX 256  /* variables tracked (more are not recorded) */
#define PW_BASH_FUNCS_MAX 256 /* functions tracked (more are not recorded) */
/* bytes of an answer taken from the bash worker: PW_BASH_TARGETS_MAX targets with long paths fit */
#define PW_BASH_WORKER_ANSWER_MAX (32u << 20)

/* ---- base/: the kernel's own limits, mirrored ---- */
/* the kernel's TASK_COMM_LEN without its NUL: /proc/PID/comm holds at most this much */
#define PW_COMM_MAX 15
/* the kernel's nesting limit for PID namespaces (MAX_PID_NS_LEVEL) */
#define PW_PIDNS_DEPTH_MAX 32
/* room for a description at the deepest nesting: " INO:PID" is at most 32 bytes */
#define PW_PIDNS_DESC_MAX (PW_PIDNS_DEPTH_MAX * 32 + 1)

/* ---- fs/: the FUSE layer ---- */
#define PW_OVERLAP_QUEUE_MAX 4096 /* paths waiting for the overlap check; more are dropped */
/* names one node keeps for its hard links: past that the oldest is dropped, so a file linked
 * thousands of times costs no more than eight names */
#define PW_ALIASES_MAX 8
/* names of a node a check decides on (each one's path is on the stack): PW_ALIASES_MAX of them */
#define PW_ALIAS_CHECK_MAX 8
/* switches queued behind one attribute pass whose old policies are compared one by one; beyond
 * that the pass visits every node (switch.c) */
#define PW_INVAL_OLDS_MAX 8
/* slots of the table of changes the view expects to see from inotify (a power of two: the hash is
 * masked) */
#define PW_EXPECT_MAX 1024
/* supplementary groups of a caller the daemon takes on for a request (the first this many; on the
 * stack) */
#define PW_GROUPS_MAX 64
/* the largest pipe an unprivileged process may make by default (pipe-max-size). A spliced request
 * needs one pipe page for its header and fixed argument and one per page of data, so when
 * devio.c's pipes cannot be larger, the view's max_write is a page less than this (a 1 MiB
 * write(2) is then two WRITEs, and its data is still spliced) */
#define PW_DEVIO_PIPE_MAX (1024 * 1024)
/* seconds the kernel may keep entries, attributes, pages and listings of what a directory
 * that could not be watched holds (watch.c): a change made outside the view shows within
 * it, as elsewhere it shows at once */
#define PW_UNWATCHED_TIMEOUT_S 1.0
/* libfuse's worker threads of a view: requests in flight at once (more wait in the kernel); a
 * worker once made stays. A view makes one per CPU it may run on and one more, at least
 * PW_FS_WORKERS_MIN and at most PW_FS_WORKERS_MAX (fsmain.c has why no more) */
#define PW_FS_WORKERS_MIN 3
#define PW_FS_WORKERS_MAX 16
/* directory descriptors kept between requests (dircache.c; four per set, a power of two): the
 * daemon's descriptors stay bounded whatever the tree's size */
#define PW_DIRCACHE_SLOTS 64
/* the dircache's guard watches, beside the watcher's own (both count against the user's
 * inotify max_user_watches): directories past it are resolved every time, and the watcher
 * keeps the rest of the budget for coherence */
#define PW_DIRCACHE_GUARDS_MAX 8192

/* ---- fs/ctl/: the control plane ---- */
#define PW_RUN_ID_MAX 16 /* letters and digits of a run id (mkdtemp's six fit) */
/* sockets of one server: the main one and up to 7 agent sockets (one per `piworkfs run` at once) */
#define PW_CTL_LISTENERS_MAX 8
#define PW_CTL_CLIENTS_TOTAL_MAX                                                                   \
	(PW_CLIENTS_MAX +                                                                          \
	 (PW_CTL_LISTENERS_MAX - 1) * PW_AGENT_CLIENTS_MAX) /* every listener full at once: the    \
							     * main socket's slots plus each agent \
							     * socket's */
#define PW_CTL_EVENTS_MAX 256 /* notifications pending between two loop turns */
#define PW_CTL_MODULES_MAX 8  /* modules one server serves (more: -E2BIG at start) */
/* bytes of pending output per client by default: a client that never reads is dropped there
 * (pw_ctl_tuning.out_max) */
#define PW_CTL_OUT_DEFAULT_MAX (1024u * 1024u)
/* Jobs (ctl/jobs.c, server.h): agents together, and one agent connection, and the person's
 * own pool, which no agent can take. A few at once: each is a thread (a bash worker's) of a
 * daemon that also serves the filesystem. */
#define PW_CTL_AGENT_JOBS_PER_CLIENT 2
#define PW_CTL_AGENT_JOBS_MAX 4
#define PW_CTL_OPERATOR_JOBS_MAX 4
/* paths of one check call (the params check refuses more) */
#define PW_CHECK_PATHS_MAX 256
/* The text.* methods (an agent's texts): refusals explained by one text.refusals call (a
 * tool result shows at most 8; the rest are counted), bash.check targets one text.bash
 * reads (a command certain to be refused names a few), other views named by one
 * text.overlap, and bytes of the reader's name ("outside Pi"). */
#define PW_TEXT_REFUSALS_MAX 64
#define PW_TEXT_TARGETS_MAX 256
#define PW_TEXT_VIEWS_MAX 16
#define PW_TEXT_AGENT_MAX 64
/* bytes of an agent's cleaned reason (longer: cut, with "..."): a line in the person's consent bar
 * bytes of an agent's cleaned reason (longer: cut, with "..."): a line in the person's consent bar
 */
#define PW_REQUEST_REASON_MAX 200
#define PW_REQUEST_WAIT_MS_MAX 600000 /* longest blocking wait for an answer (10 minutes) */
#define PW_REQUEST_WAITERS_MAX 16     /* blocking callers of one request */
/* An approval (or reopening) of a plan tells every other live view of the project
 * (ctl/peers.c): at most this many views, each given this long to install the plans (its
 * attribute pass alone may take PW_SWITCH_ATTR_WAIT_MS) before the approval reports that it
 * did not answer. */
#define PW_PLAN_PEERS_MAX 64
#define PW_PLAN_SYNC_WAIT_MS 20000

/* ---- fs/store/: the store ---- */
#define PW_AUDIT_BATCH_MAX 4096u /* audit records the writer commits in one transaction */
/* bytes kept of a process or thread name: PW_COMM_MAX and its NUL */
#define PW_AUDIT_COMM_MAX 16

/* ---- undo: the originals, the journal, the change-set methods ---- */
/* inserted tokens' row ids remembered, for a delete after a failed change (it comes right after
 * its row's keep, so the last few thousand are plenty) */
#define PW_UNDO_ORIG_RECENT_MAX 16384
/* the default free-space floor is 5% of the filesystem, at most this (1 GiB) */
#define PW_UNDO_ORIG_FLOOR_MAX (1ull << 30)
/* bytes of one journal record: far above any row (a few strings and xattrs of at most 64 KiB
 * each); a larger record is committed at once */
#define PW_UNDO_JOURNAL_RECORD_MAX (4u << 20)
#define PW_UNDO_LIST_MAX 5000 /* entries in one changes.list reply (it says it was cut) */
/* diff text in one reply: under PW_RPC_REPLY_MAX with the JSON around it */
#define PW_UNDO_DIFF_BYTES_MAX (640 * 1024)
#define PW_UNDO_PATHS_MAX 256 /* paths one changes call names, like PW_CHECK_PATHS_MAX */
/* inodes the view changed and then forgot (the kernel's FORGET) remembered with the time of
 * that change, in each of two generations (fs/undo/forgotten.c): 32 bytes each, 4 MiB at
 * most; an inode older than both is judged as before (changed outside, unless --force) */
#define PW_UNDO_FORGOTTEN_MAX 65536u

/* ---- cli/ ---- */
#define PW_ALLOWED_TREE_MAX 20000 /* entries `allowed --files` reads before the walk stops */
/* lines of /proc/self/mountinfo read: more mounts than any host has; stop reading there */
#define PW_MOUNTINFO_LINES_MAX 100000
#define PW_RUN_SHARES_MAX 64	  /* --share paths of one run */
#define PW_RUN_PODMAN_ARGS_MAX 64 /* --podman-arg words of one run */
#define PW_RUN_INFO_MAX 4096	  /* bytes of bwrap's --info-fd JSON: it is a few lines */
#define PW_RUN_PROCS_MAX 4096	  /* processes of the sandbox signalled at most */
/* bytes of one line from the control socket while a run asks the person: PW_RPC_REPLY_MAX */
#define PW_ASK_LINE_MAX (1024 * 1024)
/* bytes of a mode (or plan) name shown in the consent bar: PW_MODE_NAME_MAX */
#define PW_ASK_MODE_SHOWN_MAX 64
#define PW_ASK_REASON_SHOWN_MAX 200   /* bytes of a reason shown: PW_REQUEST_REASON_MAX */
#define PW_MCP_LINE_MAX (1024 * 1024) /* bytes of one message from an MCP client */
#define PW_MCP_TEXT_MAX (64 * 1024)   /* text of one MCP tool answer (a diff is cut there) */
#define PW_MCP_CHANGES_MAX 200	      /* changes listed in one MCP answer */
/* a shell command for piworkfs_check_bash: the socket's message is PW_MSG_MAX (64 KiB) */
#define PW_MCP_COMMAND_MAX (60 * 1024)
/* bytes of one hook event: an event carries a tool's whole result */
#define PW_HOOK_INPUT_MAX (16 * 1024 * 1024)

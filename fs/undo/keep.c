/* SPDX-License-Identifier: MIT */
/*
 * Keeping originals before the view's changes (keep.h has the contract).
 *
 * Locking: the store's lock (pw_undo_orig_lock) guards the store, the set of paths recorded in
 * the current change set and the mode name. It is held across a whole keep, copy
 * included: a second writer of the same file waits until the first has kept the original,
 * so no write can land before it. The hooks run with the caller's credentials installed
 * (creds.c); the store belongs to the daemon, so they switch back to the daemon's own
 * while they touch it.
 */
#include "inode.h"
#include "keep.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <time.h>

#include "forgotten.h"
#include "overlap.h"
#include "path.h"
#include "procfs.h"
#include "util.h"

/* One path recorded in the current change set. */
typedef struct entry {
	char *path;
	int64_t row;	 /* its keep row */
	bool content;	 /* the row holds the content too (or the original was not a file) */
	bool created;	 /* nothing was there: what is there now the change set made */
	bool kept_below; /* created, and a row holding an original was recorded beneath it
			  * since (mark_kept_below): its removal is recorded after all */
	bool linked;	 /* a link of the change set made the name (or a rename moved such a
			  * name here): it names an object that may have been there before,
			  * whose other names are kept at its first change (keep_other_names) */
	struct entry *next;
} entry;

#define SET_BUCKETS 4096

struct pw_undo {
	pw_undo_orig_store *store;
	pw_fs *fs;
	char *project, *mountpoint;
	atomic_bool active;
	_Atomic int64_t cs; /* the current change set, 0 before the first */
	/* Under the store lock: */
	char *mode;
	entry *set[SET_BUCKETS];
	size_t n_set;
	bool disabled; /* a store error at start: nothing is kept (status says so) */
	/* Rows of the current change set not kept because the store was full, and since when
	 * (realtime ns): pw_undo_store_full. */
	_Atomic uint64_t full_rows;
	_Atomic int64_t full_since_ns;
	pw_overlap *overlap;	      /* told of each path first recorded (overlap.h); NULL: none */
	pw_undo_forgotten *forgotten; /* inodes the view changed, then forgot (forgotten.h) */
};

void pw_undo_set_overlap(pw_undo *k, pw_overlap *o)
{
	if (k)
		k->overlap = o;
}

pw_overlap *pw_undo_overlap(pw_undo *k)
{
	return k ? k->overlap : NULL;
}

uint64_t pw_undo_store_full(pw_undo *k, int64_t *ret_since_ns)
{
	if (ret_since_ns)
		*ret_since_ns = k ? atomic_load(&k->full_since_ns) : 0;
	return k ? atomic_load(&k->full_rows) : 0;
}

/* A row of the current change set was recorded without its content because the store is
 * full (issue 27): undo is incomplete from now on, which status says. */
static void note_not_kept(pw_undo *k, const pw_undo_orig_object *o)
{
	if (!o->not_kept || !streq(o->not_kept, "store-full"))
		return;
	if (atomic_fetch_add(&k->full_rows, 1) == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		atomic_store(&k->full_since_ns, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
	}
}

static entry *set_find(pw_undo *k, const char *path)
{
	size_t b = pw_fnv1a64_str(PW_FNV1A64_INIT, path) % SET_BUCKETS;

	for (entry *e = k->set[b]; e; e = e->next)
		if (streq(e->path, path))
			return e;
	return NULL;
}

/* The new entry, or NULL (out of memory). */
static entry *set_add(pw_undo *k, const char *path, int64_t row, bool content, bool created)
{
	entry *e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(path))) {
		free(e);
		return NULL;
	}
	e->row = row;
	e->content = content;
	e->created = created;
	size_t b = pw_fnv1a64_str(PW_FNV1A64_INIT, path) % SET_BUCKETS;
	e->next = k->set[b];
	k->set[b] = e;
	k->n_set++;
	return e;
}

/* Removes the entries PRED selects. */
static void set_remove_if(pw_undo *k, bool (*pred)(const entry *e, const void *u), const void *u)
{
	for (size_t b = 0; k->n_set && b < SET_BUCKETS; b++) {
		for (entry **pp = &k->set[b]; *pp;) {
			entry *e = *pp;
			if (pred(e, u)) {
				*pp = e->next;
				free(e->path);
				free(e);
				k->n_set--;
			} else {
				pp = &e->next;
			}
		}
	}
}

/*
 * A row holding an original (or a move) was recorded at PATH: the created directories
 * above it now hold something undo must put back through them, so their removal can no
 * longer go unrecorded (record_locked).
 */
static void mark_kept_below(pw_undo *k, const char *path)
{
	char p[PW_PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *slash; (slash = strrchr(p, '/'));) {
		*slash = '\0';
		entry *e = set_find(k, p);
		if (e && e->created)
			e->kept_below = true;
	}
}

static bool always(const entry *e, const void *u)
{
	return true;
}

/* PATH itself or anything beneath it (PATH "" is the root: everything). */
static bool under(const entry *e, const void *u)
{
	return pw_relpath_beneath(e->path, u);
}

static bool has_row(const entry *e, const void *u)
{
	return e->row == *(const int64_t *)u;
}

int pw_undo_new(const pw_undo_opts *o, pw_undo **ret)
{
	pw_undo *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->project = strdup(o->project);
	k->mountpoint = strdup(o->mountpoint);
	if (!k->project || !k->mountpoint) {
		pw_undo_free(k);
		return -ENOMEM;
	}
	int fr = pw_undo_forgotten_new(&k->forgotten);
	if (fr < 0) {
		pw_undo_free(k);
		return fr;
	}
	pw_undo_orig_opts so = {.db_path = o->db_path,
				.max_file = o->max_file,
				.keep_ns = o->keep_ns,
				.max_total = o->max_total,
				.defer_ns = o->defer_ns,
				.min_free = o->min_free};
	int r = pw_undo_orig_store_open(&so, &k->store);
	if (r < 0) {
		pw_undo_free(k);
		return r;
	}
	/* Retention at every start: the oldest change sets go first. */
	pw_undo_orig_lock(k->store);
	(void)pw_undo_orig_prune(k->store, 0, 0, 0, NULL);
	pw_undo_orig_unlock(k->store);
	*ret = k;
	return 0;
}

void pw_undo_free(pw_undo *k)
{
	if (!k)
		return;
	set_remove_if(k, always, NULL);
	pw_undo_orig_store_close(k->store);
	pw_undo_forgotten_free(k->forgotten);
	free(k->project);
	free(k->mountpoint);
	free(k->mode);
	free(k);
}

static void node_freed(pw_fs *fs, const pw_inode *n);

void pw_fs_set_undo(pw_fs *fs, pw_undo *k)
{
	if (k)
		k->fs = fs;
	fs->undo = k;
	if (fs->nodes)
		pw_inode_set_freed_hook(fs, k ? node_freed : NULL);
}

pw_undo *pw_fs_undo(pw_fs *fs)
{
	return fs ? fs->undo : NULL;
}

pw_undo_orig_store *pw_undo_keep_store(pw_undo *k)
{
	return k->store;
}

const char *pw_undo_keep_project(const pw_undo *k)
{
	return k->project;
}

const char *pw_undo_keep_mountpoint(const pw_undo *k)
{
	return k->mountpoint;
}

int64_t pw_undo_keep_current(pw_undo *k)
{
	return atomic_load(&k->cs);
}

/* With the store lock held. */
static int begin_locked(pw_undo *k, const char *reason, const char *name, int64_t *ret_id)
{
	int64_t id;
	int r = pw_undo_orig_changeset_begin(k->store, k->project, k->mountpoint, reason, name,
					     k->mode, &id);
	if (r < 0)
		return r;
	set_remove_if(k, always, NULL);
	atomic_store(&k->full_rows, 0); /* a new change set: nothing of it is missing yet */
	atomic_store(&k->cs, id);
	if (ret_id)
		*ret_id = id;
	return 0;
}

int pw_undo_keep_begin(pw_undo *k, const char *reason, const char *name, int64_t *ret_id)
{
	pw_undo_orig_lock(k->store);
	int r = begin_locked(k, reason, name, ret_id);
	pw_undo_orig_unlock(k->store);
	return r;
}

void pw_undo_policy_changed(pw_undo *k, const pw_policy *p, const char *reason, bool new_set)
{
	if (!k)
		return;
	pw_undo_orig_lock(k->store);
	char *mode = strdup(pw_policy_mode_name(p));
	if (mode) {
		free(k->mode);
		k->mode = mode;
	}
	bool on = pw_policy_keeps_originals(p) && !pw_policy_writes_nothing(p);
	if ((new_set || !atomic_load(&k->cs)) && on)
		(void)begin_locked(k, reason, NULL, NULL);
	atomic_store(&k->active, on && atomic_load(&k->cs) != 0);
	pw_undo_orig_unlock(k->store);
}

/* ---- the daemon's own credentials around the store ------------------------------------- */

typedef struct own_creds {
	bool changed;
	uid_t fsuid;
	gid_t fsgid;
} own_creds;

/* The daemon's own credentials, for the store (a thread serving root, or none, has them). */
static void creds_own(pw_fs *fs, own_creds *c)
{
	c->changed = fs && fs->is_root_daemon && pw_creds_switched();
	if (c->changed) {
		c->fsuid = (uid_t)setfsuid(0);
		c->fsgid = (gid_t)setfsgid(0);
	}
}

static void creds_back(own_creds *c)
{
	if (c->changed) {
		setfsgid(c->fsgid);
		setfsuid(c->fsuid);
	}
}

/* ---- recording --------------------------------------------------------------------------- */

typedef struct who {
	pid_t pid;
	bool known; /* comm read (only once a row needs it: most hooks record nothing) */
	char comm[PW_COMM_MAX + 1];
	char thread[PW_COMM_MAX + 1]; /* the asking thread's name when not the program's */
} who;

static void who_of(fuse_req_t req, who *w)
{
	w->pid = req ? fuse_req_ctx(req)->pid : getpid();
	w->known = false;
	w->comm[0] = '\0';
	w->thread[0] = '\0';
}

/* The process name for a row, read the first time one is recorded (from the thread's cache:
 * a build making thousands of files reads /proc once). */
static const char *who_comm(who *w)
{
	if (!w->known) {
		/* The program and its pid (the thread group leader's), not the thread that asked:
		 * Node's writes come from libuv-worker threads. */
		const pw_proc_who *c = pw_proc_who_cached(w->pid);
		snprintf(w->comm, sizeof(w->comm), "%s", c ? c->program : "");
		const char *thread = pw_proc_who_thread(c, w->pid);
		if (thread)
			snprintf(w->thread, sizeof(w->thread), "%s", thread);
		if (c)
			w->pid = c->tgid;
		w->known = true;
	}
	return w->comm[0] ? w->comm : NULL;
}

/*
 * The directory at PATH is about to go (an rmdir through the view, or undo removing or
 * replacing it). Its removal gets a row of its own: undo replays backwards, and the
 * directory must be back before the rows of what was removed from it, which come between
 * its first row (often a parent's, kept for its times) and its removal. So the entries at
 * and beneath PATH are forgotten and the caller records PATH anew. Unless the change set
 * made the directory and nothing beneath it holds an original: then what was removed from
 * it were names the change set made too, which undo removes, and the directory needs no
 * putting back. Returns whether PATH needs a row. Lock held.
 */
static bool dir_goes_locked(pw_undo *k, const char *path)
{
	entry *e = set_find(k, path);
	if (!e)
		return true;
	if (e->created && !e->kept_below)
		return false;
	set_remove_if(k, under, path);
	return true;
}

/*
 * Records PATH (NAME in DIRFD) in the current change set unless it is already; a row
 * recorded without content gets it now when CONTENT asks. Lock held. Returns the row id
 * (> 0) of a new row, 0 when nothing was added, or -errno.
 */
static int64_t record_locked(pw_undo *k, who *w, const char *path, int dirfd, const char *name,
			     bool content, bool implicit, const char *op)
{
	if (streq(op, "rmdir") && !dir_goes_locked(k, path))
		return 0;
	entry *e = set_find(k, path);
	if (e && (e->content || !content))
		return 0;
	pw_undo_orig_object o;
	int r = pw_undo_orig_capture(k->store, dirfd, name, content ? PW_UNDO_ORIG_CONTENT : 0, &o);
	if (r < 0)
		return r;
	note_not_kept(k, &o);
	if (e) {
		/* The row was metadata only (chmod, a parent's times): add the content, which
		 * no change through the view has touched yet. */
		if (o.present && S_ISREG(o.mode)) {
			r = pw_undo_orig_set_content(k->store, e->row, &o);
			if (r < 0) {
				pw_undo_orig_object_done(&o);
				return r;
			}
			mark_kept_below(k, path);
		}
		e->content = true;
		pw_undo_orig_object_done(&o);
		return 0;
	}
	(void)who_comm(w); /* first: it sets the pid to the process's */
	pw_undo_orig_row row = {
	    .changeset = atomic_load(&k->cs),
	    .action = PW_UNDO_ORIG_KEEP,
	    .path = path,
	    .implicit = implicit,
	    .obj = &o,
	    .op = op,
	    .comm = who_comm(w),
	    .thread = w->thread[0] ? w->thread : NULL,
	    .mode = k->mode,
	    .pid = w->pid,
	};
	int64_t id = 0;
	/* Committed with the next batch: the row is in the store's journal before the change,
	 * and the original's content (its blob) is in place already (originals.h). */
	bool created = !o.present && !implicit;
	/* A created name's row is queued (no SQL on the request path); any other deferred. */
	r = created ? pw_undo_orig_queue(k->store, &row, &id)
		    : pw_undo_orig_insert_deferred(k->store, &row, &id);
	/* A new name (nothing there) or a non-file needs no content. */
	bool full = content || !o.present || !S_ISREG(o.mode);
	pw_undo_orig_object_done(&o);
	if (r == 0 && !created)
		mark_kept_below(k, path);
	if (r == 0 && !set_add(k, path, id, full, created))
		r = -ENOMEM;
	if (r == 0 && !implicit)
		pw_overlap_note(k->overlap, path, w->pid, k->mode);
	return r < 0 ? r : id;
}

/* ---- a change through a name a link made ------------------------------------------------ */

/*
 * A link makes a new name for an object that may have been there before the change set:
 * its row says "created" (undo removes the name), but a change through it changes the
 * object under its other names too, so "a name the change set made keeps nothing" does not
 * hold for it. Its first change keeps the original under each other name of the object
 * instead, as a change to that name: a file changed through two names is then restored
 * once, under the name it had, and diff shows the change there. A link of a file the
 * change set made finds only names the change set made, and keeps nothing.
 */

static int open_parent(pw_undo *k, const char *path, const char **ret_name);

#define WALK_MAX_ENTRIES 1000000u
#define WALK_MAX_DEPTH 256

/* A walk of the backing tree for the names of inode DEV:INO (regular files) but SKIP: FOUND
 * is called with each, and returns 1 to stop, 0 to go on, or -errno to fail the walk. */
typedef struct name_walk {
	dev_t dev;
	ino_t ino;
	const char *skip;
	int (*found)(pw_undo *k, void *data, const char *path);
	void *data;
	unsigned budget;
} name_walk;
static int walk_names(pw_undo *k, name_walk *w);

/*
 * Keeps PATH's original when PATH is a name of the object ST describes: 1 when it is (kept
 * now, or recorded already), 0 when not (gone, or another object now), -errno when its
 * original could not be kept. Lock held.
 */
static int keep_alias_locked(pw_undo *k, who *w, const char *path, const struct stat *st,
			     const char *op)
{
	const char *name;
	_cleanup_close_ int dfd = open_parent(k, path, &name);
	if (dfd < 0)
		return dfd == -ENOENT || dfd == -ENOTDIR ? 0 : dfd;
	struct stat a;
	if (fstatat(dfd, name, &a, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (a.st_dev != st->st_dev || a.st_ino != st->st_ino)
		return 0;
	int64_t r = record_locked(k, w, path, dfd, name, true, false, op);
	return r < 0 ? (int)r : 1;
}

typedef struct alias_set {
	char *path[PW_ALIAS_CHECK_MAX]; /* the names the view knows (heap strings) */
	size_t n;
	size_t found; /* names of the object met so far */
	who *w;
	const char *op;
	const struct stat *st;
} alias_set;

static void alias_set_done(alias_set *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->path[i]);
}

/* The names of N the view knows, into A. 0 or -ENOMEM. */
static int alias_set_fill(pw_fs *fs, pw_inode *n, alias_set *a)
{
	PW_PATH_DECLARE(p);
	int r = 0;
	pw_inode_lock_read(fs);
	for (const pw_name *nm = n->names; nm && a->n < PW_ALIAS_CHECK_MAX && r == 0;
	     nm = nm->next) {
		if (pw_child_path_locked(fs, nm->parent, nm->name, &p) < 0)
			continue;
		if (!(a->path[a->n] = strdup(p.s)))
			r = -ENOMEM;
		else
			a->n++;
	}
	pw_inode_unlock(fs);
	return r;
}

/* A name the walk met (not PATH itself): kept unless the view knew it (counted already). */
static int keep_walked(pw_undo *k, void *data, const char *path)
{
	alias_set *a = data;
	for (size_t i = 0; i < a->n; i++)
		if (streq(a->path[i], path))
			return 0;
	int r = keep_alias_locked(k, a->w, path, a->st, a->op);
	if (r < 0)
		return r;
	a->found += (size_t)r;
	return a->found >= (size_t)a->st->st_nlink; /* every name met: stop */
}

/*
 * Before the first change of N through PATH (open at FD) in the change set: when a link of
 * the change set made PATH, keeps the originals of N's other names (see above). Its names
 * are those the view knows; a file with more links than that (names the view never
 * learnt, or whose node it forgot) is looked for by a bounded walk of the project. Lock
 * held. 0, or -errno: the change must not proceed (-EIO: the walk ran out before it met
 * every name, so what the change would change elsewhere could not be kept).
 */
static int keep_other_names_locked(pw_undo *k, who *w, pw_inode *n, const char *path, int fd,
				   const char *op)
{
	entry *e = set_find(k, path);
	if (!e || !e->linked || n->is_root || !S_ISREG(n->type))
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (st.st_nlink <= 1)
		return 0; /* its other names are gone, each kept as it went */
	_cleanup_(alias_set_done) alias_set a = {.w = w, .op = op, .st = &st};
	int r = alias_set_fill(k->fs, n, &a);
	for (size_t i = 0; r == 0 && i < a.n; i++) {
		int q = streq(a.path[i], path) ? 1 : keep_alias_locked(k, w, a.path[i], &st, op);
		if (q < 0)
			r = q;
		else
			a.found += (size_t)q;
	}
	if (r < 0 || a.found >= (size_t)st.st_nlink)
		return r;
	return walk_names(k, &(name_walk){.dev = st.st_dev,
					  .ino = st.st_ino,
					  .skip = path,
					  .found = keep_walked,
					  .data = &a,
					  .budget = WALK_MAX_ENTRIES});
}

static bool active(pw_fs *fs)
{
	return fs->undo && atomic_load(&fs->undo->active);
}

static const char *op_label(pw_op op)
{
	return pw_op_name(op);
}

/*
 * The fast path of pw_undo_keep_node, for the first write of a file the change set made (a
 * compiler's output, an editor's new file): PATH has a row holding what it was already, and
 * no link made the name (keep_other_names), so the change keeps nothing. Then N is marked
 * covered (if change set CS is still the current one) without opening it or switching
 * credentials. Returns whether it was.
 */
static bool covered_node(pw_undo *k, pw_inode *n, const char *path, uint64_t cs)
{
	pw_undo_orig_lock(k->store);
	entry *e = set_find(k, path);
	bool covered = e && e->content && !e->linked && (uint64_t)atomic_load(&k->cs) == cs;
	if (covered)
		atomic_store(&n->undo.kept_cs, cs);
	pw_undo_orig_unlock(k->store);
	return covered;
}

/*
 * Whether making or removing NAME (at PATH) in PARENT with OP records nothing: the parent
 * has a row already (its times are kept once) and PATH has one holding what it was, as
 * when a file the change set made is removed. Then pw_undo_keep_name neither captures nor
 * switches credentials. Not for rmdir (a directory's removal may need a row of its own)
 * nor link (it marks the name). Lock held.
 */
static bool name_recorded_locked(pw_undo *k, const char *path, const char *ppath, pw_op op)
{
	if (op == PW_OP_RMDIR || op == PW_OP_LINK)
		return false;
	entry *e = set_find(k, path);
	return e && e->content && set_find(k, ppath);
}

int pw_undo_keep_node(pw_req *req, pw_inode *n, pw_op op)
{
	pw_fs *fs = req->fs;
	if (!active(fs))
		return 0;
	pw_undo *k = fs->undo;
	uint64_t cs = (uint64_t)atomic_load(&k->cs);
	if (atomic_load(&n->undo.kept_cs) == cs)
		return 0;
	PW_PATH_DECLARE(path);
	int r = pw_node_path(fs, n, &path);
	if (r == -ENOENT)
		return 0; /* unlinked while open: no path, nothing to put back */
	if (r < 0)
		return r;
	if (covered_node(k, n, path.s, cs))
		return 0;
	own_creds c;
	creds_own(fs, &c);
	_cleanup_close_ int fd =
	    n->is_root ? fcntl(fs->root_fd, F_DUPFD_CLOEXEC, 0) : pw_open_node(fs, n, O_PATH);
	if (fd < 0) {
		creds_back(&c);
		return fd == -ENOENT || fd == -ESTALE ? 0 : fd;
	}
	who w;
	who_of(req->req, &w);
	pw_undo_orig_lock(k->store);
	int64_t id = 0;
	if ((uint64_t)atomic_load(&k->cs) == cs) {
		id = record_locked(k, &w, path.s, fd, "", true, false, op_label(op));
		if (id >= 0)
			id = keep_other_names_locked(k, &w, n, path.s, fd, op_label(op));
		if (id >= 0)
			atomic_store(&n->undo.kept_cs, cs);
	}
	pw_undo_orig_unlock(k->store);
	creds_back(&c);
	return id < 0 ? (int)id : 0;
}

/* Records the parent at PPATH (open at PFD) for its times, once per change set. Lock held. */
static int64_t record_parent_locked(pw_undo *k, who *w, const char *ppath, int pfd)
{
	return record_locked(k, w, ppath, pfd, "", false, true, "dir");
}

/* Ops that make a new name: pw_undo_keep_name's fast path serves them. */
static bool makes_name(pw_op op)
{
	return op == PW_OP_CREATE || op == PW_OP_MKNOD || op == PW_OP_MKDIR || op == PW_OP_SYMLINK;
}

/*
 * The fast path of pw_undo_keep_name for a name being made (a compiler's output, a file a
 * checkout brings) in a directory the change set has recorded: when nothing is there, the
 * row holds no object and is only queued (pw_undo_orig_queue_try: a journal record written to a
 * descriptor the store holds, and memory), so the caller's credentials may stay: four
 * system calls fewer each way. The probe runs as the caller, and only ENOENT takes this
 * path: permissions cannot make a name that is there look absent (the request itself needs
 * search permission on the parent). Anything else, or a name the set knows, takes the slow
 * path. Returns the token (> 0), 0 for the slow path, or -errno. Lock held.
 */
static int64_t made_name_locked(pw_undo *k, who *w, const char *ppath, int pfd, const char *path,
				const char *name, pw_op op)
{
	struct stat st;
	if (!makes_name(op) || set_find(k, path) || !set_find(k, ppath))
		return 0;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return 0;
	pw_undo_orig_object none = {0};
	(void)who_comm(w); /* first: it sets the pid to the process's */
	pw_undo_orig_row row = {
	    .changeset = atomic_load(&k->cs),
	    .action = PW_UNDO_ORIG_KEEP,
	    .path = path,
	    .obj = &none,
	    .op = op_label(op),
	    .comm = who_comm(w),
	    .thread = w->thread[0] ? w->thread : NULL,
	    .mode = k->mode,
	    .pid = w->pid,
	};
	int64_t id = 0;
	if (pw_undo_orig_queue_try(k->store, &row, &id) < 0)
		return 0;
	if (!set_add(k, path, id, true, true))
		return -ENOMEM;
	pw_overlap_note(k->overlap, path, w->pid, k->mode);
	return id;
}

int64_t pw_undo_keep_name(pw_req *req, int pfd, pw_op op)
{
	pw_fs *fs = req->fs;
	if (!active(fs))
		return 0;
	pw_undo *k = fs->undo;
	const char *path, *name = req->name;
	PW_PATH_DECLARE(pp); /* the parent's: a copy of the name's path's prefix */
	int r = pw_req_path(req, &path);
	if (r == 0)
		r = pw_req_parent_path(req, &pp);
	if (r < 0)
		return r;
	who w;
	who_of(req->req, &w);
	pw_undo_orig_lock(k->store);
	if (name_recorded_locked(k, path, pp.s, op)) {
		pw_undo_orig_unlock(k->store);
		return 0;
	}
	int64_t id = made_name_locked(k, &w, pp.s, pfd, path, name, op);
	if (id != 0) {
		pw_undo_orig_unlock(k->store);
		return id;
	}
	own_creds c;
	creds_own(fs, &c);
	id = record_parent_locked(k, &w, pp.s, pfd);
	if (id >= 0)
		id = record_locked(k, &w, path, pfd, name, true, false, op_label(op));
	if (id >= 0 && op == PW_OP_LINK) {
		/* The name may have been made, or recorded, before: it names this object now. */
		entry *e = set_find(k, path);
		if (e)
			e->linked = true;
	}
	creds_back(&c);
	pw_undo_orig_unlock(k->store);
	return id;
}

int64_t pw_undo_keep_rename(pw_req *req, int pfd, pw_inode *np, int npfd, const char *newname,
			    unsigned flags)
{
	pw_fs *fs = req->fs;
	if (!active(fs))
		return 0;
	pw_undo *k = fs->undo;
	const char *name = req->name;
	PW_PATH_DECLARE(fromp); /* the old name's parent: a copy of its path's prefix */
	PW_PATH_DECLARE(to);
	PW_PATH_DECLARE(npp);
	const char *from_s = NULL;
	int r = pw_req_path(req, &from_s);
	if (r == 0)
		r = pw_req_parent_path(req, &fromp);
	if (r == 0)
		r = pw_child_path(fs, np, newname, &to);
	if (r == 0 && np != req->parent)
		r = pw_node_path(fs, np, &npp);
	if (r < 0)
		return r;
	const char *np_path = np == req->parent ? fromp.s : npp.s; /* parents' paths */
	bool exchange = flags & RENAME_EXCHANGE;
	struct stat src;
	if (fstatat(pfd, name, &src, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* the rename will fail the same way */
	who w;
	who_of(req->req, &w);
	own_creds c;
	creds_own(fs, &c);
	pw_undo_orig_lock(k->store);
	int64_t id = record_parent_locked(k, &w, fromp.s, pfd);
	if (id >= 0)
		id = record_parent_locked(k, &w, np_path, npfd);
	pw_undo_orig_object dst = {0};
	/* Moving a file the change set made (not a directory: one can hold originals moved
	 * into it) to a name that loses no original keeps no original either: its row may be
	 * deferred like the file's own, and the new name is then one the change set made. */
	entry *made = set_find(k, from_s);
	bool cheap = !exchange && made && made->created && !S_ISDIR(src.st_mode);
	bool linked = made && made->linked; /* a link's name moved: still one (keep_other_names) */
	if (id >= 0 && !exchange) {
		/* What the destination loses: kept unless recorded already (with content). */
		entry *e = set_find(k, to.s);
		if (e && !e->content)
			id = record_locked(k, &w, to.s, npfd, newname, true, false, "rename");
		else if (!e)
			r = pw_undo_orig_capture(k->store, npfd, newname, PW_UNDO_ORIG_CONTENT,
						 &dst);
		if (r == 0)
			note_not_kept(k, &dst);
		if (r < 0)
			id = r;
		if (dst.present)
			cheap = false;
	}
	if (id >= 0) {
		(void)who_comm(&w); /* first: it sets the pid to the process's */
		pw_undo_orig_row row = {
		    .changeset = atomic_load(&k->cs),
		    .action = PW_UNDO_ORIG_MOVE,
		    .path = from_s,
		    .path2 = to.s,
		    .exchange = exchange,
		    .src_dev = src.st_dev,
		    .src_ino = src.st_ino,
		    .obj = &dst,
		    .op = "rename",
		    .comm = who_comm(&w),
		    .thread = w.thread[0] ? w.thread : NULL,
		    .mode = k->mode,
		    .pid = w.pid,
		};
		r = pw_undo_orig_insert_deferred(k->store, &row, &id);
		if (r < 0)
			id = r;
	}
	if (id >= 0) {
		pw_overlap_note(k->overlap, from_s, w.pid, k->mode);
		pw_overlap_note(k->overlap, to.s, w.pid, k->mode);
	}
	pw_undo_orig_object_done(&dst);
	if (id >= 0) {
		if (!cheap) {
			mark_kept_below(k, from_s);
			mark_kept_below(k, to.s);
		}
		/* Other objects live under both names now: their first changes are new. */
		set_remove_if(k, under, from_s);
		set_remove_if(k, under, to.s);
		/* ... but a file the change set made needs no original under its new name. */
		entry *e = cheap ? set_add(k, to.s, id, true, true) : NULL;
		if (cheap && !e)
			id = -ENOMEM;
		else if (e)
			e->linked = linked;
	}
	pw_undo_orig_unlock(k->store);
	creds_back(&c);
	return id;
}

void pw_undo_keep_failed(pw_fs *fs, int64_t token)
{
	if (token <= 0 || !fs->undo)
		return;
	pw_undo *k = fs->undo;
	own_creds c;
	creds_own(fs, &c);
	pw_undo_orig_lock(k->store);
	pw_undo_orig_delete(k->store, token);
	set_remove_if(k, has_row, &token);
	pw_undo_orig_unlock(k->store);
	creds_back(&c);
}

void pw_undo_keep_touched(pw_fs *fs, pw_inode *n)
{
	if (n && fs->undo)
		atomic_store(&n->undo.changed_ns, pw_clock_ns(CLOCK_REALTIME));
}

void pw_undo_keep_touched_ino(pw_fs *fs, dev_t dev, ino_t ino)
{
	if (!fs->undo)
		return;
	int64_t now = pw_clock_ns(CLOCK_REALTIME);
	pw_inode_lock_read(fs);
	pw_inode *n = pw_inode_find_locked(fs, dev, ino);
	if (n)
		atomic_store(&n->undo.changed_ns, now);
	pw_inode_unlock(fs);
	if (!n) /* an inode the view does not know (undo's own changes): remembered apart */
		pw_undo_forgotten_note(fs->undo->forgotten, dev, ino, 0, now);
}

/* The node table frees N (inode.h's freed hook, its lock held): when the view last changed
 * it outlives the node. */
static void node_freed(pw_fs *fs, const pw_inode *n)
{
	int64_t t = atomic_load(&n->undo.changed_ns);
	if (fs->undo && t)
		pw_undo_forgotten_note(fs->undo->forgotten, n->dev, n->ino, n->birth_ns, t);
}

int64_t pw_undo_keep_forgotten(pw_undo *k, dev_t dev, ino_t ino, int64_t birth_ns)
{
	return pw_undo_forgotten_get(k->forgotten, dev, ino, birth_ns);
}

/* ---- for undo ---------------------------------------------------------------------------- */

/* Opens PATH's parent beneath the root; *ret_name points into PATH. */
static int open_parent(pw_undo *k, const char *path, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		*ret_name = path;
		return fcntl(k->fs->root_fd, F_DUPFD_CLOEXEC, 0);
	}
	char dir[PW_PATH_MAX];
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*ret_name = slash + 1;
	return pw_openat_beneath(k->fs, dir, O_PATH | O_DIRECTORY, 0);
}

/* Records the parent of PATH (open at DFD) for its times. Lock held. */
static int64_t record_parent_of_locked(pw_undo *k, who *w, const char *path, int dfd)
{
	const char *slash = strrchr(path, '/');
	char pp[PW_PATH_MAX];
	snprintf(pp, sizeof(pp), "%.*s", slash ? (int)(slash - path) : 0, path);
	return record_locked(k, w, pp, dfd, "", false, true, "dir");
}

static void who_undo(who *w)
{
	*w = (who){.pid = getpid(), .known = true, .comm = "piworkfs"};
}

int pw_undo_keep_path_locked(pw_undo *k, int root_fd, const char *path, const char *op,
			     bool removes)
{
	if (!atomic_load(&k->cs) || !k->fs)
		return 0;
	const char *name = "";
	_cleanup_close_ int dfd = path[0] ? open_parent(k, path, &name) : -1;
	if (path[0] && dfd < 0)
		return dfd == -ENOENT || dfd == -ENOTDIR ? 0 : dfd; /* no parent: nothing there */
	who w;
	who_undo(&w);
	if (!path[0]) {
		int64_t r = record_locked(k, &w, path, root_fd, "", true, false, op);
		return r < 0 ? (int)r : 0;
	}
	int64_t r = record_parent_of_locked(k, &w, path, dfd);
	if (r < 0)
		return (int)r;
	struct stat st;
	if (removes && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
	    !dir_goes_locked(k, path))
		return 0;
	r = record_locked(k, &w, path, dfd, name, true, false, op);
	return r < 0 ? (int)r : 0;
}

int pw_undo_keep_move_locked(pw_undo *k, int root_fd, const char *from, const char *to,
			     bool exchange)
{
	if (!atomic_load(&k->cs) || !k->fs)
		return 0;
	/* Both parents' times, as a rename through the view keeps them (a redo puts them back). */
	who w;
	who_undo(&w);
	const char *names[2] = {from, to};
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		const char *name;
		_cleanup_close_ int dfd = open_parent(k, names[i], &name);
		if (dfd < 0)
			continue; /* the move fails the same way */
		int64_t r = record_parent_of_locked(k, &w, names[i], dfd);
		if (r < 0)
			return (int)r;
	}
	pw_undo_orig_object none = {0};
	pw_undo_orig_row row = {
	    .changeset = atomic_load(&k->cs),
	    .action = PW_UNDO_ORIG_MOVE,
	    .path = from,
	    .path2 = to,
	    .exchange = exchange,
	    .obj = &none,
	    .op = "undo",
	    .comm = "piworkfs",
	    .mode = k->mode,
	    .pid = getpid(),
	};
	struct stat st;
	if (fstatat(root_fd, from, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		row.src_dev = st.st_dev;
		row.src_ino = st.st_ino;
	}
	int r = pw_undo_orig_insert(k->store, &row, NULL);
	if (r == 0) {
		mark_kept_below(k, from);
		mark_kept_below(k, to);
		set_remove_if(k, under, from);
		set_remove_if(k, under, to);
	}
	return r;
}

/* ---- for undo: another name of an inode ------------------------------------------------- */

/* Is PATH (beneath the root) a regular file on inode DEV:INO, and not W->skip? */
static bool is_other_name(pw_undo *k, const name_walk *w, const char *path)
{
	if (streq(path, w->skip))
		return false;
	_cleanup_close_ int fd = pw_openat_beneath(k->fs, path, O_PATH, 0);
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == w->dev &&
	       st.st_ino == w->ino;
}

/* Looks through the directory DFD (PATH, LEN bytes of it) and beneath, on the inode's own
 * filesystem only. Takes DFD. 1: found (in W->out), 0: not there, -errno. */
static int walk_dir(pw_undo *k, name_walk *w, int dfd, char *path, size_t len, unsigned depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	int r = 0;
	for (struct dirent *de; r == 0 && w->budget && (de = readdir(d)); w->budget--) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		size_t nl = strlen(de->d_name);
		if (len + 1 + nl >= PW_PATH_MAX)
			continue;
		size_t at = len ? len + 1 : 0;
		if (len)
			path[len] = '/';
		memcpy(path + at, de->d_name, nl + 1);
		if (de->d_ino == w->ino && (de->d_type == DT_REG || de->d_type == DT_UNKNOWN) &&
		    is_other_name(k, w, path)) {
			r = w->found(k, w->data, path);
		} else if ((de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) &&
			   depth < WALK_MAX_DEPTH) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			struct stat st;
			if (sub >= 0 && (fstat(sub, &st) < 0 || st.st_dev != w->dev)) {
				close(sub); /* another filesystem cannot hold a link to it */
				sub = -1;
			}
			if (sub >= 0)
				r = walk_dir(k, w, sub, path, at + nl, depth + 1);
		}
		path[len] = '\0';
	}
	closedir(d);
	return r;
}

/* From the project's root. 0: walked it all (or stopped by FOUND), -EIO: out of budget
 * first, or FOUND's -errno. */
static int walk_names(pw_undo *k, name_walk *w)
{
	int dfd = openat(k->fs->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	char path[PW_PATH_MAX] = "";
	int r = walk_dir(k, w, dfd, path, 0, 0);
	return r < 0 ? r : r == 0 && !w->budget ? -EIO : 0;
}

static int first_found(pw_undo *k, void *data, const char *path)
{
	snprintf(data, PW_PATH_MAX, "%s", path);
	return 1;
}

int pw_undo_keep_other_name(pw_undo *k, dev_t dev, ino_t ino, const char *not_path,
			    char ret_path[PW_PATH_MAX])
{
	if (!k->fs)
		return -ENOENT;
	name_walk w = {.dev = dev,
		       .ino = ino,
		       .skip = not_path,
		       .found = first_found,
		       .data = ret_path,
		       .budget = WALK_MAX_ENTRIES};
	/* The view's own table first: a name it has looked up. */
	PW_PATH_DECLARE(p);
	pw_inode_lock_read(k->fs);
	pw_inode *n = pw_inode_find_locked(k->fs, dev, ino);
	int r = n ? pw_node_path_locked(k->fs, n, &p) : -ENOENT;
	pw_inode_unlock(k->fs);
	if (r == 0 && is_other_name(k, &w, p.s)) {
		snprintf(ret_path, PW_PATH_MAX, "%s", p.s);
		return 0;
	}
	/* Then the whole tree, bounded. */
	int dfd = openat(k->fs->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	char path[PW_PATH_MAX] = "";
	r = walk_dir(k, &w, dfd, path, 0, 0);
	return r < 0 ? r : r == 1 ? 0 : -ENOENT;
}

/* SPDX-License-Identifier: MIT */
/* Creating, mounting, serving and tearing down one view's FUSE session. */
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devio.h"
#include "dircache.h"
#include "fh.h"
#include "fs_internal.h"
#include "inode.h"
#include "optable.h"
#include "procfs.h"
#include "pw_limits.h"
#include "req.h"
#include "switch.h"
#include "watch.h"
#include "util.h"

_printf_(2, 3) static void set_err(char **ret_err, const char *fmt, ...)
{
	if (!ret_err)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(ret_err, fmt, ap) < 0)
		*ret_err = NULL;
	va_end(ap);
}

/*
 * Does the kernel check permission bits itself? Always under allow_other: the kernel opens
 * FIFOs and device nodes, and connects to Unix sockets, without a request to the daemon, so
 * only its own check (default_permissions) keeps one user out of another's private special
 * file while every other operation on the name keeps the backing filesystem's answers. The
 * lookup is all the daemon would see, and it cannot tell an open from a stat, a chmod or an
 * unlink. What the kernel's check would cost the mode is kept by reporting the backing
 * file's own write bits in such a view (check.c): every write the kernel lets through
 * reaches the policy, which answers EROFS or EACCES and records the denial. The price,
 * written in docs/SECURITY.md: stat and access(W_OK) show the backing's permission, not
 * the mode's.
 */
static bool kernel_checks(const pw_fs_opts *o)
{
	return o->allow_other || pw_opts_has(o->fuse_opts, "default_permissions");
}

/* fsname shows the project in mount(8) and /proc/self/mountinfo; ',' and '\' are escaped
 * for libfuse's option parser. allow_other brings default_permissions (kernel_checks). */
static char *mount_options(const pw_fs_opts *o)
{
	size_t len = strlen(o->project);
	_cleanup_free_ char *fsname = malloc(len * 2 + 1);
	if (!fsname)
		return NULL;
	char *q = fsname;
	for (const char *p = o->project; *p; p++) {
		if (*p == ',' || *p == '\\')
			*q++ = '\\';
		*q++ = *p;
	}
	*q = '\0';
	char *opts = NULL;
	bool add_dp = o->allow_other && !pw_opts_has(o->fuse_opts, "default_permissions");
	if (asprintf(&opts, "fsname=%s,subtype=piworkfs%s%s%s%s", fsname,
		     o->allow_other ? ",allow_other" : "", add_dp ? ",default_permissions" : "",
		     o->fuse_opts && *o->fuse_opts ? "," : "",
		     o->fuse_opts ? o->fuse_opts : "") < 0)
		return NULL;
	return opts;
}

/* Removes NAME from the comma-separated OPTS (in place); returns whether it was there. */
static bool take_option(char *opts, const char *name)
{
	bool found = false;
	size_t n = strlen(name);
	char *w = opts;
	for (char *p = opts; p && *p;) {
		char *end = strchrnul(p, ',');
		size_t len = (size_t)(end - p);
		if (len == n && strncmp(p, name, n) == 0) {
			found = true;
		} else if (len) {
			if (w != opts)
				*w++ = ',';
			memmove(w, p, len);
			w += len;
		}
		p = *end ? end + 1 : end;
	}
	if (opts)
		*w = '\0';
	return found;
}

/*
 * FUSE over io_uring: taken wherever the kernel allows it, since it costs about half of
 * /dev/fuse per request on many-file workloads (docs/internals/fs.md). -o io_uring (ours,
 * never passed to libfuse) requires it, -o no_io_uring refuses it; without either,
 * PIWORKFS_IO_URING in the daemon's environment decides (1: require, 0: refuse; the test
 * passes run a whole suite over one transport with it), else the kernel does.
 */
pw_uring_choice pw_fs_uring_choice(const char *fuse_opts)
{
	bool require = pw_opts_has(fuse_opts, "io_uring");
	bool refuse = pw_opts_has(fuse_opts, "no_io_uring");
	if (require != refuse)
		return require ? PW_URING_REQUIRE : PW_URING_REFUSE;
	const char *env = getenv("PIWORKFS_IO_URING");
	if (!env || !*env || require) /* both options (the CLI refuses that): the kernel decides */
		return PW_URING_AUTO;
	return strcmp(env, "0") == 0 ? PW_URING_REFUSE : PW_URING_REQUIRE;
}

/* Decides, before mounting, whether the INIT reply will accept FUSE over io_uring. A
 * transport that was required and cannot be had fails the mount; one taken by default
 * falls back to /dev/fuse with the probe's one line (what it costs, how to turn it on). */
static int decide_uring(char *fuse_opts, bool *wanted, char **ret_err)
{
	pw_uring_choice c = pw_fs_uring_choice(fuse_opts);
	(void)take_option(fuse_opts, "io_uring");
	(void)take_option(fuse_opts, "no_io_uring");
	*wanted = false;
	if (c == PW_URING_REFUSE)
		return 0;
	char why[600];
	if (pw_fs_uring_probe(why, sizeof(why)) == 0) {
		*wanted = true;
		return 0;
	}
	if (c == PW_URING_REQUIRE) {
		set_err(ret_err, "-o io_uring: %s", why);
		return -EOPNOTSUPP;
	}
	fprintf(stderr, "piworkfs: serving through /dev/fuse: %s\n", why);
	return 0;
}

/*
 * Mounts the session at the mountpoint, or, with a descriptor another process mounted,
 * takes that one: libfuse 3.14 reads the mountpoint "/dev/fd/N" as "N is an open,
 * mounted /dev/fuse" and then leaves mounting and unmounting to whoever mounted it.
 */
static int session_mount(pw_fs *fs, const pw_fs_opts *o, char **ret_err)
{
	char target[32];

	if (!o->use_fuse_fd) {
		if (fuse_session_mount(fs->se, o->mountpoint) == 0)
			return 0;
		set_err(ret_err, "cannot mount on %s (see the messages above)", o->mountpoint);
		return -EIO;
	}
	snprintf(target, sizeof(target), "/dev/fd/%d", o->fuse_fd);
	if (fuse_session_mount(fs->se, target) != 0) {
		set_err(ret_err, "cannot serve the FUSE descriptor %d", o->fuse_fd);
		return -EBADF;
	}
	fs->passed_fd = true;
	return 0;
}

/* The topmost mount at FS's mountpoint in our mount namespace (its device in *MAJ, *MIN),
 * or false when none is there or mountinfo cannot be read. Never a request to the view: a
 * stat of the mountpoint would wait for a daemon that no longer serves. */
static bool topmost_mount(const pw_fs *fs, unsigned *maj, unsigned *min)
{
	pw_mountinfo *m = NULL;
	size_t n = 0;
	bool found = false;

	if (pw_mountinfo_read(PW_MOUNTINFO_LINES_MAX, &m, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++) /* in file order: a later mount covers an earlier one */
		if (streq(m[i].mountpoint, fs->mountpoint)) {
			*maj = m[i].maj;
			*min = m[i].min;
			found = true;
		}
	pw_mountinfo_free(m, n);
	return found;
}

static void note_mount_device(pw_fs *fs)
{
	unsigned maj, min;

	if (topmost_mount(fs, &maj, &min)) {
		fs->mount_maj = maj;
		fs->mount_min = min;
	}
}

/*
 * May the teardown unmount what is at the mountpoint? Not when another mount is there now:
 * our view was unmounted (`piworkfs umount`, which then ends the daemon, or fusermount3 -u)
 * while a copy of it in another mount namespace (a sandbox, `unshare -m`, a service with
 * private mounts, all made while it was mounted) kept the connection alive, and a new view
 * was mounted at the same place. libfuse's unmount would detach that one. Nothing there, or
 * ours, or not known: as libfuse does.
 */
static bool may_unmount(const pw_fs *fs)
{
	unsigned maj, min;

	if (fs->passed_fd || (fs->mount_maj == 0 && fs->mount_min == 0))
		return true;
	return !topmost_mount(fs, &maj, &min) || (maj == fs->mount_maj && min == fs->mount_min);
}

int pw_fs_new(const pw_fs_opts *o, pw_fs **ret, char **ret_err)
{
	_cleanup_free_ char *opts = NULL;
	_cleanup_free_ char *fuse_opts = pw_dup_or_null(o->fuse_opts);
	if (o->fuse_opts && !fuse_opts)
		return -ENOMEM;
	pw_fs_opts mo = *o;
	mo.fuse_opts = fuse_opts;
	pw_fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->root_fd = -1;
	fs->timeout = o->cache_timeout > 0 ? o->cache_timeout : 86400.0;
	fs->no_watch = o->no_watch;
	fs->allow_other = o->allow_other;
	fs->default_permissions = kernel_checks(o);
	fs->is_root_daemon = geteuid() == 0;
	fs->owner_uid = getuid();
	fs->project = strdup(o->project);
	fs->mountpoint = strdup(o->mountpoint);
	pw_policy *starting = pw_policy_new_fail_closed("(starting)", "the view is starting");
	int r = -ENOMEM;
	if (!starting || pw_policy_slot_init(fs, starting) < 0 || pw_fh_table_init(fs) < 0 ||
	    pw_inval_init(fs) < 0 || !fs->project || !fs->mountpoint)
		goto fail;
	r = pw_inode_table_init(fs);
	if (r < 0)
		goto fail;
	bool uring_wanted;
	r = decide_uring(fuse_opts, &uring_wanted, ret_err);
	if (r < 0)
		goto fail;

	fs->root_fd = open(o->project, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fs->root_fd < 0 || fstat(fs->root_fd, &st) < 0) {
		r = negative_errno();
		set_err(ret_err, "cannot open project %s: %s", o->project, strerror(-r));
		goto fail;
	}
	fs->root_dev = st.st_dev;
	pw_inode_set_root(fs, st.st_dev, st.st_ino);

	/* Watches are added by lookups, which start once mounted: start the watcher first,
	 * and the directory cache, whose guards are added beside the watches. */
	r = pw_watch_start(fs);
	if (r < 0) {
		set_err(ret_err, "cannot watch %s: %s", o->project, strerror(-r));
		goto fail;
	}
	r = pw_dircache_start(fs);
	if (r < 0)
		goto fail;
	r = pw_inval_start(fs);
	if (r < 0)
		goto fail;

	opts = mount_options(&mo);
	if (!opts) {
		r = -ENOMEM;
		goto fail;
	}
	char *argv[] = {"piworkfs", "-o", opts, o->debug ? "-d" : NULL, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);
	fs->se = fuse_session_new(&args, &pw_fs_ops, sizeof(pw_fs_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		r = -EINVAL;
		set_err(ret_err, "invalid mount options: %s", opts);
		goto fail;
	}
	r = session_mount(fs, o, ret_err);
	if (r < 0)
		goto fail;
	if (!fs->passed_fd)
		note_mount_device(fs);
	r = pw_devio_attach(fs, uring_wanted);
	if (r < 0) {
		set_err(ret_err, "cannot set up the FUSE device: %s", strerror(-r));
		goto fail;
	}
	*ret = fs;
	return 0;
fail:
	pw_fs_free(fs);
	return r;
}

void pw_fs_set_audit(pw_fs *fs, struct pw_audit *audit)
{
	fs->audit = audit;
}

/*
 * A descriptor per worker thread (libfuse's clone_fd: it opens /dev/fuse and clones the
 * session's connection onto it) spares the threads one queue's contention. A server given
 * its descriptor (--fuse-fd) is often one that may not open /dev/fuse at all (the CSI
 * pattern, docs/DEPLOY.md): then the threads share the one descriptor, instead of libfuse
 * trying, logging an error and giving up on the first thread.
 */
static bool clone_fd_usable(const pw_fs *fs)
{
	if (!fs->passed_fd)
		return true;
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* The CPUs this process may run on (its affinity: taskset, a cgroup's cpuset), at least 1. */
static unsigned usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : 1;
}

/*
 * How many workers a view makes: one per usable CPU and a spare, so that a request that waits
 * on the disk leaves every CPU a worker, within [PW_FS_WORKERS_MIN, PW_FS_WORKERS_MAX].
 * PIWORKFS_WORKERS=N in the daemon's environment sets it (1 to PW_FS_WORKERS_MAX), for
 * measurements and for a project on storage slow enough to want more requests in flight.
 *
 * Why not more: the kernel hands each request to the worker that has waited longest in
 * read(2) (its wait queue is first in, first out), so every worker made takes its turn,
 * and a worker that has slept longest has the coldest caches. With libfuse starting a worker
 * whenever none is left waiting, two processes creating files at once grew a view to seven
 * workers; held to three on this 2-CPU VM, the daemon's CPU per run fell by 10 to 20% on
 * create+delete with 2 and 4 processes and on rg (docs/PERF.md, December 7), and a single
 * process, which never needed more, is unchanged.
 */
static unsigned workers_wanted(void)
{
	const char *env = getenv("PIWORKFS_WORKERS");
	if (env && *env) {
		char *end;
		unsigned long n = strtoul(env, &end, 10);
		if (!*end && n >= 1 && n <= PW_FS_WORKERS_MAX)
			return (unsigned)n;
		fprintf(stderr, "piworkfs: PIWORKFS_WORKERS=%s is not 1 to %d: ignored\n", env,
			PW_FS_WORKERS_MAX);
	}
	unsigned n = usable_cpus() + 1;
	if (n < PW_FS_WORKERS_MIN)
		return PW_FS_WORKERS_MIN;
	return n > PW_FS_WORKERS_MAX ? PW_FS_WORKERS_MAX : n;
}

int pw_fs_loop(pw_fs *fs)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, clone_fd_usable(fs));
	/* Workers, once made, stay: libfuse starts one whenever none is left waiting and ends
	 * one that finds more idle than this, so with 4 a workload with a few requests in
	 * flight at once (rg, make -j) made and ended a thread (clone, its stack, its /dev/fuse
	 * clone) every few dozen requests. So the idle limit is the pool's size: at most
	 * workers_wanted() wait, each with its descriptor and a request buffer. */
	unsigned workers = workers_wanted();
	fuse_loop_cfg_set_max_threads(cfg, workers);
	fuse_loop_cfg_set_idle_threads(cfg, workers);
	int r = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	/* The kernel ends a connection with ENODEV (libfuse's clean end), but a thread that was
	 * taking a request off the queue as an unmount tore the connection down gets
	 * ECONNABORTED instead (the request is dropped, fs/fuse/dev.c), and libfuse calls that
	 * an error. Either way the connection is over and nothing is left to serve: an unmount
	 * that raced a request in flight (a RELEASE the last close sent) must not make the
	 * daemon exit as if it had failed. */
	if (r == -ECONNABORTED) {
		fprintf(stderr, "piworkfs: the kernel ended the connection (an unmount raced a "
				"request in flight, or it was aborted)\n");
		r = 0;
	}
	return r < 0 ? r : 0;
}

void pw_fs_exit(pw_fs *fs)
{
	if (fs && fs->se)
		fuse_session_exit(fs->se);
}

/* A session whose mountpoint holds another mount now (may_unmount): only libfuse's unmount
 * frees what the session keeps of its mountpoint, so it is left as it is, reachable from
 * here, and the process's exit closes its descriptor, which ends the connection. `used`:
 * a variable only ever written is otherwise optimised away, and LeakSanitizer then
 * reports the session as lost. */
static struct fuse_session *left_session __attribute__((used));

void pw_fs_free(pw_fs *fs)
{
	if (!fs)
		return;
	pw_watch_stop(fs);
	pw_inval_stop(fs);
	if (fs->se) {
		bool ours = may_unmount(fs);

		if (ours)
			fuse_session_unmount(fs->se);
		else
			fprintf(stderr, "piworkfs: %s holds another mount now: left as it is\n",
				fs->mountpoint);
		/* The ring threads handle requests with the session: stop them first (the
		 * unmount has ended their entries). */
		pw_devio_detach(fs);
		if (ours)
			fuse_session_destroy(fs->se);
		else
			left_session = fs->se;
	}
	pw_fh_close_all(fs);
	pw_watch_free(fs);
	pw_dircache_free(fs);
	if (fs->root_fd >= 0)
		close(fs->root_fd);
	pw_policy_slot_free(fs);
	pw_inode_table_free(fs);
	pw_inval_free(fs);
	free(fs->project);
	free(fs->mountpoint);
	free(fs);
}

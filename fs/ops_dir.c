/* SPDX-License-Identifier: MIT */
/*
 * Directory operations and the ones that change names. Link and rename are checked on
 * both names, so a hard link or a rename can never move a read-only or protected file into
 * a writable name, or a writable one over a read-only name. Renaming a directory is also
 * refused when a deny or protected rule may apply beneath it (pw_policy_may_write_tree):
 * otherwise `mv .git g && edit g/hooks/x && mv g .git` would step around the protection.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "entry.h"
#include "fh.h"
#include "inode.h"
#include "undo/undo.h"
#include "ops.h"
#include "ops_dir.h"
#include "watch.h"

#define PW_DIRBUF 32768

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int check_name(const char *name)
{
	if (strlen(name) > PW_NAME_MAX)
		return -ENAMETOOLONG;
	return pw_name_valid(name) ? 0 : -EINVAL;
}

/* Finishes a successful creation of R's name (its parent open at PFD) with an entry reply,
 * drawn under R's policy. MADE: a new object (not a link to a known one). */
static void reply_new_entry(pw_req *r, int pfd, bool made)
{
	pw_fs *fs = r->fs;
	struct fuse_entry_param e;
	int err = pw_do_lookup(r, pfd, made, &e, NULL);
	if (err == 0)
		pw_undo_keep_touched(fs, pw_inode_get(fs, e.ino));
	pw_req_leave(r);
	if (err < 0)
		fuse_reply_err(r->req, -err);		  /* a hidden name: ENOENT */
	else if (fuse_reply_entry(r->req, &e) == -ENOENT) /* interrupted: no reference taken */
		pw_inode_forget(fs, pw_inode_get(fs, e.ino), 1);
}

/*
 * What every new name goes through before its syscall (mknod, mkdir, symlink, create): the
 * name checked, the parent opened (*PFD, the caller closes it), the mode's decision, then a
 * hidden name that exists answers ENOENT, then the original is kept (*RET_KEPT, a token for
 * pw_undo_keep_failed). A new name that exists but is hidden answers ENOENT only once the mode
 * allowed making it: a refusal must read the same for a hidden name and a free one, or
 * refused creates would tell which hidden names exist (pw_policy_decide_new_name). Only
 * under hide rules is the name looked at first (*RET_LOOKED; *RET_EXISTED then says whether
 * it was there): without them what it holds decides nothing here. Returns 0 or -errno.
 */
int pw_new_entry_begin(pw_req *r, fuse_ino_t parent_ino, const char *name, pw_op op, bool is_dir,
		       pw_new_entry *ne)
{
	ne->pfd = -1;
	ne->dir = (pw_dir_ref)PW_DIR_REF_INIT;
	ne->kept = 0;
	ne->looked = ne->existed = false;
	pw_req_name(r, pw_inode_get(r->fs, parent_ino), name);
	int e = check_name(name);
	if (e < 0)
		return e;
	ne->pfd = pw_dir_open(r->fs, r->parent, &ne->dir);
	if (ne->pfd < 0)
		return ne->pfd;
	e = pw_check_child(r, op, is_dir);
	if (e < 0)
		return e;
	ne->looked = pw_req_hides(r);
	if (ne->looked) {
		struct stat before;
		ne->existed = fstatat(ne->pfd, name, &before, AT_SYMLINK_NOFOLLOW) == 0;
		if (ne->existed && pw_hidden_child(r, S_ISDIR(before.st_mode)))
			return -ENOENT;
	}
	ne->kept = pw_undo_keep_name(r, ne->pfd, op);
	return ne->kept < 0 ? (int)ne->kept : 0;
}

void pw_new_entry_done(pw_new_entry *ne)
{
	pw_dir_close(&ne->dir);
	ne->pfd = -1;
}

/* The end of mknod, mkdir and symlink: MADE is the syscall's result (errno set when < 0). */
static void new_entry_end(pw_req *r, pw_new_entry *ne, int tok, int made)
{
	if (made < 0) {
		int e = errno;
		pw_watch_unexpect(r->fs, tok);
		pw_undo_keep_failed(r->fs, ne->kept);
		pw_req_reply_err(r, e);
		return;
	}
	reply_new_entry(r, ne->pfd, true);
}

/* What a new entry of mknod, mkdir or symlink is made of. */
typedef struct new_entry_args {
	mode_t mode;
	dev_t rdev;
	const char *target;
} new_entry_args;

/* MKNOD, MKDIR and SYMLINK (OPCODE): the new name's steps, then its one syscall. */
static void new_entry_op(fuse_req_t req, fuse_ino_t parent_ino, const char *name, unsigned opcode,
			 const new_entry_args *a)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	_cleanup_(pw_new_entry_done) pw_new_entry ne;
	int e = pw_new_entry_begin(&r, parent_ino, name, pw_opmap_op(opcode), opcode == FUSE_MKDIR,
				   &ne);
	if (e < 0) {
		pw_req_reply_err(&r, -e);
		return;
	}
	int tok = pw_req_expect(&r, PW_EXPECT_NAME_ADDED);
	int made = opcode == FUSE_MKDIR	    ? mkdirat(ne.pfd, name, a->mode)
		   : opcode == FUSE_SYMLINK ? symlinkat(a->target, ne.pfd, name)
					    : mknodat(ne.pfd, name, a->mode, a->rdev);
	new_entry_end(&r, &ne, tok, made);
}

void pw_op_mknod(fuse_req_t req, fuse_ino_t parent_ino, const char *name, mode_t mode, dev_t rdev)
{
	new_entry_op(req, parent_ino, name, FUSE_MKNOD,
		     &(new_entry_args){.mode = mode, .rdev = rdev});
}

void pw_op_mkdir(fuse_req_t req, fuse_ino_t parent_ino, const char *name, mode_t mode)
{
	new_entry_op(req, parent_ino, name, FUSE_MKDIR, &(new_entry_args){.mode = mode});
}

void pw_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent_ino, const char *name)
{
	/* The target is stored as given; the daemon never follows it. The kernel resolves it
	 * in the reader's namespace, through the view, where the policy applies again. */
	new_entry_op(req, parent_ino, name, FUSE_SYMLINK, &(new_entry_args){.target = target});
}

void pw_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent_ino, const char *name)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_inode *n = pw_inode_get(fs, ino);
	pw_req_name(&r, pw_inode_get(fs, parent_ino), name);
	int e = check_name(name);
	if (e < 0) {
		pw_req_reply_err(&r, -e);
		return;
	}
	_cleanup_(pw_dir_close) pw_dir_ref pd = PW_DIR_REF_INIT;
	int pfd = pw_dir_open(fs, r.parent, &pd);
	if (pfd < 0) {
		pw_req_reply_err(&r, -pfd);
		return;
	}
	/* Every name of the source (the event carries the new name as its second path),
	 * then the new name itself. */
	const char *newpath;
	e = pw_req_path(&r, &newpath);
	if (e == 0)
		e = pw_check_node_ex(&r, pw_opmap_op(FUSE_LINK), n, -1, newpath);
	if (e == 0)
		e = pw_check_child(&r, pw_opmap_op(FUSE_LINK), false);
	if (e < 0) {
		pw_req_reply_err(&r, -e);
		return;
	}
	if (pw_hidden_existing(&r, pfd)) { /* after the mode, as above */
		pw_req_reply_err(&r, ENOENT);
		return;
	}
	_cleanup_close_ int fd = pw_open_node(fs, n, O_PATH);
	if (fd < 0) {
		pw_req_reply_err(&r, -fd);
		return;
	}
	int64_t kept = pw_undo_keep_name(&r, pfd, pw_opmap_op(FUSE_LINK));
	if (kept < 0) {
		pw_req_reply_err(&r, (int)-kept);
		return;
	}
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	int tok = pw_req_expect(&r, PW_EXPECT_NAME_ADDED);
	if (linkat(AT_FDCWD, proc, pfd, name, AT_SYMLINK_FOLLOW) < 0) {
		e = errno;
		pw_watch_unexpect(fs, tok);
		pw_undo_keep_failed(fs, kept);
		pw_req_reply_err(&r, e);
		return;
	}
	reply_new_entry(&r, pfd, false);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent_ino, const char *name, bool dir)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_req_name(&r, pw_inode_get(fs, parent_ino), name);
	_cleanup_(pw_dir_close) pw_dir_ref pd = PW_DIR_REF_INIT;
	int pfd = pw_dir_open(fs, r.parent, &pd);
	if (pfd < 0) {
		pw_req_reply_err(&r, -pfd);
		return;
	}
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		pw_req_reply_err(&r, errno);
		return;
	}
	if (pw_hidden_child(&r, S_ISDIR(st.st_mode))) {
		pw_req_reply_err(&r, ENOENT);
		return;
	}
	pw_op op = pw_opmap_op(dir ? FUSE_RMDIR : FUSE_UNLINK);
	int e = pw_check_child(&r, op, S_ISDIR(st.st_mode));
	if (e < 0) {
		pw_req_reply_err(&r, -e);
		return;
	}
	int64_t kept = pw_undo_keep_name(&r, pfd, op);
	if (kept < 0) {
		pw_req_reply_err(&r, (int)-kept);
		return;
	}
	int tok = pw_req_expect(&r, PW_EXPECT_NAME_REMOVED);
	if (unlinkat(pfd, name, dir ? AT_REMOVEDIR : 0) < 0) {
		e = errno;
		pw_watch_unexpect(fs, tok);
		pw_undo_keep_failed(fs, kept);
		pw_req_reply_err(&r, e);
		return;
	}
	pw_undo_keep_touched_ino(fs, st.st_dev, st.st_ino); /* its other names' ctime */
	pw_inode_unlinked(fs, r.parent, name, st.st_dev, st.st_ino);
	pw_req_reply_err(&r, 0);
}

void pw_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, false);
}

void pw_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, true);
}

void pw_op_rename(fuse_req_t req, fuse_ino_t parent_ino, const char *name, fuse_ino_t np_ino,
		  const char *newname, unsigned int flags)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	/* RENAME_WHITEOUT leaves a character device 0:0 at the old name (for overlayfs): a
	 * device node in the backing tree, made with the daemon's CAP_MKNOD when it runs as
	 * root, for a view that is no overlay layer. Refused in every mode, as a filesystem
	 * without whiteouts refuses it; only NOREPLACE and EXCHANGE pass through. */
	if (flags & ~(unsigned int)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		pw_req_reply_err(&r, EINVAL);
		return;
	}
	pw_inode *parent = pw_inode_get(fs, parent_ino);
	pw_inode *np = pw_inode_get(fs, np_ino);
	pw_req_name(&r, parent, name);
	int e = check_name(newname);
	if (e < 0) {
		pw_req_reply_err(&r, -e);
		return;
	}
	_cleanup_(pw_dir_close) pw_dir_ref pd = PW_DIR_REF_INIT;
	int pfd = pw_dir_open(fs, parent, &pd);
	if (pfd < 0) {
		pw_req_reply_err(&r, -pfd);
		return;
	}
	/* A rename within one directory (the common case: an editor's save) resolves it once. */
	_cleanup_(pw_dir_close) pw_dir_ref npd = PW_DIR_REF_INIT;
	int npfd = np == parent ? pfd : pw_dir_open(fs, np, &npd);
	if (npfd < 0) {
		pw_req_reply_err(&r, -npfd);
		return;
	}
	struct stat src, dst;
	if (fstatat(pfd, name, &src, AT_SYMLINK_NOFOLLOW) < 0) {
		pw_req_reply_err(&r, errno);
		return;
	}
	bool have_dst = fstatat(npfd, newname, &dst, AT_SYMLINK_NOFOLLOW) == 0;
	bool src_dir = S_ISDIR(src.st_mode);
	if (pw_hidden_child(&r, src_dir)) {
		pw_req_reply_err(&r, ENOENT);
		return;
	}
	e = pw_check_two(&r, pw_opmap_op(flags ? FUSE_RENAME2 : FUSE_RENAME), np, newname, src_dir);
	/* A directory moves its whole tree: out from under the rules of its old name, and
	 * under those of the new one. With RENAME_EXCHANGE both trees move. */
	bool trees = src_dir || ((flags & RENAME_EXCHANGE) && have_dst && S_ISDIR(dst.st_mode));
	/* Nothing beneath may be shielded by a deny or protected rule: moving the tree would
	 * carry that content to a name the rule does not cover. */
	if (e == 0 && trees)
		e = pw_check_tree(&r, parent, name);
	if (e == 0 && trees)
		e = pw_check_tree(&r, np, newname);
	if (e < 0) {
		pw_req_reply_err(&r, -e);
		return;
	}
	/* A hidden destination answers as an absent one would, after the mode has had its say
	 * (so a refused rename cannot tell a hidden name from a free one). */
	if (have_dst && pw_hidden_name(&r, np, newname, S_ISDIR(dst.st_mode))) {
		pw_req_reply_err(&r, ENOENT);
		return;
	}
	/* An exchange sends events for both names in both directions: left to invalidate. */
	bool plain = !(flags & RENAME_EXCHANGE);
	int tok1 = plain ? pw_req_expect(&r, PW_EXPECT_NAME_REMOVED) : -1;
	/* The kernel keeps the moved entry's lifetime; one that lands in a directory not
	 * everyone may search must not stay cached (ops.c): not expecting the new name lets
	 * the watcher invalidate it once the kernel has finished the rename. */
	bool keep_entry = !fs->allow_other || pw_dir_searchable_by_all(npfd);
	int tok2 =
	    plain && keep_entry ? pw_watch_expect(fs, np, newname, PW_EXPECT_NAME_ADDED) : -1;
	int64_t kept = pw_undo_keep_rename(&r, pfd, np, npfd, newname, flags);
	if (kept < 0) {
		pw_watch_unexpect(fs, tok1);
		pw_watch_unexpect(fs, tok2);
		pw_req_reply_err(&r, (int)-kept);
		return;
	}
	if (renameat2(pfd, name, npfd, newname, flags) < 0) {
		e = errno;
		pw_watch_unexpect(fs, tok1);
		pw_watch_unexpect(fs, tok2);
		pw_undo_keep_failed(fs, kept);
		pw_req_reply_err(&r, e);
		return;
	}
	pw_undo_keep_touched_ino(fs, src.st_dev, src.st_ino);
	/* exchanged, or replaced: a file with other names loses one (its ctime changes) */
	if (have_dst)
		pw_undo_keep_touched_ino(fs, dst.st_dev, dst.st_ino);
	pw_inode_renamed(fs, parent, name, np, newname, src.st_dev, src.st_ino,
			 (flags & RENAME_EXCHANGE) != 0, have_dst ? dst.st_dev : 0,
			 have_dst ? dst.st_ino : 0);
	pw_req_reply_err(&r, 0);
}

void pw_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (((pw_fs *)fuse_req_userdata(req))->no_opendir) {
		/* The kernel stops sending OPENDIR/RELEASEDIR and keeps listings cached; each
		 * READDIR then arrives with fh 0 and opens the directory itself. */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_inode *n = pw_inode_get(fs, ino);
	int fd = pw_open_node(fs, n, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		pw_req_reply_err(&r, -fd);
		return;
	}
	pw_fh *h = calloc(1, sizeof(*h));
	if (h)
		h->buf = malloc(PW_DIRBUF);
	if (!h || !h->buf) {
		if (h)
			free(h->buf);
		free(h);
		close(fd);
		pw_req_reply_err(&r, ENOMEM);
		return;
	}
	h->fd = fd;
	h->node = n;
	pw_fh_register(fs, h);
	fi->fh = (uintptr_t)h;
	/* Let the kernel keep listings: a switch that changes hidden names, and changes made
	 * to the backing tree outside the view, invalidate them; but only where the watcher
	 * sees those (a directory it could not watch is listed afresh at each open). */
	bool keep = pw_watch_covers(fs, n);
	fi->cache_readdir = keep;
	fi->keep_cache = keep;
	pw_req_leave(&r);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		pw_fh_unregister(fs, h);
		close(fd);
		free(h->buf);
		free(h);
	}
}

/* Next raw entry at the handle's position, refilling the buffer; NULL at the end. */
static struct linux_dirent64 *next_dirent(pw_fh *h, int *ret_err)
{
	if (h->buf_off >= h->buf_len) {
		long n = syscall(SYS_getdents64, h->fd, h->buf, PW_DIRBUF);
		if (n < 0) {
			*ret_err = errno;
			return NULL;
		}
		h->buf_len = (size_t)n;
		h->buf_off = 0;
		if (n == 0)
			return NULL;
	}
	return (struct linux_dirent64 *)(h->buf + h->buf_off);
}

static bool is_dot_or_dotdot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* A handle for one READDIR when OPENDIR was declined (fh 0): the directory opened now. */
static int temp_dir_handle(pw_fs *fs, pw_inode *dir, pw_fh *h)
{
	memset(h, 0, sizeof(*h));
	h->fd = pw_open_node(fs, dir, O_RDONLY | O_DIRECTORY);
	if (h->fd < 0)
		return h->fd;
	h->buf = malloc(PW_DIRBUF);
	if (!h->buf) {
		close(h->fd);
		return -ENOMEM;
	}
	h->dir_pos = 0;
	return 0;
}

static void do_readdir_locked(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			      struct fuse_file_info *fi, bool plus);

/* Listings decide visibility (and readdirplus makes entries): held under the gate. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	pw_fs *fs = fuse_req_userdata(req);
	pw_lookup_gate_enter(fs);
	do_readdir_locked(req, ino, size, off, fi, plus);
	pw_lookup_gate_leave(fs);
}

static void do_readdir_locked(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			      struct fuse_file_info *fi, bool plus)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_inode *dir = pw_inode_get(fs, ino);
	pw_fh temp, *h = pw_fh_of(fi);
	bool is_temp = h == NULL;
	if (is_temp) {
		int tr = temp_dir_handle(fs, dir, &temp);
		if (tr < 0) {
			pw_req_reply_err(&r, -tr);
			return;
		}
		h = &temp;
	}
	_cleanup_free_ char *out = NULL;
	int err = 0;
	if (off != h->dir_pos) {
		if (lseek(h->fd, off, SEEK_SET) < 0) {
			err = errno;
			goto fail;
		}
		h->buf_len = h->buf_off = 0;
		h->dir_pos = off;
	}
	out = malloc(size);
	if (!out) {
		err = ENOMEM;
		goto fail;
	}
	size_t used = 0;
	double entry_timeout =
	    plus ? pw_entry_timeout_in(fs, h->fd, pw_watch_timeout(fs, dir, NULL)) : 0;
	/* One policy for the whole listing: every entry's visibility and attributes. */
	bool hides = pw_req_hides(&r);
	for (;;) {
		struct linux_dirent64 *d = next_dirent(h, &err);
		if (!d)
			break;
		const char *name = d->d_name;
		bool is_dir = d->d_type == DT_DIR;
		if (d->d_type == DT_UNKNOWN && hides && !is_dot_or_dotdot(name)) {
			/* some filesystems do not fill d_type; directory-only hide rules need it */
			struct stat dst;
			is_dir = fstatat(h->fd, name, &dst, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISDIR(dst.st_mode);
		}
		/* The request moves to this entry: its path is built at most once, for the hide
		 * rules and the attributes both. */
		pw_req_name(&r, dir, name);
		bool skip = hides && !is_dot_or_dotdot(name) && pw_hidden_child(&r, is_dir);
		size_t entsize;
		if (skip) {
			entsize = 0;
		} else if (!plus) {
			struct stat st = {.st_ino = d->d_ino, .st_mode = (mode_t)d->d_type << 12};
			entsize =
			    fuse_add_direntry(req, out + used, size - used, name, &st, d->d_off);
		} else {
			struct fuse_entry_param e = {0};
			pw_inode *n = NULL;
			if (is_dot_or_dotdot(name)) {
				e.attr.st_ino = d->d_ino;
				e.attr.st_mode = (mode_t)d->d_type << 12;
			} else {
				pw_object o;
				if (pw_object_at(h->fd, name, AT_SYMLINK_NOFOLLOW, &o) < 0) {
					/* vanished since getdents: skip it */
					h->buf_off += d->d_reclen;
					h->dir_pos = d->d_off;
					continue;
				}
				n = pw_watch_learn(fs, dir, name, &o, false);
				if (!n) {
					err = ENOMEM;
					break;
				}
				pw_truthful_attr_child(&r, &o.st);
				pw_fill_entry(fs, &e, n, &o.st, pw_watch_timeout(fs, dir, n));
				/* special files with an ACL: each walk is checked (ops.c) */
				pw_entry_cap(&e, pw_special_uncached(fs, h->fd, name, o.st.st_mode)
						     ? 0
						     : entry_timeout);
			}
			entsize = fuse_add_direntry_plus(req, out + used, size - used, name, &e,
							 d->d_off);
			if (entsize > size - used && n)
				pw_inode_forget(fs, n,
						1); /* not sent: the kernel holds no reference */
		}
		if (entsize > size - used)
			break;
		used += entsize;
		h->buf_off += d->d_reclen;
		h->dir_pos = d->d_off;
	}
	if (is_temp) {
		close(temp.fd);
		free(temp.buf);
	}
	pw_req_leave(&r);
	if (err && used == 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, out, used);
	return;
fail:
	if (is_temp) {
		close(temp.fd);
		free(temp.buf);
	}
	pw_req_reply_err(&r, err);
	return;
}

void pw_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

void pw_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

void pw_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	pw_fh *h = pw_fh_of(fi);
	pw_fh_unregister(fuse_req_userdata(req), h);
	close(h->fd);
	free(h->buf);
	free(h);
	fuse_reply_err(req, 0);
}

void pw_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	pw_fs *fs = fuse_req_userdata(req);
	_cleanup_close_ int own = -1;
	int fd;
	if (pw_fh_of(fi)) {
		fd = pw_fh_of(fi)->fd;
	} else {
		own = pw_open_node(fs, pw_inode_get(fs, ino), O_RDONLY | O_DIRECTORY);
		if (own < 0) {
			fuse_reply_err(req, -own);
			return;
		}
		fd = own;
	}
	int r = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, r < 0 ? errno : 0);
}

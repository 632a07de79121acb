/* SPDX-License-Identifier: MIT */
/*
 * The handlers the session calls (optable.h says what each one checks and answers). The
 * table sits above the handlers' files, so none of them reaches another through it.
 */
#include "ops.h"
#include "ops_dir.h"
#include "ops_file.h"
#include "ops_xattr.h"
#include "optable.h"

const struct fuse_lowlevel_ops pw_fs_ops = {
    .init = pw_op_init,
    .lookup = pw_op_lookup,
    .forget = pw_op_forget,
    .forget_multi = pw_op_forget_multi,
    .getattr = pw_op_getattr,
    .setattr = pw_op_setattr,
    .readlink = pw_op_readlink,
    .access = pw_op_access,
    .statfs = pw_op_statfs,
    .mknod = pw_op_mknod,
    .mkdir = pw_op_mkdir,
    .symlink = pw_op_symlink,
    .link = pw_op_link,
    .unlink = pw_op_unlink,
    .rmdir = pw_op_rmdir,
    .rename = pw_op_rename,
    .opendir = pw_op_opendir,
    .readdir = pw_op_readdir,
    .readdirplus = pw_op_readdirplus,
    .releasedir = pw_op_releasedir,
    .fsyncdir = pw_op_fsyncdir,
    .create = pw_op_create,
    .open = pw_op_open,
    .read = pw_op_read,
    .write_buf = pw_op_write_buf,
    .release = pw_op_release,
    .fsync = pw_op_fsync,
    .fallocate = pw_op_fallocate,
    .copy_file_range = pw_op_copy_file_range,
    .lseek = pw_op_lseek,
    .setxattr = pw_op_setxattr,
    .getxattr = pw_op_getxattr,
    .listxattr = pw_op_listxattr,
    .removexattr = pw_op_removexattr,
};

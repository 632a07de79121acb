/* SPDX-License-Identifier: MIT */
/*
 * check.c: the one place the FUSE layer asks the policy, and the one function every denial
 * passes through. Every question is asked of a request (req.h) and answered under its one
 * policy reference, about its name's path built once.
 */
#pragma once

#include "req.h"

/* Decides a mutation OP on the node N (all its names). Returns 0 if allowed, else the
 * negative errno after recording the denial. */
int pw_check_node(pw_req *r, pw_op op, pw_inode *n);
/* The same, with FD (the open backing file, or -1) for the link count and PATH2 (the other
 * name of a link, or NULL) for the audit event. */
int pw_check_node_ex(pw_req *r, pw_op op, pw_inode *n, int fd, const char *path2);
/* The same with the link count NLINK the caller has just read from the node's object (the
 * identity check of the descriptor it resolved), instead of reading it again. */
int pw_check_node_nlink(pw_req *r, pw_op op, pw_inode *n, long nlink);
/* Decides OP on R's name (a new name for the ops that make one). */
int pw_check_child(pw_req *r, pw_op op, bool is_dir);
/* Decides OP on both R's name and NEWNAME in NP (rename, link); the audit event carries
 * both paths. */
int pw_check_two(pw_req *r, pw_op op, pw_inode *np, const char *newname, bool is_dir);
/* May the directory NAME in PARENT move as a whole (rename of a tree; see
 * pw_policy_may_write_tree)? Returns 0, or the negative errno after recording the denial. */
int pw_check_tree(pw_req *r, pw_inode *parent, const char *name);

/* Is the node hidden under R's policy? Checked again on open and getattr: an entry the
 * kernel cached just before a switch must not keep the hidden object reachable. */
bool pw_node_hidden(pw_req *r, pw_inode *n);
/* Starts R for REQ (pw_req_begin) about node INO and answers ENOENT when the mode hides it:
 * the node, or NULL when REQ is answered already (the handler then just returns). */
pw_inode *pw_req_begin_node(pw_req *r, fuse_req_t req, fuse_ino_t ino);
/* Has R's policy any hide rule at all? */
bool pw_req_hides(pw_req *r);
/* Is R's name (or NAME in PARENT) hidden? A name that cannot be named counts as hidden. */
bool pw_hidden_child(pw_req *r, bool is_dir);
bool pw_hidden_name(pw_req *r, pw_inode *parent, const char *name, bool is_dir);
/* Does R's name exist in its parent (open as PFD) as an object the policy hides? Creating
 * over a hidden name must answer ENOENT, as if it were not there, never EEXIST or EISDIR. */
bool pw_hidden_existing(pw_req *r, int pfd);

/* Clears write bits from ST when N (or R's name) may not be written under R's policy, and
 * lowers a directory's link count by the subdirectories it hides. */
void pw_truthful_attr(pw_req *r, pw_inode *n, struct stat *st);
void pw_truthful_attr_child(pw_req *r, struct stat *st);

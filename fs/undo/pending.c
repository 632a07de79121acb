/* SPDX-License-Identifier: MIT */
/* What an undo comes back to after every row, carried along its renames (pending.h). */
#include "pending.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "path.h"
#include "util.h"

int pw_undo_pending_push(pw_undo_pendings *l, const char *path, const pw_undo_orig_object *o,
			 const struct stat *made)
{
	if (PW_GROW(l->v, l->cap, l->n, 16) < 0)
		return -ENOMEM;
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	l->v[l->n++] = (pw_undo_pending){.path = copy,
					 .o = o,
					 .made_dev = made ? (uint64_t)made->st_dev : 0,
					 .made_ino = made ? (uint64_t)made->st_ino : 0};
	return 0;
}

void pw_undo_pending_drop(pw_undo_pendings *l, const char *path, bool beneath)
{
	for (size_t i = 0; i < l->n; i++) {
		char **p = &l->v[i].path;
		if (*p && (beneath ? pw_relpath_beneath(*p, path) : streq(*p, path)))
			*p = (free(*p), NULL);
	}
}

/* P with its prefix A (a path P is beneath) swapped for B: malloc'd, NULL when out of
 * memory. */
static char *reparent(const char *p, const char *a, const char *b)
{
	char *out = NULL;
	return asprintf(&out, "%s%s", b, p + strlen(a)) < 0 ? NULL : out;
}

void pw_undo_pending_moved(pw_undo_pendings *l, const char *from, const char *to, bool exchange)
{
	for (size_t i = 0; i < l->n; i++) {
		char **p = &l->v[i].path;
		if (!*p)
			continue;
		char *moved;
		if (pw_relpath_beneath(*p, to))
			moved = reparent(*p, to, from);
		else if (pw_relpath_beneath(*p, from))
			moved = exchange ? reparent(*p, from, to) : NULL; /* replaced */
		else
			continue;
		free(*p);
		*p = moved;
	}
}

void pw_undo_pending_done(pw_undo_pendings *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	*l = (pw_undo_pendings){0};
}

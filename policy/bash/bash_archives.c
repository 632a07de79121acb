/* SPDX-License-Identifier: MIT */
/* Archives and compressors (bash_archives.h): where tar, unzip and zip write, and the file a
 * compressor makes and the one it removes. */
#include <string.h>

#include "bash_archives.h"
#include "bash_cmd.h"
#include "bash_path.h"
#include "util.h"

/* tar: -x writes into -C DIR (or here); -c/-r/-u write the -f archive. */
void bw_h_tar(bw_cmd *k)
{
	bool x = bw_opt_has(k, 'x', "extract") || bw_opt_has(k, 0, "get");
	bool cr = bw_opt_has(k, 'c', "create") || bw_opt_has(k, 'r', "append") ||
		  bw_opt_has(k, 'u', "update") || bw_opt_has(k, 'A', "concatenate") ||
		  bw_opt_has(k, 0, "delete");
	/* Old style: "tar xzf ARCHIVE": the first word is a cluster without '-'. */
	const bw_word *first = k->argc > 1 ? &k->argv[1] : NULL;
	const bw_word *old_f = NULL, *old_C = NULL;
	if (first && first->lit && !first->unknown && first->lit[0] != '-' &&
	    strspn(first->lit, "AcdrtuxfvzjJaCkmopSWZlhiTX") == strlen(first->lit)) {
		size_t next = 2;
		for (const char *p = first->lit; *p; p++) {
			x |= *p == 'x';
			cr |= *p == 'c' || *p == 'r' || *p == 'u' || *p == 'A';
			if (strchr("fCTXb", *p) && next < k->argc) {
				if (*p == 'f')
					old_f = &k->argv[next];
				if (*p == 'C')
					old_C = &k->argv[next];
				next++;
			}
		}
	}
	if (x) {
		bw_set_label(k, "tar", "-x");
		if (old_C)
			bw_tw(k, old_C, PW_OP_CREATE, true, true);
		else if (!bw_tw_opt(k, 'C', "directory", PW_OP_CREATE, true, true))
			bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
	}
	if (cr) {
		bw_set_label(k, "tar", "-c");
		if (old_f) {
			if (!(old_f->lit && streq(old_f->lit, "-")))
				bw_tw(k, old_f, PW_OP_OPEN_WRITE, false, false);
		} else {
			bw_tw_opt(k, 'f', "file", PW_OP_OPEN_WRITE, false, false);
		}
	}
}

/* unzip ARCHIVE [-d DIR]: DIR or here; -l/-t/-v/-p/-Z write nothing. */
void bw_h_unzip(bw_cmd *k)
{
	if (bw_opt_has(k, 'l', NULL) || bw_opt_has(k, 't', NULL) || bw_opt_has(k, 'v', NULL) ||
	    bw_opt_has(k, 'p', NULL) || bw_opt_has(k, 'Z', NULL) || bw_opt_has(k, 'c', NULL))
		return;
	if (!bw_tw_opt(k, 'd', NULL, PW_OP_CREATE, true, true))
		bw_tw_lit(k, ".", PW_OP_CREATE, true, true);
}

/* zip ARCHIVE FILES...: the archive. */
void bw_h_zip(bw_cmd *k)
{
	if (k->n_pos > 0)
		bw_tw(k, k->pos[0], PW_OP_OPEN_WRITE, false, false);
}

/* gzip & co: FILE becomes FILE.EXT (FILE removed); -d reverses; -c writes to stdout. */
void bw_h_compress(bw_cmd *k)
{
	static const struct {
		const char *name, *ext;
		bool decompress, keeps;
	} tools[] = {
	    {"gzip", ".gz", false, false},   {"gunzip", ".gz", true, false},
	    {"bzip2", ".bz2", false, false}, {"bunzip2", ".bz2", true, false},
	    {"xz", ".xz", false, false},     {"unxz", ".xz", true, false},
	    {"zstd", ".zst", false, true},   {"unzstd", ".zst", true, true},
	    {"lz4", ".lz4", false, true},
	};
	const char *ext = ".gz";
	bool dec = false, keeps = false;
	for (size_t i = 0; i < ELEMENTSOF(tools); i++)
		if (streq(k->w->name, tools[i].name)) {
			ext = tools[i].ext;
			dec = tools[i].decompress;
			keeps = tools[i].keeps;
		}
	if (bw_opt_has(k, 'c', "stdout") || bw_opt_has(k, 'l', "list") ||
	    bw_opt_has(k, 't', "test"))
		return;
	dec |= bw_opt_has(k, 'd', "decompress") || bw_opt_has(k, 0, "uncompress");
	keeps |= bw_opt_has(k, 'k', "keep");
	if (bw_opt_has(k, 0, "rm"))
		keeps = false;
	size_t el = strlen(ext);
	for (size_t i = 0; i < k->n_pos; i++) {
		const bw_word *w = k->pos[i];
		if (w->unknown || !w->pat) {
			bw_tw(k, w, PW_OP_CREATE, false, false);
			continue;
		}
		bw_word out = {0};
		size_t n = strlen(w->pat);
		out.raw = strdup(w->raw ? w->raw : w->pat);
		if (dec)
			out.pat =
			    n > el && streq(w->pat + n - el, ext) ? strndup(w->pat, n - el) : NULL;
		else if (asprintf(&out.pat, "%s%s", w->pat, ext) < 0)
			out.pat = NULL;
		out.lit = pw_dup_or_null(out.pat);
		out.glob = w->glob;
		out.tilde = w->tilde;
		if (out.pat && out.lit)
			bw_tw(k, &out, PW_OP_CREATE, false, false);
		else if (dec)
			bw_unknown(k, "a file name without the expected suffix");
		if (!keeps)
			bw_tw(k, w, PW_OP_UNLINK, false, false);
		bw_word_done(&out);
	}
}

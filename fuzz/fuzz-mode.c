/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the mode-file and config.yaml parsers (policy/mode.c, config.c, yamlx.c).
 * The input is parsed as a whole mode file named fuzz.md, then as a config.yaml. Besides
 * crashes, leaks and undefined behaviour, it checks that a parse either succeeds with a
 * mode named "fuzz" or reports at least one error, and that every warning formats.
 */
#include <stdlib.h>

#include "fuzz.h"
#include "pw_limits.h"
#include "modefile.h"
#include "util.h"

static void check_warnings(const pw_warnings *w, bool want_error)
{
	bool saw_error = false;

	for (size_t i = 0; i < w->n; i++) {
		char *s = pw_warning_format(&w->v[i]);

		if (!s)
			abort();
		free(s);
		saw_error |= w->v[i].severity == PW_ERROR;
	}
	if (want_error && !saw_error)
		abort();
}

static void fuzz_mode(const char *buf, size_t size)
{
	pw_warnings w = {0};
	pw_mode_file *mf = NULL;
	int r;

	r = pw_mode_parse("modes/fuzz.md", buf, size, PW_LAYER_PROJECT, &w, &mf);
	if (r == 0 && !streq(mf->mode.name, "fuzz"))
		abort();
	if (r == 0 && mf->mode.n_rules > 3 * PW_RULES_MAX)
		abort();
	check_warnings(&w, r == -EINVAL);
	pw_mode_file_free(mf);
	pw_warnings_done(&w);
}

static void fuzz_config(const char *buf, size_t size)
{
	pw_warnings w = {0};
	pw_config c = {0};
	int r;

	r = pw_config_parse("config.yaml", buf, size, PW_LAYER_PROJECT, &w, &c);
	check_warnings(&w, r == -EINVAL);
	if (r == 0)
		pw_config_done(&c);
	pw_warnings_done(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > PW_MODE_FILE_MAX)
		return 0;
	fuzz_mode((const char *)data, size);
	fuzz_config((const char *)data, size);
	return 0;
}

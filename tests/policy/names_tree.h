/* SPDX-License-Identifier: MIT */
/*
 * The names the policy tests decide on, drawn once (names, not files: decisions are on
 * names, so nothing is created). test_lane.c checks that a lane narrows every mode on each
 * and test_policy_json.c that a policy decides each the same after its JSON round trip:
 *
 *   ""  (the project root)                 .git/config  .git/hooks/pre-commit
 *   src/  main.c  a/x.c  a/deep/y.c  b/z.c  .piworkfs/config.yaml
 *   docs/  design/a.md  design/spec.md      tokens/colors.json
 *          plans/p.md  plans/x.md  plans/new.md
 *   README.md  .env  secrets/key.pem
 */
#pragma once

#include <stdbool.h>

/* A name and whether it is a directory's (the policy decides some operations by it). */
typedef struct tree_name {
	const char *path;
	bool is_dir;
} tree_name;

static const tree_name tree[] = {
    {"", true},
    {"src", true},
    {"src/main.c", false},
    {"src/a", true},
    {"src/a/x.c", false},
    {"src/a/deep/y.c", false},
    {"src/b/z.c", false},
    {"docs", true},
    {"docs/design", true},
    {"docs/design/a.md", false},
    {"docs/design/spec.md", false},
    {"docs/plans", true},
    {"docs/plans/p.md", false},
    {"docs/plans/x.md", false},
    {"docs/plans/new.md", false},
    {"tokens/colors.json", false},
    {".git/config", false},
    {".git/hooks/pre-commit", false},
    {".piworkfs/config.yaml", false},
    {"README.md", false},
    {".env", false},
    {"secrets/key.pem", false},
};

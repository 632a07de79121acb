/* SPDX-License-Identifier: MIT */
/* Tests of the small shared helpers of base/util.h that carry logic: PW_GROW, pw_list_has,
 * pw_opts_has, pw_dup_or_null, PW_NAME_OF, pw_read_upto; and base/thread.h's pw_thread_start. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "thread.h"
#include "util.h"

Test(util, grow_doubles_from_first_and_keeps_the_elements)
{
	int *a = NULL;
	size_t n = 0, cap = 0;
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(PW_GROW(a, cap, n, 4), 0);
		cr_assert_gt(cap, n, "no room after a successful grow");
		a[n++] = i;
	}
	/* 4, 8, 16, 32, 64, 128: doubled each time it was full, never more. */
	cr_assert_eq(cap, 128);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(a[i], i);
	free(a);
}

Test(util, grow_with_room_does_nothing)
{
	long *a = malloc(8 * sizeof(*a));
	long *before = a;
	size_t cap = 8;
	cr_assert_eq(PW_GROW(a, cap, 7, 4), 0);
	cr_assert_eq(a, before);
	cr_assert_eq(cap, 8);
	free(a);
}

Test(util, grow_refuses_an_overflowing_size_and_keeps_the_array)
{
	struct big {
		char b[1 << 20];
	} *a = NULL;
	size_t cap = SIZE_MAX / sizeof(*a) / 2 + 1, n = cap;
	cr_assert_eq(PW_GROW(a, cap, n, 1), -ENOMEM);
	cr_assert_null(a);
	cr_assert_eq(cap, SIZE_MAX / sizeof(*a) / 2 + 1);
}

Test(util, list_has_finds_whole_items_only)
{
	static const struct {
		const char *list;
		char sep;
		const char *name;
		bool found;
	} t[] = {
	    {"rw,allow_other,default_permissions", ',', "allow_other", true},
	    {"rw,allow_other,default_permissions", ',', "rw", true},
	    {"rw,allow_other,default_permissions", ',', "default_permissions", true},
	    {"rw,allow_other", ',', "allow", false},	      /* a prefix of an item */
	    {"rw,allow_other", ',', "other", false},	      /* a suffix of an item */
	    {"rw,allow_other", ',', "allow_other,rw", false}, /* two items */
	    {"rw,allow_other", ',', "rw,allow_other", false}, /* two items, in order */
	    {"|status|log|", '|', "status|log", false},
	    {"io_uring", ',', "no_io_uring", false},
	    {"no_io_uring", ',', "io_uring", false},
	    {"|file|directory|", '|', "file", true},
	    {"|file|directory|", '|', "directory", true},
	    {"|file|directory|", '|', "dir", false},
	    {"a,,b", ',', "", false}, /* an empty item never matches */
	    {"", ',', "a", false},
	    {NULL, ',', "a", false},
	};
	for (size_t i = 0; i < ELEMENTSOF(t); i++)
		cr_expect_eq(pw_list_has(t[i].list, t[i].sep, t[i].name, strlen(t[i].name)),
			     t[i].found, "%s in %s", t[i].name, t[i].list ? t[i].list : "NULL");
}

Test(util, list_has_takes_the_name_by_length)
{
	/* "--file=x": the bash scanner looks the name up without its "=value". */
	const char *opt = "file=x";
	cr_expect(pw_list_has("|file|directory|", '|', opt, 4));
	cr_expect_not(pw_list_has("|file|directory|", '|', opt, 3));
}

Test(util, opts_has_looks_up_a_mount_option)
{
	cr_expect(pw_opts_has("rw,default_permissions", "default_permissions"));
	cr_expect_not(pw_opts_has("rw,no_io_uring", "io_uring"));
	cr_expect_not(pw_opts_has(NULL, "io_uring"));
}

Test(util, dup_or_null_copies_a_string_and_keeps_null)
{
	char buf[] = "mode";
	char *d = pw_dup_or_null(buf);
	cr_assert_not_null(d);
	cr_expect_neq(d, buf, "a copy, not the same bytes");
	buf[0] = 'x';
	cr_expect_str_eq(d, "mode");
	free(d);
	cr_expect_null(pw_dup_or_null(NULL));
}

enum colour { RED, GREEN, BLUE };
static const char *const colour_names[] = {[RED] = "red", [BLUE] = "blue"};

Test(util, name_of_an_enum_value_or_the_fallback)
{
	cr_expect_str_eq(PW_NAME_OF(colour_names, RED, "?"), "red");
	cr_expect_str_eq(PW_NAME_OF(colour_names, BLUE, "?"), "blue");
	cr_expect_str_eq(PW_NAME_OF(colour_names, GREEN, "?"), "?", "a value without a name");
	cr_expect_str_eq(PW_NAME_OF(colour_names, 3, "?"), "?", "past the table");
	cr_expect_str_eq(PW_NAME_OF(colour_names, -1, "?"), "?", "below the table");
}

Test(util, name_index_reads_a_name_back)
{
	cr_expect_eq(PW_NAME_INDEX(colour_names, "blue"), BLUE);
	cr_expect_eq(PW_NAME_INDEX(colour_names, "red"), RED);
	cr_expect_eq(PW_NAME_INDEX(colour_names, "green"), -EINVAL);
	cr_expect_eq(PW_NAME_INDEX(colour_names, "Red"), -EINVAL);
	cr_expect_eq(PW_NAME_INDEX(colour_names, NULL), -EINVAL);
}

Test(util, read_upto_stops_at_the_length_or_the_end)
{
	int p[2];
	char buf[16] = {0};
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(write(p[1], "abcdef", 6), 6);
	cr_expect_eq(pw_read_upto(p[0], buf, 4), 4, "no more than asked");
	cr_expect_eq(memcmp(buf, "abcd", 4), 0);
	close(p[1]);
	cr_expect_eq(pw_read_upto(p[0], buf, sizeof(buf)), 2, "what is left, at the end");
	cr_expect_eq(memcmp(buf, "ef", 2), 0);
	cr_expect_eq(pw_read_upto(p[0], buf, sizeof(buf)), 0);
	close(p[0]);
	cr_expect_eq(pw_read_upto(p[0], buf, sizeof(buf)), -EBADF);
}

static void *set_flag(void *arg)
{
	*(int *)arg = 1;
	return NULL;
}

Test(thread, start_runs_the_function_and_says_so)
{
	pthread_t t;
	int flag = 0;
	bool started = false;
	cr_assert_eq(pw_thread_start(&t, set_flag, &flag, &started), 0);
	cr_expect(started, "the stop must know there is a thread to join");
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_expect_eq(flag, 1);
}

/* SPDX-License-Identifier: MIT */
/*
 * Every cap that bounds what an input can make us allocate or compute, in one place.
 * Each overflow is reported as a precise error naming the limit.
 */
#pragma once

#define PW_PATH_MAX 4096         /* bytes of a path given as input (command line, control
				  * socket), NUL included; the view's own paths shorter than
				  * this live on the stack and open in one step */
#define PW_TREE_PATH_MAX (64 * 1024) /* bytes of the project-relative path of an object in a
				      * view, NUL included (see docs/SECURITY.md, Limits) */
#define PW_NAME_MAX 255          /* bytes of one path component */
#define PW_PATH_DEPTH_MAX 1024   /* directory levels a recursive walk descends (allowed
				  * --files); a path's depth is bounded by its length */
#define PW_GLOB_LEN_MAX 1024     /* bytes of one glob pattern */
#define PW_RULES_MAX 512         /* rules of one kind in one mode or config */
#define PW_MODES_MAX 64          /* modes in one layer */
#define PW_MODE_FILE_MAX (256 * 1024) /* bytes of one mode or config file */
#define PW_MODE_NAME_MAX 64      /* bytes of a mode name */
#define PW_YAML_DEPTH_MAX 16     /* nesting of YAML collections in a mode file */
#define PW_MSG_MAX (64 * 1024)   /* bytes of one control-socket message */
#define PW_CLIENTS_MAX 256       /* connections at once to a view's main (operator) socket */
#define PW_AGENT_CLIENTS_MAX 32  /* connections at once to each agent socket: its own slots,
				  * never the operator's; room for an agent's subscription,
				  * concurrent requests and a pending consent request */
#define PW_PLAN_FILE_MAX (256 * 1024) /* bytes of a plan file that is read */
#define PW_PLAN_TASKS_MAX 256         /* tasks of one plan */
#define PW_PLAN_TASK_TEXT_MAX 400     /* bytes of one task's text kept (longer: cut) */
#define PW_PLAN_NAME_MAX 100          /* bytes of a plan's name (the file's stem) */
#define PW_PLANS_MAX 256              /* plans of one project that are read and listed */
#define PW_BASH_INPUT_MAX (1024 * 1024) /* bytes of a command given to check-bash */
#define PW_BASH_DEPTH_MAX 256    /* nesting of constructs the bash analysis follows */
#define PW_BASH_TARGETS_MAX 4096 /* targets one analysis reports */

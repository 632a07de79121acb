/* SPDX-License-Identifier: MIT */
/*
 * A pager for long output on a terminal, as git does it: only when stdout is a terminal,
 * $PAGER (default less; "" or cat: none), with LESS=FRX unless LESS is set, so output that
 * fits on one screen is printed and less quits (F), colours pass (R) and the screen is not
 * cleared (X). --no-pager turns it off.
 */
#pragma once

/* Starts the pager and points stdout at it; nothing when stdout is no terminal. */
void pw_pager_start(void);

/* Flushes stdout, closes the pager's pipe and waits for the pager to quit. */
void pw_pager_end(void);

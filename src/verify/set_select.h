/* Which size sets of a task a verify runs (--sets, --time-set, the backend's defaults) and which
 * one it times: one rule for the verify itself and for its admission (admit.c), which prices the
 * same sets before anything runs. */
#ifndef ST_SET_SELECT_H
#define ST_SET_SELECT_H

#include "stitch/stitch.h"

/* Is size set `label` named in the comma list? "hidden" names every hidden set, "hidden1" one;
 * a NULL list names every set. */
int st_set_selected(const char *list, const char *label);

/* The label of the timed set: --time-set, else `small` on the host backend (an imported task's
 * `eval` on either), else `eval`. `stored`: an imported task with stored seeds. */
const char *st_verify_time_set(const st_verify_opts *o, int stored);

/* Does the set labelled `label` run, and (*timed) is it the timed one? */
int st_verify_set_runs(const st_verify_opts *o, int stored, const char *label, int *timed);

#endif

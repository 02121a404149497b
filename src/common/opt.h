/* Command-line options from one table per command, in the manner of git's parse-options: each
 * entry names an option, its kind, where its value goes and its help text, so that the parser
 * and the --help text are made from the same data and cannot drift apart. Parsing is strict:
 * unknown options, missing values, numbers that are not whole or not finite, values out of
 * range, empty lists and options declared to conflict are refused with a message naming them.
 * Library code: it returns st_status with the message in st_err; the commands print and exit. */
#ifndef ST_OPT_H
#define ST_OPT_H

#include <stdint.h>
#include <stdio.h>

#include "common/st_error.h"

typedef enum st_opt_kind {
	ST_OPT_END = 0,   /* ends a table */
	ST_OPT_FLAG,      /* int target set to 1 */
	ST_OPT_FLAG_OFF,  /* int target set to 0 (e.g. --no-timing) */
	ST_OPT_CONST,     /* int target set to .value (several flags choosing one setting) */
	ST_OPT_INT,       /* int target: a whole number in [min, max] (both 0: any int) */
	ST_OPT_UINT64,    /* uint64_t target: no sign, C base prefixes (0x..) as strtoull, at least
	                   * min and at most max (max 0: no upper bound) */
	ST_OPT_DOUBLE,    /* double target: finite, in [min, max] (both 0: any finite number) */
	ST_OPT_STRING,    /* const char * target: not empty */
	ST_OPT_LIST,      /* const char * target: comma list with no empty item */
	ST_OPT_ENUM,      /* const char * target: one of .values */
	ST_OPT_MULTI,     /* st_opt_strings target: repeatable, each value (not empty) appended */
} st_opt_kind;

/* The values of a repeatable option: v has room for max. */
typedef struct st_opt_strings {
	const char **v;
	int n, max;
} st_opt_strings;

typedef struct st_opt {
	st_opt_kind kind;
	const char *name;           /* long name without the dashes: "seeds" for --seeds */
	char short_name;            /* 0: none; 'j' for -j */
	void *target;
	const char *arg;            /* the value's name in the help text: "N", "FILE" */
	const char *help;           /* lines separated by '\n', printed under each other */
	double min, max;
	const char *const *values;  /* ST_OPT_ENUM: the allowed values, NULL-terminated */
	int value;                  /* ST_OPT_CONST: what is stored */
	const char *unset;          /* what happens when the target holds no value (0 or NULL),
	                             * printed as "(default: UNSET)"; a target that holds one at
	                             * --help time gets "(default VALUE)" instead, read from it, so
	                             * the help shows each command's real defaults */
} st_opt;

/* Two options that cannot be given together (long names without dashes). */
typedef struct st_opt_conflict {
	const char *a, *b;
} st_opt_conflict;

/* The most options one parse may see over all its tables. */
#define ST_OPT_MAX 128

/* Parse argv[1..argc-1] (argv[0] is the command) against the tables (a NULL-terminated list;
 * on a name in two tables the first wins) and refuse the conflicts (a list ended by {NULL,
 * NULL}; NULL for none). --name VALUE, --name=VALUE and -x VALUE are accepted; "--" ends the
 * options; "-" is a positional. Positionals go to pos (room for max_pos), their count to
 * *n_pos. ST_OK, or ST_E_INVALID with a one-line message naming the option. Targets of options
 * given before the error may have been written. */
st_status st_opt_parse(const st_opt *const *tables, const st_opt_conflict *conflicts, int argc,
                       char **argv, const char **pos, int max_pos, int *n_pos, st_err *err);

/* One option at argv[*i] (which starts with '-'), its value maybe taken from argv[*i + 1]
 * (then *i moves): 1 consumed, 0 not in the tables (nothing said), -1 a bad value (err set).
 * For commands that mix a table with hand-written parsing; it knows no conflicts. */
int st_opt_parse_one(const st_opt *const *tables, int argc, char **argv, int *i, st_err *err);

/* The table's options, one per line or more: "  -x, --name ARG  help", help lines aligned. */
void st_opt_usage(FILE *f, const st_opt *table);

#endif

/* A store's schema set up against other processes or threads opening the same new file at once
 * (stitch eval --parallel: one LLM cache connection a worker; several benches on one results
 * store). Turning on WAL and creating tables take the write lock, and where two connections
 * would wait on each other SQLite answers BUSY at once instead of calling the busy handler; so
 * the setup is tried again for as long as the 10 s busy timeout would have waited. Header-only:
 * the libraries that link SQLite include it, the core does not link it. */
#ifndef ST_SQLITE_SETUP_H
#define ST_SQLITE_SETUP_H

#include <sqlite3.h>

static inline int st_sqlite_setup(sqlite3 *db, const char *sql, char **msg)
{
	for (int waited_ms = 0;; waited_ms += 20) {
		int rc = sqlite3_exec(db, sql, NULL, NULL, msg);
		if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited_ms >= 10000)
			return rc;
		sqlite3_free(*msg);
		*msg = NULL;
		sqlite3_sleep(20);
	}
}

#endif

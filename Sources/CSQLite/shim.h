// The one C header litectl sees: the system sqlite3.h, with the session
// extension declared (Debian's libsqlite3 is built with it), plus wrappers for
// what Swift cannot call directly (variadic sqlite3_db_config).
#ifndef LITECTL_CSQLITE_SHIM_H
#define LITECTL_CSQLITE_SHIM_H

#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include <sqlite3.h>

/// sqlite3_db_config for the boolean options (DEFENSIVE, TRUSTED_SCHEMA, ...),
/// which take an int and an int* after the op code.
static inline int litectl_db_config_bool(sqlite3 *db, int op, int value, int *out) {
    return sqlite3_db_config(db, op, value, out);
}

/// sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on): whether SQLite counts its
/// memory (a global mutex taken on every allocation). Before sqlite3_initialize only.
static inline int litectl_config_memstatus(int on) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on);
}

/// SQLITE_TRANSIENT is a cast macro Swift cannot import.
static inline sqlite3_destructor_type litectl_transient(void) {
    return SQLITE_TRANSIENT;
}

#endif

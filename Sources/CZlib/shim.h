// The system zlib, for streaming gzip of backups.
#ifndef LITECTL_CZLIB_SHIM_H
#define LITECTL_CZLIB_SHIM_H
#include <zlib.h>
#endif

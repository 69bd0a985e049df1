// The system zstd (Debian's libzstd-dev), for repository blobs and objects.
#ifndef LITECTL_CZSTD_SHIM_H
#define LITECTL_CZSTD_SHIM_H
#include <zstd.h>
#endif

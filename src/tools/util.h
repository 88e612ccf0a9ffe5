/*
 * util.h — small helpers shared by the innet subcommands (src/tools/).
 */
#ifndef INNET_TOOLS_UTIL_H
#define INNET_TOOLS_UTIL_H

/* mkdir -p DIR (mode 0755 for what it creates). 0, or -errno. */
int tools_mkdir_p(const char *dir);

/* mkdir -p the directory part of PATH (nothing if PATH has none). 0, or -errno. */
int tools_mkdir_parent(const char *path);

#include <stdbool.h>

/* True if something accepts connections on the unix stream socket at path
 * (a running switch's control socket). */
bool tools_ctl_answers(const char *path);

#endif

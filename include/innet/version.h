/*
 * innet/version.h — innet's version: the one place it is set. The innet
 * command prints it (`innet --version`); a library built from this tree
 * takes its soname from INNET_VERSION_MAJOR.
 *
 * Semantic versioning: MAJOR changes break the public headers' ABI or a wire
 * format, MINOR adds to them, PATCH fixes without changing either.
 */
#ifndef INNET_VERSION_H
#define INNET_VERSION_H

#define INNET_VERSION_MAJOR 0
#define INNET_VERSION_MINOR 9
#define INNET_VERSION_PATCH 0

#define INNET_VERSION_STR_(x) #x
#define INNET_VERSION_STR(x)  INNET_VERSION_STR_(x)
/* "0.9.0" */
#define INNET_VERSION_STRING                                                            \
	INNET_VERSION_STR(INNET_VERSION_MAJOR) "." INNET_VERSION_STR(INNET_VERSION_MINOR) "." \
	INNET_VERSION_STR(INNET_VERSION_PATCH)
/* One integer that compares in order: 0x000900 for 0.9.0. */
#define INNET_VERSION_NUMBER \
	(INNET_VERSION_MAJOR << 16 | INNET_VERSION_MINOR << 8 | INNET_VERSION_PATCH)

#endif /* INNET_VERSION_H */

/* Messages for libshoalsdsm's error codes. */
#include "sdsm_errno.h"

const char *sdsm_strerror(int e)
{
    static const char *text[SDSM_NERRORS] = {
        "success", "invalid argument", "call not allowed in this rank's role",
        "chunk already held by this client", "chunk not held by this client",
        "deadlock: the request would wait for itself",
        "collective allocation differs between ranks", "protocol violation",
        "out of memory", "MPI call failed", "library finalized",
    };
    return e >= 0 && e < SDSM_NERRORS ? text[e] : "unknown error";
}

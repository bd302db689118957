/* libshoalsdsm's error codes (no MPI needed: the home state machine uses them too). */
#ifndef SDSM_ERRNO_H
#define SDSM_ERRNO_H

enum {
    SDSM_OK = 0,
    SDSM_EINVAL,      /* bad argument (unknown chunk, chunk larger than MPI can send) */
    SDSM_EROLE,       /* a client call on a server rank or the reverse */
    SDSM_EHELD,       /* acquiring a chunk this client already holds */
    SDSM_ENOTHELD,    /* releasing a chunk this client does not hold */
    SDSM_EDEADLK,     /* the home saw a wait-for cycle among its own chunks */
    SDSM_EMISMATCH,   /* a collective allocation whose arguments differ between ranks */
    SDSM_EPROTO,      /* a message the protocol does not allow */
    SDSM_ENOMEM,
    SDSM_EMPI,        /* an MPI call failed */
    SDSM_ESHUTDOWN,   /* the library is finalized or the client said BYE */
    SDSM_NERRORS
};

const char *sdsm_strerror(int e);

#endif

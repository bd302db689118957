/* The reference loop of wait_instructions.py: N nonblocking sends of 8
 * bytes to self, each followed by its receive and the send's wait. The
 * message is always there when the receive starts, so the loop never
 * waits: what it counts is the work of the call path itself (the MPI's, and
 * the library's when preloaded). The send is nonblocking because a blocking
 * send to self may wait for its receive (MPICH's does).
 *
 *   wait_selfloop N */
#include <mpi.h>
#include <stdlib.h>

/* Counted alone: valgrind --toggle-collect=send_receive_loop. */
__attribute__((noinline)) void send_receive_loop(long n)
{
    char out[8] = {0}, in[8];
    for (long i = 0; i < n; i++) {
        MPI_Request send;
        MPI_Isend(out, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &send);
        MPI_Recv(in, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&send, MPI_STATUS_IGNORE);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    send_receive_loop(argc > 1 ? atol(argv[1]) : 10000);
    MPI_Finalize();
    return 0;
}

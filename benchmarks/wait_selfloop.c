/* The reference loop of wait_instructions.py: N rounds of two 8-byte
 * messages to self. The first is a nonblocking send, its receive
 * (MPI_Recv) and the send's wait; the second a posted receive, a blocking
 * send (MPI_Send) and the receive's wait. A message is always there or
 * awaited by a posted receive, so nothing waits: what is counted is the work
 * of the call path itself (the MPI's, and the library's when preloaded). A
 * blocking send to self comes only after its receive is posted, because it
 * may wait for that receive (MPICH's does).
 *
 *   wait_selfloop N */
#include <mpi.h>
#include <stdlib.h>

/* Counted alone: valgrind --toggle-collect=send_receive_loop. */
__attribute__((noinline)) void send_receive_loop(long n)
{
    char out[8] = {0}, in[8];
    for (long i = 0; i < n; i++) {
        MPI_Request req;
        MPI_Isend(out, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req);
        MPI_Recv(in, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Irecv(in, 8, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req);
        MPI_Send(out, 8, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    send_receive_loop(argc > 1 ? atol(argv[1]) : 10000);
    MPI_Finalize();
    return 0;
}

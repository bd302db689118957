"""Which MPI runs shoal's programs, how native code is built against it,
and the one place where mpiexec command lines are made."""

"""The study: MPI benchmarks over node counts with power, fitted models,
the optimum cluster size and the offload decision, in one run and one report."""

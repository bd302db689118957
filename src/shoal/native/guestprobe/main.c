/* shoal-guest-probe: the reference kernels timed on a virtual board's core, inside its guest.
 *
 *   shoal-guest-probe --probe NAME[,NAME...] [--probe-s S] [--rounds R]
 *
 * The same kernels and the same JSON as shoal-work --probe (work/probe.c), without MPI. */
#include "work.h"

extern const wk_workload wk_raytrace, wk_videostream, wk_msa, wk_ep;
static const wk_workload *const kernels[] = {&wk_raytrace, &wk_videostream, &wk_msa, &wk_ep};

int main(int argc, char **argv)
{
    return wk_probe_cli(argc, argv, kernels, sizeof kernels / sizeof kernels[0]);
}

/* settings NAME...: the value each named MPI_T control variable (an int or a switch) has in rank 0 once
 * MPI_Init has returned (what the MPI took from the environment the launch gave it),
 * one JSON line each; value null where the MPI has no such variable. */
#include "waittest.h"

#include <stdio.h>
#include <string.h>

static int read_cvar(const char *wanted, int *value)
{
    int count;
    if (MPI_T_cvar_get_num(&count) != MPI_SUCCESS)
        return 0;
    for (int i = 0; i < count; i++) {
        char name[256], desc[8];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc,
                                &desc_len, &bind, &scope) != MPI_SUCCESS ||
            strcmp(name, wanted) || (type != MPI_INT && type != MPI_C_BOOL))
            continue;
        MPI_T_cvar_handle handle;
        int n;
        if (MPI_T_cvar_handle_alloc(i, NULL, &handle, &n) != MPI_SUCCESS)
            return 0;
        int ok;
        if (type == MPI_C_BOOL) {   /* a switch (Open MPI's mpi_yield_when_idle): 0 or 1 */
            _Bool on = 0;
            ok = MPI_T_cvar_read(handle, &on) == MPI_SUCCESS;
            *value = on;
        } else {
            ok = MPI_T_cvar_read(handle, value) == MPI_SUCCESS;
        }
        MPI_T_cvar_handle_free(&handle);
        return ok;
    }
    return 0;
}

int wt_settings(int argc, char **argv)
{
    int provided, rank;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 2; i < argc && rank == 0; i++) {
        int value;
        if (read_cvar(argv[i], &value))
            printf("{\"setting\": \"%s\", \"value\": %d}\n", argv[i], value);
        else
            printf("{\"setting\": \"%s\", \"value\": null}\n", argv[i]);
    }
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}

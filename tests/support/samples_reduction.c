/* Gradcheck samples for the reduction ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_reduction[] = {
    {NULL, NULL, 0},
};

/* Gradcheck samples for the norm ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_norm[] = {
    {NULL, NULL, 0},
};

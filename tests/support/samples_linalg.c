/* Gradcheck samples for the linalg ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_linalg[] = {
    {NULL, NULL, 0},
};

/* Gradcheck samples for the creation ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_creation[] = {
    {NULL, NULL, 0},
};

/* Gradcheck samples for the activation ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_activation[] = {
    {NULL, NULL, 0},
};

/* Gradcheck samples for the elementwise ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_elementwise[] = {
    {NULL, NULL, 0},
};

/* Gradcheck samples for the conv ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_conv[] = {
    {NULL, NULL, 0},
};

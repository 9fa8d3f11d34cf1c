/* Gradcheck samples for the manipulation ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_manipulation[] = {
    {NULL, NULL, 0},
};

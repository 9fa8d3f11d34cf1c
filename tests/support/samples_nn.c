/* Gradcheck samples for the nn ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_nn[] = {
    {NULL, NULL, 0},
};

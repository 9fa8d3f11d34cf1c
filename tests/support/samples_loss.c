/* Gradcheck samples for the loss ops. */
#include "op_samples.h"

const pd_op_sample pd_samples_loss[] = {
    {NULL, NULL, 0},
};

/* Shared by the activation layer files. */
#ifndef PADDLEC_NN_ACTIVATION_INTERNAL_H
#define PADDLEC_NN_ACTIVATION_INTERNAL_H

#include <stddef.h>

/* A double as Python's str() prints it: shortest round-trip form, ".0" on integers. */
void pd_nn_pyfloat(double v, char *buf, size_t cap);

#endif

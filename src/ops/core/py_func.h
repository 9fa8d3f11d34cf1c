/* The py_func op's table of user callbacks (paddle.static.py_func): an op
 * row whose kernel and backward call C functions registered at run time.
 * Attribute i0 is the index of the callback entry. */
#ifndef PADDLEC_OPS_PY_FUNC_H
#define PADDLEC_OPS_PY_FUNC_H

#include "paddlec/static.h"

/* Registers (func, user, backward, output specs) and returns its index,
 * the same one for an identical entry; -1 with an error when the table is
 * full or the specs are invalid. Entries live as long as the process. */
int pd_py_func_register(pd_py_func_fn func, void *user, pd_py_func_fn backward,
                        const pd_input_spec *out_specs, int n_out);

#endif

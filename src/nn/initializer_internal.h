/* The initializers' one computation, shared by eager initialization and
 * the static graph's startup Programs. */
#ifndef PADDLEC_NN_INITIALIZER_INTERNAL_H
#define PADDLEC_NN_INITIALIZER_INTERNAL_H

#include "paddlec/nn.h"

/* The values init gives a tensor shaped like t: a new tensor computed with
 * registry ops only (uniform, gaussian, truncated_gaussian_random, scale,
 * full), in t's dtype or the
 * float32/float64 one it is drawn in. Eager initialization copies it into
 * t; a startup Program records the same ops, so running it after the same
 * pd_seed draws the same numbers. NULL with an error, or NULL with *st
 * PD_OK when t has no elements to draw. Only for kinds
 * pd_initializer_records accepts. */
pd_tensor *pd_initializer_values(const pd_initializer *init, const pd_tensor *t, pd_status *st);
/* Whether init's values come from random or fill ops (not Assign, a given
 * value, which a startup Program holds as an assign_value). */
bool pd_initializer_records(const pd_initializer *init);

/* Called by pd_initializer_apply after it fills a named parameter (a
 * tensor with parameter info) with a recordable initializer: the static
 * graph records the initializer into the startup Program being built. */
typedef pd_status (*pd_nn_init_recorder_fn)(const pd_initializer *init, pd_tensor *param);
void pd_nn_set_init_recorder(pd_nn_init_recorder_fn fn);

#endif

/* One element of any dtype, loaded or stored through a double: the generic
 * (slow) paths' conversion, usable without the tensor struct. Internal. */
#ifndef PADDLEC_ELEMENT_H
#define PADDLEC_ELEMENT_H

#include "paddlec/core.h"

/* The element at p as a double (NAN for an invalid dtype). */
double pd_load_as_f64(const void *p, pd_dtype dt);
/* Stores v at p: integers saturate (NaN gives 0), float16/bfloat16 round
 * once, correctly. */
void pd_store_from_f64(void *p, pd_dtype dt, double v);

#endif

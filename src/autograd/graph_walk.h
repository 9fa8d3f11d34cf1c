/* Read-only walks over the recorded backward graph, for layers above
 * autograd that must know what a backward will reach (DataParallel's
 * unused-parameter search). */
#ifndef PADDLEC_AUTOGRAD_GRAPH_WALK_H
#define PADDLEC_AUTOGRAD_GRAPH_WALK_H

#include "paddlec/core.h"

/* Calls fn once for every leaf tensor a backward from `roots` would send a
 * gradient to (edges of every node reachable from the roots' grad_fn; a
 * root that is itself a leaf needing a gradient counts). Roots with
 * stop_gradient=True and NULL roots are skipped. Touches no node state, so
 * it may run while no backward is running or inside one. */
pd_status pd_autograd_visit_leaves(pd_tensor *const *roots, int n_roots,
                                   void (*fn)(pd_tensor *leaf, void *user), void *user);

#endif

/* reshard between a mesh and one of its sub-meshes (Paddle's
 * GlobalToSubMesh / SubMeshToGlobal, the pipeline stages): the sub-mesh at
 * coordinate i of axis a is the big mesh with a fixed at i, so a placement
 * on the sub-mesh is the same placement on the big mesh with a Replicate.
 *   global -> sub: reshard on the global mesh to (a: Replicate, the rest as
 *     the target), then the sub-mesh's ranks keep their shards;
 *   sub -> global: each sub-mesh rank sends its shard to the ranks that
 *     differ from it only along a (send/recv), then reshard on the global
 *     mesh from (a: Replicate, the rest as the source) to the target. */
#include <stdlib.h>
#include <string.h>

#include "ap_internal.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"

int pd_ap_submesh_axis(const pd_dist_process_mesh *big, const pd_dist_process_mesh *sub, int64_t *index) {
  if (big->ndim != sub->ndim + 1) return -1;
  for (int a = 0; a < big->ndim; a++)
    for (int64_t i = 0; i < big->shape[a]; i++) {
      pd_dist_process_mesh *m = pd_dist_process_mesh_get_mesh_with_dim(big, big->names[a], i);
      bool eq = m && pd_dist_process_mesh_equal(m, sub);
      pd_dist_process_mesh_release(m);
      if (eq) {
        *index = i;
        return a;
      }
    }
  pd_clear_error();
  return -1;
}

/* The big mesh's placements for sub-mesh placements p (axis a inserted). */
static void widen(const pd_dist_placement *p, int a, int big_ndim, pd_dist_placement *out) {
  for (int m = 0, k = 0; m < big_ndim; m++) out[m] = m == a ? pd_dist_replicate() : p[k++];
}

static pd_tensor *empty_like_dtype(pd_dtype dt) { return pd_zeros(1, (const int64_t[]){0}, dt); }

/* Global -> sub-mesh. */
static pd_tensor *to_sub(pd_tensor *local, const pd_dist_attr *src, const pd_dist_attr *dst, int a) {
  pd_dist_placement mid[PD_DIST_MAX_MESH_DIMS];
  widen(dst->p, a, src->mesh->ndim, mid);
  pd_dist_attr *m = pd_ap_attr_new(src->mesh, mid, src->ndim, src->shape);
  if (!m) return NULL;
  pd_tensor *x = pd_dist_process_mesh_contains(src->mesh, pd_ap_my_rank())
                     ? pd_ap_reshard_same_mesh(pd_tensor_retain(local), src->mesh, src, m)
                     : pd_tensor_retain(local);
  pd_ap_attr_free(m);
  if (x && !pd_dist_process_mesh_contains(dst->mesh, pd_ap_my_rank())) {
    pd_tensor_release(x);
    return empty_like_dtype(local->dtype);
  }
  return x;
}

/* Sub-mesh -> global. */
static pd_tensor *to_global(pd_tensor *local, const pd_dist_attr *src, const pd_dist_attr *dst, int a,
                            int64_t index) {
  pd_dist_process_mesh *big = dst->mesh;
  pd_dist_placement mid[PD_DIST_MAX_MESH_DIMS];
  widen(src->p, a, big->ndim, mid);
  pd_dist_attr *m = pd_ap_attr_new(big, mid, dst->ndim, dst->shape);
  if (!m) return NULL;
  int me = pd_ap_my_rank();
  int64_t st = 1, co[PD_DIST_MAX_MESH_DIMS];
  for (int d = big->ndim - 1; d > a; d--) st *= big->shape[d];
  pd_status s = PD_OK;
  pd_tensor *x = NULL;
  /* the sub-mesh's ranks send along a */
  pd_dist_task *tasks[1 << 10];
  int nt = 0;
  pd_tensor *sent = NULL;
  if (pd_dist_process_mesh_contains(src->mesh, me)) {
    sent = pd_contiguous(local);
    int64_t at = pd_ap_mesh_index_of(big, me);
    for (int64_t j = 0; sent && s == PD_OK && j < big->shape[a] && nt < (1 << 10); j++)
      if (j != index) s = pd_dist_isend(sent, big->ids[at + (j - index) * st], NULL, &tasks[nt++]);
    if (!sent) s = pd_last_status();
    x = sent ? pd_tensor_retain(sent) : NULL;
  } else if (pd_ap_mesh_coords(big, me, co)) {
    int64_t at = pd_ap_mesh_index_of(big, me);
    int64_t shape[PD_MAX_DIMS];
    int nd = pd_ap_local_shape(m, shape);
    x = pd_empty(nd, shape, local->dtype); /* the receive fills it */
    pd_dist_opts o = {0};
    if (!x || pd_dist_recv(x, big->ids[at + (index - co[a]) * st], &o) != PD_OK) s = pd_last_status();
  } else {
    x = empty_like_dtype(local->dtype);
  }
  for (int t = 0; t < nt; t++) {
    pd_status ts = pd_dist_task_wait(tasks[t]);
    if (s == PD_OK) s = ts;
    pd_dist_task_free(tasks[t]);
  }
  pd_tensor_release(sent);
  if (s == PD_OK && x && pd_dist_process_mesh_contains(big, me)) x = pd_ap_reshard_same_mesh(x, big, m, dst);
  pd_ap_attr_free(m);
  if (s != PD_OK) {
    pd_tensor_release(x);
    return NULL;
  }
  return x;
}

pd_tensor *pd_ap_reshard_submesh(pd_tensor *local, const pd_dist_attr *src, const pd_dist_attr *dst) {
  int64_t index = 0;
  int a = pd_ap_submesh_axis(src->mesh, dst->mesh, &index);
  if (pd_ap_mesh_prepare(src->mesh) != PD_OK || pd_ap_mesh_prepare(dst->mesh) != PD_OK) return NULL;
  if (a >= 0) return to_sub(local, src, dst, a);
  a = pd_ap_submesh_axis(dst->mesh, src->mesh, &index);
  return to_global(local, src, dst, a, index);
}

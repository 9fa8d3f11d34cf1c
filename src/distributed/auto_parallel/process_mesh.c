/* paddle.distributed.ProcessMesh: an n-d array of process ids with named
 * dims, its sub-meshes, and the communication groups along its axes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../comm/group_internal.h"
#include "ap_internal.h"

static pd_dist_process_mesh *mesh_alloc(int ndim, const int64_t *shape, int64_t size) {
  pd_dist_process_mesh *m = calloc(1, sizeof *m);
  if (!m || !(m->ids = malloc((size_t)(size > 0 ? size : 1) * sizeof *m->ids))) {
    free(m);
    pd_set_error(PD_ERR_MEMORY, "ProcessMesh: out of memory");
    return NULL;
  }
  atomic_init(&m->refcount, 1);
  m->ndim = ndim;
  m->size = size;
  for (int d = 0; d < ndim; d++) m->shape[d] = shape[d];
  return m;
}

pd_dist_process_mesh *pd_dist_process_mesh_new(int ndim, const int64_t *shape, const int *process_ids,
                                               const char *const *dim_names) {
  if (ndim < 1 || ndim > PD_DIST_MAX_MESH_DIMS) {
    pd_set_error(PD_ERR_INVALID, "ProcessMesh: ndim %d is out of range (1 to %d)", ndim,
                 PD_DIST_MAX_MESH_DIMS);
    return NULL;
  }
  if (!shape || !process_ids) {
    pd_set_error(PD_ERR_INVALID, "ProcessMesh: %s is NULL", !shape ? "shape" : "process_ids");
    return NULL;
  }
  int64_t size = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 1 || shape[d] > (1 << 20)) {
      pd_set_error(PD_ERR_INVALID, "ProcessMesh: dim %d has size %lld (must be >= 1)", d,
                   (long long)shape[d]);
      return NULL;
    }
    size *= shape[d];
  }
  if (size > (1 << 20)) {
    pd_set_error(PD_ERR_INVALID, "ProcessMesh: %lld processes is too many", (long long)size);
    return NULL;
  }
  for (int64_t i = 0; i < size; i++) {
    if (process_ids[i] < 0) {
      pd_set_error(PD_ERR_INVALID, "ProcessMesh: process id %d (entry %lld) is negative", process_ids[i],
                   (long long)i);
      return NULL;
    }
    for (int64_t j = 0; j < i; j++)
      if (process_ids[j] == process_ids[i]) {
        pd_set_error(PD_ERR_INVALID, "ProcessMesh: process id %d appears twice (entries %lld and %lld)",
                     process_ids[i], (long long)j, (long long)i);
        return NULL;
      }
  }
  if (dim_names)
    for (int d = 0; d < ndim; d++) {
      if (!dim_names[d] || !*dim_names[d] || strlen(dim_names[d]) >= PD_DIST_NAME_LEN) {
        pd_set_error(PD_ERR_INVALID, "ProcessMesh: dim name %d is %s", d,
                     !dim_names[d]    ? "NULL"
                     : !*dim_names[d] ? "empty"
                                      : "too long");
        return NULL;
      }
      for (int e = 0; e < d; e++)
        if (strcmp(dim_names[e], dim_names[d]) == 0) {
          pd_set_error(PD_ERR_INVALID, "ProcessMesh: dim name '%s' is used twice (dims %d and %d)",
                       dim_names[d], e, d);
          return NULL;
        }
    }
  pd_dist_process_mesh *m = mesh_alloc(ndim, shape, size);
  if (!m) return NULL;
  memcpy(m->ids, process_ids, (size_t)size * sizeof *m->ids);
  for (int d = 0; d < ndim; d++) {
    if (dim_names)
      snprintf(m->names[d], PD_DIST_NAME_LEN, "%s", dim_names[d]);
    else
      snprintf(m->names[d], PD_DIST_NAME_LEN, "d%d", d);
  }
  return m;
}

pd_dist_process_mesh *pd_dist_process_mesh_retain(pd_dist_process_mesh *m) {
  if (m) atomic_fetch_add(&m->refcount, 1);
  return m;
}

void pd_dist_process_mesh_release(pd_dist_process_mesh *m) {
  if (!m || atomic_fetch_sub(&m->refcount, 1) != 1) return;
  for (int a = 0; a < PD_DIST_MAX_MESH_DIMS; a++) free(m->axis_groups[a]); /* the groups are the world's */
  free(m->ids);
  free(m);
}

int pd_dist_process_mesh_ndim(const pd_dist_process_mesh *m) { return m ? m->ndim : 0; }
const int64_t *pd_dist_process_mesh_shape(const pd_dist_process_mesh *m) { return m ? m->shape : NULL; }
int64_t pd_dist_process_mesh_size(const pd_dist_process_mesh *m) { return m ? m->size : 0; }
const int *pd_dist_process_mesh_process_ids(const pd_dist_process_mesh *m) { return m ? m->ids : NULL; }
const char *pd_dist_process_mesh_dim_name(const pd_dist_process_mesh *m, int i) {
  return m && i >= 0 && i < m->ndim ? m->names[i] : NULL;
}

static int dim_of(const pd_dist_process_mesh *m, const char *name, const char *op) {
  for (int d = 0; m && name && d < m->ndim; d++)
    if (strcmp(m->names[d], name) == 0) return d;
  char buf[256];
  pd_set_error(PD_ERR_INVALID, "%s: mesh %s has no dim named '%s'", op, pd_ap_mesh_str(m, buf, sizeof buf),
               name ? name : "(null)");
  return -1;
}

int64_t pd_dist_process_mesh_get_dim_size(const pd_dist_process_mesh *m, const char *dim_name) {
  int d = dim_of(m, dim_name, "get_dim_size");
  return d < 0 ? -1 : m->shape[d];
}

/* Strides of the row-major id array. */
static void mesh_strides(const pd_dist_process_mesh *m, int64_t *st) {
  int64_t s = 1;
  for (int d = m->ndim - 1; d >= 0; d--) {
    st[d] = s;
    s *= m->shape[d];
  }
}

/* The sub-mesh where dim `dim` is fixed at `index` (the dim dropped). */
static pd_dist_process_mesh *fix_dim(const pd_dist_process_mesh *m, int dim, int64_t index, const char *op) {
  if (index < -m->shape[dim] || index >= m->shape[dim]) {
    pd_set_error(PD_ERR_INDEX, "%s: index %lld is out of range for mesh dim '%s' of size %lld", op,
                 (long long)index, m->names[dim], (long long)m->shape[dim]);
    return NULL;
  }
  if (index < 0) index += m->shape[dim];
  if (m->ndim == 1) { /* a scalar result: a one-process 1-d mesh named d0 */
    pd_dist_process_mesh *r = mesh_alloc(1, (const int64_t[]){1}, 1);
    if (!r) return NULL;
    r->ids[0] = m->ids[index];
    snprintf(r->names[0], PD_DIST_NAME_LEN, "d0");
    return r;
  }
  int64_t shape[PD_DIST_MAX_MESH_DIMS], st[PD_DIST_MAX_MESH_DIMS];
  int nd = 0;
  for (int d = 0; d < m->ndim; d++)
    if (d != dim) shape[nd++] = m->shape[d];
  pd_dist_process_mesh *r = mesh_alloc(nd, shape, m->size / m->shape[dim]);
  if (!r) return NULL;
  mesh_strides(m, st);
  for (int d = 0, k = 0; d < m->ndim; d++)
    if (d != dim) memcpy(r->names[k++], m->names[d], PD_DIST_NAME_LEN);
  for (int64_t i = 0; i < r->size; i++) { /* i: row-major index over the kept dims */
    int64_t rem = i, off = index * st[dim];
    for (int d = m->ndim - 1; d >= 0; d--) {
      if (d == dim) continue;
      off += (rem % m->shape[d]) * st[d];
      rem /= m->shape[d];
    }
    r->ids[i] = m->ids[off];
  }
  return r;
}

pd_dist_process_mesh *pd_dist_process_mesh_get_mesh_with_dim(const pd_dist_process_mesh *m,
                                                             const char *dim_name, int64_t index) {
  int d = dim_of(m, dim_name, "get_mesh_with_dim");
  return d < 0 ? NULL : fix_dim(m, d, index, "get_mesh_with_dim");
}

pd_dist_process_mesh *pd_dist_process_mesh_index(const pd_dist_process_mesh *m, int64_t index) {
  if (!m) {
    pd_set_error(PD_ERR_INVALID, "ProcessMesh index: mesh is NULL");
    return NULL;
  }
  return fix_dim(m, 0, index, "ProcessMesh index");
}

bool pd_dist_process_mesh_equal(const pd_dist_process_mesh *a, const pd_dist_process_mesh *b) {
  if (a == b) return true;
  if (!a || !b || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return memcmp(a->ids, b->ids, (size_t)a->size * sizeof *a->ids) == 0;
}

int64_t pd_ap_mesh_index_of(const pd_dist_process_mesh *m, int pid) {
  for (int64_t i = 0; m && i < m->size; i++)
    if (m->ids[i] == pid) return i;
  return -1;
}

bool pd_dist_process_mesh_contains(const pd_dist_process_mesh *m, int pid) {
  return pd_ap_mesh_index_of(m, pid) >= 0;
}

bool pd_ap_mesh_coords(const pd_dist_process_mesh *m, int pid, int64_t *coords) {
  int64_t i = pd_ap_mesh_index_of(m, pid);
  if (i < 0) return false;
  for (int d = m->ndim - 1; d >= 0; d--) {
    coords[d] = i % m->shape[d];
    i /= m->shape[d];
  }
  return true;
}

int64_t pd_dist_process_mesh_get_rank_by_dim_and_process_id(const pd_dist_process_mesh *m,
                                                            const char *dim_name, int pid) {
  int d = dim_of(m, dim_name, "get_rank_by_dim_and_process_id");
  int64_t c[PD_DIST_MAX_MESH_DIMS];
  if (d < 0 || !pd_ap_mesh_coords(m, pid, c)) return -1;
  return c[d];
}

const char *pd_ap_mesh_str(const pd_dist_process_mesh *m, char *buf, size_t cap) {
  if (!m) {
    snprintf(buf, cap, "(null)");
    return buf;
  }
  size_t n = 0;
  n += (size_t)snprintf(buf + n, cap - n, "{shape: [");
  for (int d = 0; d < m->ndim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)m->shape[d]);
  if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "], process_ids: [");
  for (int64_t i = 0; i < m->size && n < cap; i++) {
    if (i == 16 && m->size > 17) {
      n += (size_t)snprintf(buf + n, cap - n, ", ...");
      break;
    }
    n += (size_t)snprintf(buf + n, cap - n, "%s%d", i ? ", " : "", m->ids[i]);
  }
  if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "], dim_names: [");
  for (int d = 0; d < m->ndim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", d ? ", " : "", m->names[d]);
  if (n < cap) snprintf(buf + n, cap - n, "]}");
  return buf;
}

int pd_ap_my_rank(void) {
  int r = pd_dist_get_rank(NULL);
  return r < 0 ? 0 : r;
}

/* ---- the axis groups ----------------------------------------------------
 * Groups with the same ranks are shared by every mesh (one list for the
 * process, reset when the world is left). pd_dist_new_group must be called
 * on every rank in the same order: the first reshard on a mesh makes all
 * its axis groups, on members and non-members alike. */
typedef struct group_entry {
  int n;
  int *ranks; /* sorted */
  pd_dist_group *g;
} group_entry;
static group_entry *g_groups;
static int g_ngroups;
static unsigned long g_groups_world; /* the world these groups belong to */

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static pd_dist_group *shared_group(const int *ranks, int n) {
  int sorted[1 << 10];
  if (n > (int)(sizeof sorted / sizeof *sorted)) {
    pd_set_error(PD_ERR_INVALID, "auto_parallel: a mesh axis of %d processes is too large", n);
    return NULL;
  }
  memcpy(sorted, ranks, (size_t)n * sizeof *ranks);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
  unsigned long world = pd_dist_world_generation();
  if (world != g_groups_world) { /* a new world: the old groups are gone */
    for (int i = 0; i < g_ngroups; i++) free(g_groups[i].ranks);
    free(g_groups);
    g_groups = NULL;
    g_ngroups = 0;
    g_groups_world = world;
  }
  for (int i = 0; i < g_ngroups; i++)
    if (g_groups[i].n == n && memcmp(g_groups[i].ranks, sorted, (size_t)n * sizeof *sorted) == 0)
      return g_groups[i].g;
  pd_dist_group *g = pd_dist_new_group(sorted, n, NULL);
  if (!g) return NULL;
  group_entry *v = realloc(g_groups, (size_t)(g_ngroups + 1) * sizeof *v);
  int *r = malloc((size_t)n * sizeof *r);
  if (!v || !r) {
    free(r);
    if (v) g_groups = v;
    pd_set_error(PD_ERR_MEMORY, "auto_parallel: out of memory");
    return NULL;
  }
  g_groups = v;
  memcpy(r, sorted, (size_t)n * sizeof *r);
  g_groups[g_ngroups++] = (group_entry){n, r, g};
  return g;
}

/* Makes every axis group of m (all sub-meshes of every axis of size > 1). */
static pd_status make_groups(pd_dist_process_mesh *m) {
  if (m->groups_world && m->groups_world == pd_dist_world_generation()) return PD_OK;
  char buf[256];
  if (!pd_dist_is_initialized())
    return pd_set_error(PD_ERR_STATE,
                        "auto_parallel: mesh %s spans %lld processes but the parallel environment is not "
                        "initialised (call pd_dist_init_parallel_env)",
                        pd_ap_mesh_str(m, buf, sizeof buf), (long long)m->size);
  int world = pd_dist_get_world_size(NULL);
  for (int64_t i = 0; i < m->size; i++)
    if (m->ids[i] >= world)
      return pd_set_error(PD_ERR_INVALID, "auto_parallel: mesh %s names process %d but the world has %d",
                          pd_ap_mesh_str(m, buf, sizeof buf), m->ids[i], world);
  int64_t st[PD_DIST_MAX_MESH_DIMS];
  mesh_strides(m, st);
  for (int a = 0; a < m->ndim; a++) {
    int64_t n = m->shape[a], nsub = m->size / n;
    free(m->axis_groups[a]);
    m->axis_groups[a] = calloc((size_t)nsub, sizeof(pd_dist_group *));
    if (!m->axis_groups[a]) return pd_set_error(PD_ERR_MEMORY, "auto_parallel: out of memory");
    if (n == 1) continue;
    for (int64_t s = 0; s < nsub; s++) { /* s: row-major index over the other axes */
      int64_t rem = s, base = 0;
      for (int d = m->ndim - 1; d >= 0; d--) {
        if (d == a) continue;
        base += (rem % m->shape[d]) * st[d];
        rem /= m->shape[d];
      }
      int ranks[1 << 10];
      if (n > (int64_t)(sizeof ranks / sizeof *ranks))
        return pd_set_error(PD_ERR_INVALID, "auto_parallel: mesh axis of %lld processes is too large",
                            (long long)n);
      for (int64_t c = 0; c < n; c++) ranks[c] = m->ids[base + c * st[a]];
      if (!(m->axis_groups[a][s] = shared_group(ranks, (int)n))) return pd_last_status();
    }
  }
  m->groups_world = pd_dist_world_generation();
  return PD_OK;
}

pd_dist_group *pd_ap_axis_group(pd_dist_process_mesh *m, int axis) {
  if (make_groups(m) != PD_OK) return NULL;
  int64_t c[PD_DIST_MAX_MESH_DIMS];
  if (!pd_ap_mesh_coords(m, pd_ap_my_rank(), c)) {
    pd_set_error(PD_ERR_STATE, "auto_parallel: process %d is not in the mesh", pd_ap_my_rank());
    return NULL;
  }
  int64_t s = 0;
  for (int d = 0; d < m->ndim; d++)
    if (d != axis) s = s * m->shape[d] + c[d];
  return m->axis_groups[axis][s];
}

pd_status pd_ap_mesh_prepare(pd_dist_process_mesh *m) { return m->size > 1 ? make_groups(m) : PD_OK; }

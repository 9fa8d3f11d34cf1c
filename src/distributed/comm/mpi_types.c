/* pd dtypes and reduce ops in MPI terms. MPI reduces the integer and
 * floating types itself; float16 and bfloat16 (no MPI type) travel as
 * 16-bit integers and reduce through user ops that call the same kernel as
 * the shm backend; bool travels as bytes and reduces with MPI's logical
 * or / and (SUM and MAX are or, PROD and MIN are and, as in the kernel).
 * And byte ranges of a blocked buffer's piece as datatypes. */
#include <pthread.h>

#include "../../kernels/cpu/comm_reduce.h"
#include "mpi_internal.h"

MPI_Datatype pd_mpi_datatype(pd_dtype dt) {
  switch (dt) {
    case PD_BOOL:
    case PD_UINT8:
      return MPI_UINT8_T;
    case PD_INT8:
      return MPI_INT8_T;
    case PD_INT16:
      return MPI_INT16_T;
    case PD_INT32:
      return MPI_INT32_T;
    case PD_INT64:
      return MPI_INT64_T;
    case PD_FLOAT16:
    case PD_BFLOAT16:
      return MPI_UINT16_T;
    case PD_FLOAT32:
      return MPI_FLOAT;
    case PD_FLOAT64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

/* MPI calls user ops as inout = in op inout; the kernel takes its sources
 * in order, so in (the lower rank's partial result) comes first. */
#define PD_MPI_USER_OP(NAME, DT, OP)                                        \
  static void NAME(void *in, void *inout, int *len, MPI_Datatype *type) {   \
    (void)type;                                                             \
    const void *srcs[2] = {in, inout};                                      \
    pdk_comm_reduce(inout, srcs, 2, (size_t)(*len > 0 ? *len : 0), DT, OP); \
  }
PD_MPI_USER_OP(f16_sum, PD_FLOAT16, PDK_REDUCE_SUM)
PD_MPI_USER_OP(f16_max, PD_FLOAT16, PDK_REDUCE_MAX)
PD_MPI_USER_OP(f16_min, PD_FLOAT16, PDK_REDUCE_MIN)
PD_MPI_USER_OP(f16_prod, PD_FLOAT16, PDK_REDUCE_PROD)
PD_MPI_USER_OP(bf16_sum, PD_BFLOAT16, PDK_REDUCE_SUM)
PD_MPI_USER_OP(bf16_max, PD_BFLOAT16, PDK_REDUCE_MAX)
PD_MPI_USER_OP(bf16_min, PD_BFLOAT16, PDK_REDUCE_MIN)
PD_MPI_USER_OP(bf16_prod, PD_BFLOAT16, PDK_REDUCE_PROD)

static MPI_User_function *const k_user_fns[2][4] = {{f16_sum, f16_max, f16_min, f16_prod},
                                                    {bf16_sum, bf16_max, bf16_min, bf16_prod}};
static pthread_mutex_t g_ops_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Op g_user_ops[2][4];
static int g_user_ops_made;

pd_status pd_mpi_reduce_op(pd_dtype dt, pd_reduce_op op, MPI_Op *out) {
  if ((int)op < 0 || op >= PD_NUM_REDUCE_OPS)
    return pd_set_error(PD_ERR_INVALID, "mpi reduction: invalid reduce op %d", (int)op);
  if (op == PD_REDUCE_AVG) op = PD_REDUCE_SUM; /* the caller divides */
  if (pd_mpi_datatype(dt) == MPI_DATATYPE_NULL)
    return pd_set_error(PD_ERR_DTYPE, "mpi reduction: invalid dtype %d", (int)dt);
  if (dt == PD_BOOL) {
    *out = (op == PD_REDUCE_SUM || op == PD_REDUCE_MAX) ? MPI_LOR : MPI_LAND;
    return PD_OK;
  }
  if (dt != PD_FLOAT16 && dt != PD_BFLOAT16) {
    switch (op) {
      case PD_REDUCE_MAX:
        *out = MPI_MAX;
        break;
      case PD_REDUCE_MIN:
        *out = MPI_MIN;
        break;
      case PD_REDUCE_PROD:
        *out = MPI_PROD;
        break;
      default:
        *out = MPI_SUM;
    }
    return PD_OK;
  }
  pthread_mutex_lock(&g_ops_lock);
  pd_status st = PD_OK;
  if (!g_user_ops_made) {
    for (int d = 0; d < 2 && st == PD_OK; d++)
      for (int o = 0; o < 4; o++) {
        if (MPI_Op_create(k_user_fns[d][o], 1, &g_user_ops[d][o]) != MPI_SUCCESS) {
          st = pd_set_error(PD_ERR_COMM, "mpi reduction: MPI_Op_create failed for %s %s",
                            d ? "bfloat16" : "float16", pd_reduce_op_name((pd_reduce_op)o));
          break;
        }
      }
    if (st == PD_OK) g_user_ops_made = 1;
  }
  if (st == PD_OK) *out = g_user_ops[dt == PD_BFLOAT16][op];
  pthread_mutex_unlock(&g_ops_lock);
  return st;
}

int pd_mpi_blocked_range(size_t cols, size_t ld, size_t off, size_t len, MPI_Datatype *out, size_t *disp) {
  size_t i = off / cols, j = off % cols, head = cols - j < len ? cols - j : len;
  *disp = i * ld + j;
  if (head == len) {
    int rc = MPI_Type_contiguous((int)len, MPI_BYTE, out);
    if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(out)) != MPI_SUCCESS) MPI_Type_free(out);
    return rc;
  }
  /* the rest of row i, whole rows from row i + 1, the start of the row after them */
  size_t rows = (len - head) / cols, tail = (len - head) % cols;
  MPI_Datatype vec = MPI_DATATYPE_NULL, types[3] = {MPI_BYTE, MPI_BYTE, MPI_BYTE};
  int lens[3] = {(int)head, 0, 0}, nb = 1;
  MPI_Aint displs[3] = {0, (MPI_Aint)(ld - j), 0};
  int rc = MPI_SUCCESS;
  if (rows) {
    rc = MPI_Type_create_hvector((int)rows, (int)cols, (MPI_Aint)ld, MPI_BYTE, &vec);
    if (rc != MPI_SUCCESS) return rc;
    types[nb] = vec;
    lens[nb] = 1;
    displs[nb++] = (MPI_Aint)(ld - j);
  }
  if (tail) {
    lens[nb] = (int)tail;
    displs[nb++] = (MPI_Aint)(ld - j + rows * ld);
  }
  rc = MPI_Type_create_struct(nb, lens, displs, types, out);
  if (vec != MPI_DATATYPE_NULL) MPI_Type_free(&vec);
  if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(out)) != MPI_SUCCESS) MPI_Type_free(out);
  return rc;
}

/* Called before MPI_Finalize. */
void pd_mpi_free_ops(void) {
  pthread_mutex_lock(&g_ops_lock);
  if (g_user_ops_made)
    for (int d = 0; d < 2; d++)
      for (int o = 0; o < 4; o++) MPI_Op_free(&g_user_ops[d][o]);
  g_user_ops_made = 0;
  pthread_mutex_unlock(&g_ops_lock);
}

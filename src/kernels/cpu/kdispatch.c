/* Forwards each kernel of kernels.def to its copy for the CPU variant
 * chosen at start-up (kvariant.c): one load and an indirect call. */
#ifndef PADDLEC_NATIVE
#include "kvariant.h"

#include "attention.h"
#include "comm_reduce.h"
#include "gemm.h"
#include "loss.h"
#include "norm.h"
#include "reduce.h"
#include "softmax.h"

#define PD_KERNEL_HELPER(name)

/* The copies: name_baseline, name_avx2, name_avx512. */
#define PD_KERNEL(ret, name, params, args) \
  extern __typeof__(name) name##_baseline, name##_avx2, name##_avx512;
#define PD_KERNEL_VOID(name, params, args) PD_KERNEL(void, name, params, args)
#include "kernels.def"
#undef PD_KERNEL

typedef struct pd_ktable {
#define PD_KERNEL(ret, name, params, args) __typeof__(name) *name;
#include "kernels.def"
#undef PD_KERNEL
} pd_ktable;

#define PD_KERNEL(ret, name, params, args) .name = name##_baseline,
static const pd_ktable k_baseline = {
#include "kernels.def"
};
#undef PD_KERNEL
#define PD_KERNEL(ret, name, params, args) .name = name##_avx2,
static const pd_ktable k_avx2 = {
#include "kernels.def"
};
#undef PD_KERNEL
#define PD_KERNEL(ret, name, params, args) .name = name##_avx512,
static const pd_ktable k_avx512 = {
#include "kernels.def"
};
#undef PD_KERNEL
#undef PD_KERNEL_VOID

static const pd_ktable *k_active = &k_baseline;

void pd_kdispatch_use(pd_kvariant v) {
  k_active = v == PD_KV_AVX512 ? &k_avx512 : v == PD_KV_AVX2 ? &k_avx2 : &k_baseline;
}

#define PD_KERNEL(ret, name, params, args) \
  ret name params { return k_active->name args; }
#define PD_KERNEL_VOID(name, params, args) \
  void name params { k_active->name args; }
#include "kernels.def"
#endif

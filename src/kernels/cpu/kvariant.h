/* CPU variants of the hot kernels (docs/cpu.md). The library targets
 * baseline x86-64; the hot kernels also come compiled for AVX2+FMA and for
 * AVX-512, and one variant is chosen at start-up from cpuid (or
 * PADDLEC_CPU). Two mechanisms carry the variants:
 *  - the files of kernels.def are compiled once per variant with the
 *    variant's -m flags and their symbols suffixed (_baseline, _avx2,
 *    _avx512); kdispatch.c forwards each call through the chosen table;
 *  - the 1-D elementwise loops (PD_EW_* and the optimizer
 *    rules), which live in many op files, are copied at function level by
 *    PD_KCLONES with GCC target attributes and pick their copy by
 *    pd_kvariant_level (a load and an indirect jump through a table of the
 *    copies per run of elements).
 * A build with PADDLEC_NATIVE has one copy of everything, for the build
 * machine. */
#ifndef PADDLEC_KERNELS_KVARIANT_H
#define PADDLEC_KERNELS_KVARIANT_H

typedef enum pd_kvariant {
  PD_KV_BASELINE = 0,
  PD_KV_AVX2 = 1,   /* AVX2, FMA, F16C */
  PD_KV_AVX512 = 2, /* the AVX2 set with AVX-512 F, VL, BW, DQ; 256-bit vectors preferred */
  PD_KV_COUNT
} pd_kvariant;

/* The variant in use; written only while choosing one. */
extern int pd_kvariant_level;

/* The best variant this CPU (and its OS) supports. */
pd_kvariant pd_kvariant_best(void);
/* "baseline", "avx2", "avx512". */
const char *pd_kvariant_name(pd_kvariant v);
/* The variant PADDLEC_CPU=env asks for (NULL or "": the best one); a name
 * it does not know or a variant the CPU lacks is reported on stderr and
 * gives the best one. */
pd_kvariant pd_kvariant_choose(const char *env);
/* Switches every hot kernel to variant v; returns 0, or -1 (nothing
 * changes) when the CPU lacks it or the build has no variants
 * (PADDLEC_NATIVE). For tests that compare the variants in one process:
 * not to be called while other threads run kernels. */
int pd_kvariant_select(pd_kvariant v);
/* Points kdispatch.c's table at variant v (called by pd_kvariant_select). */
void pd_kdispatch_use(pd_kvariant v);

/* Function-level copies of a 1-D loop: NAME##_body is an always-inline
 * function with parameters PARAMS; PD_KCLONES defines `static void NAME
 * PARAMS` running the body compiled for the variant in use. Inlined
 * callees of the body (vmath.h's) are compiled into each copy. */
#define PD_KTARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define PD_KTARGET_AVX512 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=256")))
#if defined(PADDLEC_NATIVE) || defined(PD_KVARIANT)
#define PD_KCLONES(NAME, PARAMS, ARGS) \
  static void NAME PARAMS { NAME##_body ARGS; }
#else
#define PD_KCLONES(NAME, PARAMS, ARGS)                                                              \
  static void NAME##_baseline PARAMS { NAME##_body ARGS; }                                          \
  PD_KTARGET_AVX2 static void NAME##_avx2 PARAMS { NAME##_body ARGS; }                              \
  PD_KTARGET_AVX512 static void NAME##_avx512 PARAMS { NAME##_body ARGS; }                          \
  static void NAME PARAMS {                                                                         \
    static void(*const copies[PD_KV_COUNT]) PARAMS = {NAME##_baseline, NAME##_avx2, NAME##_avx512}; \
    copies[pd_kvariant_level] ARGS;                                                                 \
  }
#endif

#endif

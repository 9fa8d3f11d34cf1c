/* Chooses the CPU variant of the hot kernels once, at load time: the best
 * one cpuid reports, or the one PADDLEC_CPU names (see kvariant.h and
 * docs/cpu.md). */
#include "kvariant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/core.h"

int pd_kvariant_level = PD_KV_BASELINE;

static const char *const k_names[PD_KV_COUNT] = {"baseline", "avx2", "avx512"};

const char *pd_kvariant_name(pd_kvariant v) { return v >= 0 && v < PD_KV_COUNT ? k_names[v] : "unknown"; }

pd_kvariant pd_kvariant_best(void) {
  __builtin_cpu_init(); /* may run before libgcc's own constructor */
  /* __builtin_cpu_supports also checks that the OS saves the vector state. */
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
    return PD_KV_BASELINE;
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")))
    return PD_KV_AVX2;
  return PD_KV_AVX512;
}

pd_kvariant pd_kvariant_choose(const char *env) {
  pd_kvariant best = pd_kvariant_best();
  if (!env || !*env) return best;
  for (int i = 0; i < PD_KV_COUNT; i++) {
    if (strcmp(env, k_names[i]) != 0) continue;
    if (i <= (int)best) return (pd_kvariant)i;
    fprintf(stderr, "paddlec: PADDLEC_CPU=%s: this CPU lacks it; using %s\n", env, k_names[best]);
    return best;
  }
  fprintf(stderr, "paddlec: PADDLEC_CPU=%s is not one of baseline, avx2, avx512; using %s\n", env,
          k_names[best]);
  return best;
}

#ifdef PADDLEC_NATIVE
int pd_kvariant_select(pd_kvariant v) {
  (void)v;
  return -1;
}

const char *pd_cpu_variant(void) { return "native"; }

__attribute__((constructor)) static void choose_variant(void) {
  const char *env = getenv("PADDLEC_CPU");
  if (env && *env && strcmp(env, "native") != 0)
    fprintf(stderr,
            "paddlec: PADDLEC_CPU=%s ignored: this build is tuned for its build machine (PADDLEC_NATIVE)\n",
            env);
}
#else
int pd_kvariant_select(pd_kvariant v) {
  if (v < 0 || v >= PD_KV_COUNT || v > pd_kvariant_best()) return -1;
  pd_kdispatch_use(v);
  pd_kvariant_level = (int)v;
  return 0;
}

const char *pd_cpu_variant(void) { return k_names[pd_kvariant_level]; }

/* Runs once when the library is loaded; until then (a constructor of the
 * program that runs earlier) every kernel runs its baseline copy, which is
 * correct on any x86-64. */
__attribute__((constructor)) static void choose_variant(void) {
  pd_kvariant_select(pd_kvariant_choose(getenv("PADDLEC_CPU")));
}
#endif

/* Branch-free float32 math that GCC vectorises inside `omp simd` loops
 * (libm calls are scalar), plus the 1-D generators the elementwise and
 * activation kernels use. Selects are written as bit masks: under the
 * default -ftrapping-math GCC will not if-convert a float ?: whose result
 * feeds more arithmetic, which leaves the whole loop scalar.
 * Accuracy: pd_vexpf within 2 ulp of exp over its whole range (denormal
 * results included), pd_vtanhf within 3 ulp. */
#ifndef PADDLEC_KERNELS_VMATH_H
#define PADDLEC_KERNELS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "elementwise.h"

/* c ? a : b without a branch. */
PD_VINLINE float pd_self(int c, float a, float b) {
  uint32_t ua, ub, m = 0u - (uint32_t)(c != 0);
  memcpy(&ua, &a, 4);
  memcpy(&ub, &b, 4);
  uint32_t r = (ua & m) | (ub & ~m);
  float f;
  memcpy(&f, &r, 4);
  return f;
}
PD_VINLINE double pd_seld(int c, double a, double b) {
  uint64_t ua, ub, m = 0u - (uint64_t)(c != 0);
  memcpy(&ua, &a, 8);
  memcpy(&ub, &b, 8);
  uint64_t r = (ua & m) | (ub & ~m);
  double f;
  memcpy(&f, &r, 8);
  return f;
}

/* 2^n for n in [-126, 127]. */
PD_VINLINE float pd_pow2if(int32_t n) {
  uint32_t b = (uint32_t)(n + 127) << 23;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

/* e^(hi + lo) for hi + lo in [-104, 89] (no range checks): Cody-Waite
 * reduction hi + lo = n ln2 + r, |r| <= ln2/2, with lo added after the exact
 * hi - n ln2_hi so a two-part argument keeps its accuracy; a degree-6
 * polynomial for e^r; 2^n applied in two halves so that results down to the
 * denormals and up to overflow come out right. */
/* p(r) of e^r = 1 + r + r^2 p(r) on |r| <= ln2/2. */
PD_VINLINE float pd_vexpf_poly(float r) {
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  return p * r + 5.0000001201e-1f;
}
PD_VINLINE float pd_vexpf_core(float hi, float lo) {
  float nf = ((hi + lo) * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  float r = (hi - nf * 0.693359375f) + (lo - nf * -2.12194440e-4f);
  float y = pd_vexpf_poly(r) * r * r + r + 1.0f;
  int32_t n = (int32_t)nf, n1 = n / 2;
  return y * pd_pow2if(n1) * pd_pow2if(n - n1);
}

/* exp(x) for every x (inf, NaN, overflow and underflow included). */
PD_VINLINE float pd_vexpf(float x) {
  float xc = pd_self(x > 89.0f, 89.0f, x);
  xc = pd_self(xc < -104.0f, -104.0f, xc);
  xc = pd_self(x == x, xc, 0.0f);
  return pd_self(x == x, pd_vexpf_core(xc, 0.0f), x);
}

/* e^x for x <= 0, the shifted scores of a softmax: pd_vexpf's reduction and
 * polynomial with 2^n applied at once, so about two thirds of its work. x
 * below -87.3 (where e^x leaves the normal floats; -inf included) gives 0,
 * NaN stays NaN; x above 88 is out of its range. */
PD_VINLINE float pd_vexpf_nonpos(float x) {
  int in = x >= -87.3f; /* false for NaN and -inf */
  float xc = pd_self(in, x, -87.3f);
  float nf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  float r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
  float y = pd_vexpf_poly(r) * r * r + r + 1.0f;
  return pd_self(in, y * pd_pow2if((int32_t)nf), pd_self(x == x, 0.0f, x));
}

/* Phi(x) = P(N(0,1) <= x) = erfc(-x / sqrt 2) / 2, with relative accuracy in
 * both tails (about 4e-7). erfc(z), z = |x| / sqrt 2, is t e^(-z^2 + q(t)),
 * t = 1 / (1 + z/2), q a degree-9 Chebyshev fit (Press et al.); -z^2 = -x^2/2
 * is split exactly (x truncated to 12 bits squares without rounding) and fed
 * to the exponential as a two-part argument. NaN passes through. */
PD_VINLINE float pd_vnormcdff(float x) {
  float ax = pd_self(x == x, fabsf(x), 0.0f); /* NaN is restored at the end */
  ax = pd_self(ax > 14.0f, 14.0f, ax);        /* erfc(14 / sqrt 2) is below the denormals */
  float t = 1.0f / (1.0f + 0.5f * (float)M_SQRT1_2 * ax);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  q = q * t - 1.26551223f;
  uint32_t b;
  memcpy(&b, &ax, 4);
  b &= 0xfffff000u;
  float xh;
  memcpy(&xh, &b, 4);
  float hi = -0.5f * (xh * xh), lo = q - 0.5f * ((ax - xh) * (ax + xh));
  float e = 0.5f * t * pd_vexpf_core(hi, lo);
  e = pd_self(ax >= 14.0f, 0.0f, e);
  return pd_self(x == x, pd_self(x < 0.0f, e, 1.0f - e), x);
}

/* tanh(x): an odd polynomial for |x| < 0.625, 1 - 2 / (e^{2|x|} + 1) above. */
PD_VINLINE float pd_vtanhf(float x) {
  float z = x * x;
  float ps =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
       3.33332819422e-1f) *
          z * x +
      x;
  float ax = fabsf(x);
  float e = pd_vexpf(2.0f * ax);
  float pl = 1.0f - 2.0f / (e + 1.0f);
  pl = copysignf(pl, x);
  return pd_self(ax < 0.625f, ps, pl);
}

/* 1 / (1 + e^-x): stable at both ends (e^-x overflowing to inf gives 0). */
PD_VINLINE float pd_vsigmoidf(float x) { return 1.0f / (1.0f + pd_vexpf(-x)); }
PD_VINLINE double pd_sigmoidd(double x) { return 1.0 / (1.0 + exp(-x)); }

#endif

/* 1-D elementwise loss functions for the strided driver (see loss.h). */
#include <math.h>

#include "loss.h"
#include "vmath.h"

#define ABS(v) ((v) < 0 ? -(v) : (v))

#define GEN(sfx, T, LOG, LOG1P, EXP)                                                                    \
  PD_EW_BINARY(mse_##sfx, T, T, (x - y) * (x - y))                                                      \
  PD_EW_BINARY(l1_##sfx, T, T, ABS(x - y))                                                              \
  PD_EW_BINARY(                                                                                         \
      huber_##sfx, T, T,                                                                                \
      ABS(y - x) <= (T)P[0] ? (T)0.5 * (y - x) * (y - x) : (T)P[0] * (ABS(y - x) - (T)0.5 * (T)P[0]))   \
  PD_EW_BINARY(bce_##sfx, T, T,                                                                         \
               (y - (T)1) * (LOG((T)1 - x) > (T)-100 ? LOG((T)1 - x) : (T)-100) -                       \
                   y * (LOG(x) > (T)-100 ? LOG(x) : (T)-100))                                           \
  PD_EW_BINARY(sce_##sfx, T, T,                                                                         \
               (y > (T)-101 && y <= (T)-100) ? (T)0 : (x > 0 ? x : (T)0) - x * y + LOG1P(EXP(-ABS(x)))) \
  PD_EW_BINARY(kldiv_##sfx, T, T, y > 0 ? y * (LOG(y) - x) : (T)0)                                      \
  PD_EW_BINARY(kldiv_log_##sfx, T, T, EXP(y) * (y - x))                                                 \
  PD_EW_TERNARY(margin_##sfx, T, T, (z * (y - x) + (T)P[0]) > 0 ? z * (y - x) + (T)P[0] : (T)0)

GEN(f32, float, logf, log1pf, pd_vexpf)
GEN(f64, double, log, log1p, exp)
#undef GEN

#define TABLE(prefix) \
  { [PD_FLOAT32] = prefix##_f32, [PD_FLOAT64] = prefix##_f64 }
const pd_ew_fn pdk_mse_loss[PD_NUM_DTYPES] = TABLE(mse);
const pd_ew_fn pdk_l1_loss[PD_NUM_DTYPES] = TABLE(l1);
const pd_ew_fn pdk_huber_loss[PD_NUM_DTYPES] = TABLE(huber);
const pd_ew_fn pdk_bce_loss[PD_NUM_DTYPES] = TABLE(bce);
const pd_ew_fn pdk_sigmoid_ce_loss[PD_NUM_DTYPES] = TABLE(sce);
const pd_ew_fn pdk_kldiv_loss[PD_NUM_DTYPES] = TABLE(kldiv);
const pd_ew_fn pdk_kldiv_log_loss[PD_NUM_DTYPES] = TABLE(kldiv_log);
const pd_ew_fn pdk_margin_ranking_loss[PD_NUM_DTYPES] = TABLE(margin);

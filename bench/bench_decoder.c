/* Training step time of the seed 003 decoder (examples/decoder_model.c) at
 * hidden 256, 4 heads, intermediate 688, 2 layers, vocab 1000, seq 128,
 * batch 4: forward + backward + AdamW, against the machine's GEMM peak
 * measured in the same run (dnnl_sgemm at 1024^3).
 *
 * Achieved GFLOP/s counts the matmul FLOPs of the forward pass (projections,
 * q k^T and p v over the full seq x seq, lm head) times 3 for forward +
 * backward, divided by the step time. Target: >= 50% of the sgemm peak.
 * The peak is measured before and after the decoder (the better of the two
 * counts), so a busy machine lowers both numbers alike. */
#include <oneapi/dnnl/dnnl.h>
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "decoder_model.h"
#include "timing.h"

static void check(bool ok) {
  if (!ok) {
    fprintf(stderr, "bench_decoder: %s\n", pd_last_error());
    exit(1);
  }
}

/* The fastest of `reps` blocks of `steps` training steps, per step. */
static double time_steps(pd_layer *model, pd_optimizer *opt, pd_tensor *ids, pd_tensor *labels, int steps,
                         int reps, double *last_loss) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now_s();
    for (int s = 0; s < steps; s++) {
      pd_scope_begin();
      pd_tensor *loss = NULL;
      check(pd_layer_call(model, (pd_tensor *[]){ids, labels}, 2, &loss, 1) == 1);
      check(pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(opt) == PD_OK);
      pd_optimizer_clear_grad(opt, true);
      *last_loss = pd_tensor_item(loss);
      pd_scope_end();
    }
    double t = (bench_now_s() - t0) / steps;
    if (t < best) best = t;
  }
  return best;
}

int main(void) {
  double peak = bench_sgemm_peak(10);
  printf("machine: dnnl_sgemm 1024^3 = %.1f GFLOP/s (the peak reference), %d threads\n\n", peak,
         pd_get_num_threads());

  const int64_t B = 4, S = 128;
  const decoder_config cfg = {.vocab_size = 1000,
                              .hidden_size = 256,
                              .num_heads = 4,
                              .intermediate_size = 688,
                              .num_layers = 2,
                              .max_seq_len = S};
  pd_seed(1);
  pd_layer *model = decoder_model_new(&cfg);
  check(model != NULL);
  pd_named_tensors ps;
  check(pd_layer_parameters(model, &ps) == PD_OK);
  pd_optimizer *opt = pd_optimizer_adam_w(1e-4, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  check(opt != NULL);
  pd_tensor *ids = pd_randint(0, cfg.vocab_size, 2, (int64_t[]){B, S}, PD_INT64);
  pd_tensor *labels = pd_randint(0, cfg.vocab_size, 2, (int64_t[]){B, S}, PD_INT64);
  check(ids && labels);

  double loss = 0.0;
  time_steps(model, opt, ids, labels, 3, 1, &loss); /* warm up pools and primitives */
  double t = time_steps(model, opt, ids, labels, 10, 5, &loss);
  double peak_after = bench_sgemm_peak(10);
  if (peak_after > peak) peak = peak_after;
  printf("dnnl_sgemm 1024^3 after the decoder: %.1f GFLOP/s; peak used: %.1f GFLOP/s\n", peak_after, peak);
  double flops = 3.0 * decoder_forward_flops(&cfg, B, S);
  double gf = flops / t / 1e9;
  printf(
      "(c) decoder step (hidden 256, 4 heads, inter 688, 2 layers, vocab 1000, seq 128, batch 4, AdamW):\n");
  printf(
      "    %.2f ms/step, %.3f GFLOP/step (3 x forward matmuls), %.1f GFLOP/s = %.0f%% of peak "
      "(target >= 50%%: %s); loss %.4f\n",
      t * 1e3, flops / 1e9, gf, 100 * gf / peak, gf >= 0.5 * peak ? "met" : "NOT met", loss);

  pd_tensor_release(ids), pd_tensor_release(labels);
  pd_optimizer_release(opt);
  pd_layer_release(model);
  return 0;
}

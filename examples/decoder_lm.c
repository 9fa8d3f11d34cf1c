/* A character-level language model: the seed 003 decoder (decoder_model.c:
 * embedding, RMSNorm, rotary q/k, causal attention, SwiGLU MLP, lm head,
 * cross entropy with ignore_index) trained with AdamW on a text file (by
 * default the GPL-3 text of /usr/share/common-licenses).
 *
 * The vocabulary is the set of distinct bytes of the text. Each step draws
 * `batch` random windows of seq_len + 1 bytes: the first seq_len are the
 * input ids, the last seq_len the labels (the next characters). The program
 * prints the loss every --log-every steps and compares the final loss (mean
 * of the last 10 steps) with the text's unigram entropy H = -sum p log p (in
 * nats, from the character frequencies): it exits with status 1 unless
 * final <= --max-ratio * H (default 0.75).
 *
 * Options: --text FILE --steps N --batch B --seq S --hidden H --heads N
 *          --layers L --intermediate I --lr LR --log-every K --max-ratio R */
#include <math.h>
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decoder_model.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      unsigned char *grown = realloc(buf, cap *= 2);
      if (!grown) free(buf);
      buf = grown;
    }
  }
  fclose(f);
  *size = n;
  return buf;
}

/* splitmix64: the window positions, reproducible on every platform */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int main(int argc, char **argv) {
  const char *text_path = "/usr/share/common-licenses/GPL-3";
  int steps = 300, log_every = 25;
  int64_t batch = 16, seq = 64;
  double lr = 3e-3, max_ratio = 0.75;
  decoder_config cfg = {.hidden_size = 64, .num_heads = 2, .intermediate_size = 176, .num_layers = 2};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) goto usage;
    if (!strcmp(a, "--text"))
      text_path = v;
    else if (!strcmp(a, "--steps"))
      steps = atoi(v);
    else if (!strcmp(a, "--batch"))
      batch = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--seq"))
      seq = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--hidden"))
      cfg.hidden_size = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--heads"))
      cfg.num_heads = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--layers"))
      cfg.num_layers = atoi(v);
    else if (!strcmp(a, "--intermediate"))
      cfg.intermediate_size = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--lr"))
      lr = strtod(v, NULL);
    else if (!strcmp(a, "--log-every"))
      log_every = atoi(v);
    else if (!strcmp(a, "--max-ratio"))
      max_ratio = strtod(v, NULL);
    else
      goto usage;
    i++;
  }
  if (steps < 10 || batch <= 0 || seq <= 0 || log_every <= 0 || cfg.num_heads <= 0 || cfg.num_layers <= 0)
    goto usage;

  size_t n_text = 0;
  unsigned char *text = read_file(text_path, &n_text);
  if (!text || n_text < (size_t)seq + 2) {
    fprintf(stderr, "decoder_lm: cannot read at least %lld bytes from %s\n", (long long)seq + 2, text_path);
    free(text);
    return 1;
  }
  /* vocabulary: the distinct bytes, in byte order; unigram entropy in nats */
  int64_t id_of[256], count[256] = {0};
  for (size_t i = 0; i < n_text; i++) count[text[i]]++;
  double entropy = 0.0;
  cfg.vocab_size = 0;
  for (int c = 0; c < 256; c++) {
    id_of[c] = count[c] ? cfg.vocab_size++ : -1;
    if (count[c]) {
      double p = (double)count[c] / (double)n_text;
      entropy -= p * log(p);
    }
  }
  cfg.max_seq_len = seq;
  printf("decoder_lm: %s, %zu bytes, vocab %lld, unigram entropy %.4f nats\n", text_path, n_text,
         (long long)cfg.vocab_size, entropy);
  printf(
      "model: hidden %lld, %lld heads, %d layers, intermediate %lld; batch %lld x seq %lld, AdamW lr %g, "
      "%d steps, %d thread(s)\n",
      (long long)cfg.hidden_size, (long long)cfg.num_heads, cfg.num_layers, (long long)cfg.intermediate_size,
      (long long)batch, (long long)seq, lr, steps, pd_get_num_threads());

  pd_seed(3);
  pd_layer *model = decoder_model_new(&cfg);
  pd_named_tensors params;
  if (!model || pd_layer_parameters(model, &params) != PD_OK) goto fail;
  pd_optimizer *opt = pd_optimizer_adam_w(lr, params.tensors, params.n, NULL);
  pd_named_tensors_free(&params);
  if (!opt) goto fail;

  int64_t *ids = malloc((size_t)(batch * seq) * sizeof *ids),
          *labels = malloc((size_t)(batch * seq) * sizeof *labels);
  const int n_last = 10;
  double last_sum = 0.0, t0 = now_s();
  uint64_t rng = 12345;
  for (int step = 0; step < steps; step++) {
    for (int64_t b = 0; b < batch; b++) {
      size_t start = (size_t)(next_u64(&rng) % (uint64_t)(n_text - (size_t)seq));
      for (int64_t t = 0; t < seq; t++) {
        ids[b * seq + t] = id_of[text[start + (size_t)t]];
        labels[b * seq + t] = id_of[text[start + (size_t)t + 1]];
      }
    }
    pd_scope_begin();
    const int64_t shape[] = {batch, seq};
    pd_tensor *in[2] = {pd_to_tensor(ids, PD_INT64, 2, shape), pd_to_tensor(labels, PD_INT64, 2, shape)};
    pd_tensor *loss = NULL;
    if (!in[0] || !in[1] || pd_layer_call(model, in, 2, &loss, 1) != 1) goto fail;
    if (pd_backward(loss, NULL, false) != PD_OK || pd_optimizer_step(opt) != PD_OK) goto fail;
    pd_optimizer_clear_grad(opt, true);
    double l = pd_tensor_item(loss);
    pd_scope_end();
    if (!isfinite(l)) {
      fprintf(stderr, "decoder_lm: loss is %g at step %d\n", l, step);
      goto fail_quiet;
    }
    if (step >= steps - n_last) last_sum += l;
    if (step % log_every == 0 || step == steps - 1) {
      printf("step %4d  loss %.4f  (%.1f s)\n", step, l, now_s() - t0);
      fflush(stdout);
    }
  }
  double final_loss = last_sum / n_last;
  bool ok = final_loss <= max_ratio * entropy;
  printf(
      "final loss %.4f (mean of the last %d steps) vs unigram entropy %.4f: ratio %.3f, %s the limit %.2f; "
      "%.1f s\n",
      final_loss, n_last, entropy, final_loss / entropy, ok ? "within" : "ABOVE", max_ratio, now_s() - t0);
  free(ids), free(labels), free(text);
  pd_optimizer_release(opt);
  pd_layer_release(model);
  if (!ok) {
    fprintf(stderr, "decoder_lm: final loss %.4f is above %.2f x unigram entropy %.4f\n", final_loss,
            max_ratio, entropy);
    return 1;
  }
  return 0;
fail:
  fprintf(stderr, "decoder_lm: %s\n", pd_last_error());
fail_quiet:
  return 1;
usage:
  fprintf(stderr,
          "usage: %s [--text FILE] [--steps N] [--batch B] [--seq S] [--hidden H] [--heads N] [--layers L] "
          "[--intermediate I] [--lr LR] [--log-every K] [--max-ratio R]\n",
          argv[0]);
  return 2;
}

/* A main for the fuzz targets of this folder when they are built without
 * libFuzzer (any compiler): it calls LLVMFuzzerTestOneInput on every seed
 * file, on every truncation of the small ones, then on -runs= deterministic
 * mutations of them. Everything follows from -seed=, so a failure
 * reproduces: the message names the iteration, and -only=I runs just that
 * one (-count=K: K from there) with the same seed files and flags. Built
 * into <target>_standalone and run by ctest (tests/fuzz/CMakeLists.txt);
 * most useful in the sanitizer build.
 *
 *   fuzz_npy_standalone [-runs=N] [-seed=S] [-only=I [-count=K]] [-max_len=B]
 *                       [-artifact_prefix=P] FILE_OR_DIR...
 *
 * Iterations are numbered: first each seed as it is, then each truncation
 * (every length below the size of a seed of at most 2048 bytes), then the
 * mutations. A mutation applies one to four of: bit flips, bytes set to
 * boundary values, a truncation, an inserted run, a deleted run, a
 * duplicated block, a splice with another seed, a 1/2/4/8-byte length field
 * (little or big endian, near the start or the end of the input where the
 * formats keep theirs) set to a huge or off-by-one value, and a run of
 * ASCII digits (a JSON or Python shape) replaced by a huge number (half the
 * time keeping the input's size by taking blanks out of the padding after
 * it, as text headers padded to a length need).
 *
 * A target reports a bad input by crashing or by returning nonzero (the
 * targets here return 0 for every input they handle). Either way the input
 * is written to <artifact_prefix><target>-<iteration> (default prefix: the
 * current folder) before the process ends: from the return value, from a
 * handler of the fatal signals nobody else handles, or from the sanitizer's
 * death callback. Under LeakSanitizer leaks are checked every 4096
 * iterations and at the end; a batch that leaked is bisected, its halves
 * rerun in fresh processes (-only=I -count=K), down to the input that leaks.
 * -runs=0 replays the given files only (a saved crash input, say). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* sanitizer hooks, present only in sanitizer builds */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

typedef struct buf {
  uint8_t *p;
  size_t n;
  char *name;
} buf;

static struct {
  const char *target;
  buf *seeds;
  int n_seeds;
  uint64_t seed;
  long long runs, only, count;
  size_t max_len;
  const char *prefix;
} g = {.runs = 20000, .only = -1, .count = 1, .seed = 1, .max_len = 1 << 16, .prefix = "./"};

/* ---- the input being run, for the crash handlers ------------------------------------ */
static const uint8_t *volatile g_cur;
static volatile size_t g_cur_n;
static volatile long long g_cur_iter = -1;
static char g_crash_path[4096];
static volatile sig_atomic_t g_saved;

static void put_str(const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t k = write(2, s, n);
    if (k <= 0) return;
    s += k;
    n -= (size_t)k;
  }
}

static void put_num(long long v) {
  char b[32];
  int i = (int)sizeof b;
  b[--i] = 0;
  unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
  do b[--i] = (char)('0' + u % 10);
  while ((u /= 10) && i > 1);
  if (v < 0) b[--i] = '-';
  put_str(b + i);
}

/* Async-signal-safe: only open/write/close on prepared data. */
static void save_current(const char *why) {
  if (g_saved || g_cur_iter < 0) return;
  g_saved = 1;
  int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const uint8_t *p = g_cur;
  size_t n = g_cur_n;
  bool ok = fd >= 0;
  while (ok && n > 0) {
    ssize_t k = write(fd, p, n);
    if (k <= 0) ok = false;
    p += k > 0 ? k : 0;
    n -= k > 0 ? (size_t)k : 0;
  }
  if (fd >= 0) close(fd);
  put_str("\n");
  put_str(g.target);
  put_str(": ");
  put_str(why);
  put_str(" at iteration ");
  put_num(g_cur_iter);
  put_str(" (-seed=");
  put_num((long long)g.seed);
  put_str(" -only=");
  put_num(g_cur_iter);
  put_str("); ");
  if (ok) {
    put_str("input (");
    put_num((long long)g_cur_n);
    put_str(" bytes) written to ");
    put_str(g_crash_path);
  } else {
    put_str("could not write the input to ");
    put_str(g_crash_path);
  }
  put_str("\n");
}

static void on_death(void) { save_current("the sanitizer stopped the run"); }

static void on_signal(int sig) {
  save_current(sig == SIGABRT ? "abort" : "fatal signal");
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Handlers only where nobody (a sanitizer) installed one. */
static void install_handlers(void) {
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_death);
  const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction old;
    if (sigaction(sigs[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
      continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, NULL);
  }
}

/* UBSan ends the run with abort() (caught above, so the input is saved):
 * gcc's UBSan runtime is apart from ASan's and never calls its death
 * callback. UBSAN_OPTIONS still overrides this. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1:abort_on_error=1"; }

/* ---- seeds ---------------------------------------------------------------------------- */
static int read_file(const char *path, buf *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 4096, n = 0;
  uint8_t *p = malloc(cap);
  for (;;) {
    if (!p) break;
    if (n == cap) {
      uint8_t *q = realloc(p, cap *= 2);
      if (!q) {
        free(p);
        p = NULL;
        break;
      }
      p = q;
    }
    size_t k = fread(p + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (!p || err) {
    free(p);
    return -1;
  }
  out->p = p;
  out->n = n;
  out->name = strdup(path);
  return out->name ? 0 : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int add_seed(const char *path) {
  g.seeds = realloc(g.seeds, (size_t)(g.n_seeds + 1) * sizeof *g.seeds);
  if (!g.seeds || read_file(path, &g.seeds[g.n_seeds]) != 0) {
    fprintf(stderr, "%s: cannot read seed '%s': %s\n", g.target, path, strerror(errno));
    return -1;
  }
  g.n_seeds++;
  return 0;
}

/* A file, or the regular files of a folder in name order (readdir's order varies). */
static int add_seeds(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "%s: cannot stat '%s': %s\n", g.target, path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(sb.st_mode)) return add_seed(path);
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "%s: cannot open folder '%s': %s\n", g.target, path, strerror(errno));
    return -1;
  }
  char **names = NULL;
  int n = 0, rc = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char **nn = realloc(names, (size_t)(n + 1) * sizeof *names);
    size_t len = strlen(path) + strlen(e->d_name) + 2;
    char *full = nn ? malloc(len) : NULL;
    if (!full) {
      names = nn ? nn : names;
      rc = -1;
      break;
    }
    names = nn;
    snprintf(full, len, "%s/%s", path, e->d_name);
    names[n++] = full;
  }
  closedir(d);
  if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
  for (int i = 0; i < n; i++) {
    if (rc == 0 && stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) rc = add_seed(names[i]);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* ---- deterministic mutations ---------------------------------------------------------------- */
static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

typedef struct rng {
  uint64_t s;
} rng;
static uint64_t next(rng *r) { return mix(r->s += 0x9E3779B97F4A7C15ull); }
static size_t below(rng *r, size_t n) { return n ? (size_t)(next(r) % n) : 0; }

/* the working input: grows as needed, never past max_len */
typedef struct work {
  uint8_t *p;
  size_t n, cap;
} work;

static void reserve(work *w, size_t n) {
  if (n <= w->cap) return;
  size_t cap = w->cap ? w->cap : 256;
  while (cap < n) cap *= 2;
  uint8_t *q = realloc(w->p, cap);
  if (!q) {
    fprintf(stderr, "%s: out of memory\n", g.target);
    exit(2);
  }
  w->p = q;
  w->cap = cap;
}

static void insert_bytes(work *w, size_t at, const uint8_t *src, size_t n) {
  if (w->n + n > g.max_len) n = g.max_len - w->n;
  if (n == 0) return;
  reserve(w, w->n + n);
  memmove(w->p + at + n, w->p + at, w->n - at);
  if (src)
    memcpy(w->p + at, src, n);
  else
    memset(w->p + at, 0, n);
  w->n += n;
}

static void erase_bytes(work *w, size_t at, size_t n) {
  if (at >= w->n) return;
  if (n > w->n - at) n = w->n - at;
  memmove(w->p + at, w->p + at + n, w->n - at - n);
  w->n -= n;
}

static const uint64_t k_huge[] = {0,
                                  1,
                                  7,
                                  8,
                                  0x7f,
                                  0x80,
                                  0xff,
                                  0x7fff,
                                  0xffff,
                                  0x10000,
                                  0x7fffffff,
                                  0x80000000,
                                  0xffffffff,
                                  100000000,
                                  100000001,
                                  0x100000000ull,
                                  0x7fffffffffffffffull,
                                  0x8000000000000000ull,
                                  0xffffffffffffffffull,
                                  0xfffffffffffffff8ull};

static const char *const k_numbers[] = {
    "0",
    "1",
    "-1",
    "2147483648",
    "3037000500", /* squared: just past 2^63 */
    "4294967295",
    "4294967296",
    "4611686018427387904",
    "9007199254740992",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999",
    "1e308",
    "1.5",
    "-0",
};

static const uint8_t k_bytes[] = {0,   1,   0x7f, 0x80, 0xff, '0', '9',  '{', '}', '[', ']',  '(',
                                  ')', ',', ':',  '"',  '\'', ' ', '\\', 'L', 'e', '-', 0x20, 0xc3};

/* A length field: `width` bytes at `at` set to a boundary value of the input's size or of the widths. */
static void set_field(work *w, rng *r) {
  static const int widths[] = {1, 2, 4, 8};
  int width = widths[below(r, 4)];
  if (w->n < (size_t)width) return;
  size_t at;
  switch (below(r, 4)) {
    case 0: /* where safetensors, npy and idx keep their lengths */
      at = (size_t[]){0, 4, 8, 8, 12}[below(r, 5)];
      break;
    case 1: /* a zip end record and its neighbours */
      at = w->n >= 64 ? w->n - 64 + below(r, 64) : below(r, w->n);
      break;
    default:
      at = below(r, w->n);
  }
  if (at + (size_t)width > w->n) at = w->n - (size_t)width;
  uint64_t v;
  switch (below(r, 3)) {
    case 0:
      v = (uint64_t)w->n + (uint64_t)(int64_t)((int)below(r, 17) - 8);
      break;
    default:
      v = k_huge[below(r, sizeof k_huge / sizeof k_huge[0])];
      if (below(r, 4) == 0) v += (uint64_t)(int64_t)((int)below(r, 3) - 1);
  }
  bool big = below(r, 3) == 0;
  for (int i = 0; i < width; i++) {
    int shift = 8 * (big ? width - 1 - i : i);
    w->p[at + (size_t)i] = (uint8_t)(v >> shift);
  }
}

/* Replaces a run of ASCII digits (a shape, an offset) by a huge or odd number. */
static void set_number(work *w, rng *r) {
  size_t n_runs = 0;
  for (size_t i = 0; i < w->n; i++)
    if (w->p[i] >= '0' && w->p[i] <= '9' && (i == 0 || w->p[i - 1] < '0' || w->p[i - 1] > '9')) n_runs++;
  if (n_runs == 0) return;
  size_t pick = below(r, n_runs), start = 0, k = 0;
  for (size_t i = 0; i < w->n; i++)
    if (w->p[i] >= '0' && w->p[i] <= '9' && (i == 0 || w->p[i - 1] < '0' || w->p[i - 1] > '9') &&
        k++ == pick) {
      start = i;
      break;
    }
  size_t end = start;
  while (end < w->n && w->p[end] >= '0' && w->p[end] <= '9') end++;
  const char *s = k_numbers[below(r, sizeof k_numbers / sizeof k_numbers[0])];
  size_t old_len = end - start, new_len = strlen(s);
  erase_bytes(w, start, old_len);
  insert_bytes(w, start, (const uint8_t *)s, new_len);
  if (below(r, 2)) return;
  /* Half the time the size stays: the formats pad their text headers with
   * blanks, so take the difference out of (or put it into) the next run of
   * blanks; otherwise the header length no longer matches and the loader
   * stops there. */
  size_t after = start + new_len;
  if (new_len < old_len) {
    size_t n = old_len - new_len;
    if (w->n + n <= g.max_len) {
      insert_bytes(w, after, NULL, n);
      memset(w->p + after, ' ', n);
    }
  } else if (new_len > old_len) {
    size_t n = new_len - old_len, run = 0, i = after;
    for (; i < w->n && run < n; i++) run = w->p[i] == ' ' ? run + 1 : 0;
    if (run == n) erase_bytes(w, i - n, n);
  }
}

static void mutate_once(work *w, rng *r) {
  switch (below(r, 12)) {
    case 0:
    case 1: /* flip bits */
      for (size_t k = 1 + below(r, 4); k > 0 && w->n; k--)
        w->p[below(r, w->n)] ^= (uint8_t)(1u << below(r, 8));
      break;
    case 2: /* a byte set to a boundary or a syntax character */
      if (w->n) w->p[below(r, w->n)] = k_bytes[below(r, sizeof k_bytes)];
      break;
    case 3: /* truncate */
      if (w->n) w->n = below(r, w->n);
      break;
    case 4: { /* insert a run: random bytes or one byte repeated */
      size_t len = 1 + below(r, below(r, 4) == 0 ? 1024 : 16), at = below(r, w->n + 1);
      size_t before = w->n;
      insert_bytes(w, at, NULL, len);
      len = w->n - before;
      uint8_t fill = (uint8_t)next(r);
      bool same = below(r, 2) == 0;
      for (size_t i = 0; i < len; i++) w->p[at + i] = same ? fill : (uint8_t)next(r);
      break;
    }
    case 5: /* delete a run */
      if (w->n) erase_bytes(w, below(r, w->n), 1 + below(r, below(r, 4) == 0 ? w->n : 16));
      break;
    case 6: { /* duplicate a block */
      if (!w->n) break;
      size_t from = below(r, w->n), len = 1 + below(r, w->n - from < 256 ? w->n - from : 256);
      uint8_t tmp[256];
      memcpy(tmp, w->p + from, len);
      insert_bytes(w, below(r, w->n + 1), tmp, len);
      break;
    }
    case 7: { /* splice: the head of this input, the tail of another seed */
      const buf *o = &g.seeds[below(r, (size_t)g.n_seeds)];
      size_t keep = below(r, w->n + 1), from = below(r, o->n + 1);
      w->n = keep;
      insert_bytes(w, keep, o->p + from, o->n - from);
      break;
    }
    case 8:
    case 9:
      set_field(w, r);
      break;
    default:
      set_number(w, r);
  }
}

/* ---- running ---------------------------------------------------------------------------------- */
typedef struct plan {
  long long n_trunc, total;
} plan;

static int is_small(const buf *b) { return b->n <= 2048; }

static plan make_plan(void) {
  plan p = {0, g.n_seeds};
  if (g.runs == 0) return p;
  for (int i = 0; i < g.n_seeds; i++)
    if (is_small(&g.seeds[i])) p.n_trunc += (long long)g.seeds[i].n;
  p.total = g.n_seeds + p.n_trunc + g.runs;
  return p;
}

/* The input of iteration `it` into w. */
static void build_input(const plan *pl, long long it, work *w) {
  w->n = 0;
  if (it < g.n_seeds) {
    const buf *s = &g.seeds[it];
    reserve(w, s->n + 1);
    memcpy(w->p, s->p, s->n);
    w->n = s->n;
    return;
  }
  it -= g.n_seeds;
  if (it < pl->n_trunc) {
    for (int i = 0; i < g.n_seeds; i++) {
      const buf *s = &g.seeds[i];
      if (!is_small(s)) continue;
      if (it < (long long)s->n) {
        reserve(w, (size_t)it + 1);
        memcpy(w->p, s->p, (size_t)it);
        w->n = (size_t)it;
        return;
      }
      it -= (long long)s->n;
    }
  }
  it -= pl->n_trunc;
  rng r = {mix(g.seed ^ mix((uint64_t)it))};
  const buf *s = &g.seeds[it % g.n_seeds];
  reserve(w, s->n + 1);
  memcpy(w->p, s->p, s->n);
  w->n = s->n;
  for (size_t k = 1 + below(&r, 4); k > 0; k--) mutate_once(w, &r);
}

/* Runs one input; the target's result. An empty input gets a valid pointer. */
static int run_one(long long it, const work *w) {
  snprintf(g_crash_path, sizeof g_crash_path, "%s%s-%lld", g.prefix, g.target, it);
  static const uint8_t empty[1];
  g_cur = w->n ? w->p : empty;
  g_cur_n = w->n;
  g_cur_iter = it;
  int rc = LLVMFuzzerTestOneInput(w->n ? w->p : empty, w->n);
  if (rc != 0) {
    char why[64];
    snprintf(why, sizeof why, "the target returned %d", rc);
    save_current(why);
  }
  g_cur_iter = -1;
  return rc;
}

static int g_argc;
static char **g_argv;

/* Runs iterations [from, to) in a fresh process (this one's leaks would
 * show in a forked child) that checks for leaks at exit; true when it fails. */
static bool leaks_alone(long long from, long long to) {
  char **args = calloc((size_t)g_argc + 3, sizeof *args);
  char only[64], count[64];
  if (!args) return false;
  for (int i = 0; i < g_argc; i++) args[i] = g_argv[i];
  snprintf(only, sizeof only, "-only=%lld", from);
  snprintf(count, sizeof count, "-count=%lld", to - from);
  args[g_argc] = only;
  args[g_argc + 1] = count;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, 1);
      if (to - from > 1) dup2(devnull, 2); /* the report of the single input is the useful one */
    }
    execv("/proc/self/exe", args);
    _exit(127);
  }
  free(args);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* After a leak check found leaks in [from, to): halves of the range run
 * alone until one input is left that leaks by itself; it is saved. */
static void find_leak(const plan *pl, long long from, long long to, work *w) {
  fprintf(stderr, "%s: leaks after iterations %lld..%lld; bisecting to find the input\n", g.target, from,
          to - 1);
  while (to - from > 1) {
    long long mid = from + (to - from) / 2;
    if (leaks_alone(from, mid))
      to = mid;
    else
      from = mid;
  }
  if (!leaks_alone(from, to)) {
    fprintf(stderr, "%s: no single input leaks on its own (the leak needs several)\n", g.target);
    return;
  }
  build_input(pl, from, w);
  snprintf(g_crash_path, sizeof g_crash_path, "%s%s-%lld", g.prefix, g.target, from);
  g_cur = w->p;
  g_cur_n = w->n;
  g_cur_iter = from;
  save_current("a leak");
}

static int parse_flag(const char *arg, const char *name, long long *v) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0) return 0;
  char *end;
  errno = 0;
  *v = strtoll(arg + n, &end, 10);
  if (errno || *end || end == arg + n || *v < 0) {
    fprintf(stderr, "%s: bad value in '%s'\n", g.target, arg);
    exit(2);
  }
  return 1;
}

int main(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
  const char *slash = strrchr(argv[0], '/');
  g.target = slash ? slash + 1 : argv[0];
  for (int i = 1; i < argc; i++) {
    long long v;
    const char *a = argv[i];
    if (parse_flag(a, "-runs=", &v))
      g.runs = v;
    else if (parse_flag(a, "-seed=", &v))
      g.seed = (uint64_t)v;
    else if (parse_flag(a, "-only=", &v))
      g.only = v;
    else if (parse_flag(a, "-count=", &v))
      g.count = v > 0 ? v : 1;
    else if (parse_flag(a, "-max_len=", &v))
      g.max_len = v > 0 ? (size_t)v : 1;
    else if (strncmp(a, "-artifact_prefix=", 17) == 0)
      g.prefix = a + 17;
    else if (a[0] == '-') {
      fprintf(stderr,
              "usage: %s [-runs=N] [-seed=S] [-only=I [-count=K]] [-max_len=B] [-artifact_prefix=P] "
              "FILE_OR_DIR...\n",
              g.target);
      return 2;
    } else if (add_seeds(a) != 0) {
      return 2;
    }
  }
  if (g.n_seeds == 0) {
    fprintf(stderr, "%s: no seed files given\n", g.target);
    return 2;
  }
  install_handlers();
  plan pl = make_plan();
  work w = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = 0;
  bool leaked = false;
  if (g.only >= 0) {
    if (g.only >= pl.total || g.count > pl.total - g.only) {
      fprintf(stderr, "%s: -only=%lld -count=%lld, but there are %lld iterations\n", g.target, g.only,
              g.count, pl.total);
      return 2;
    }
    for (long long it = g.only; it < g.only + g.count && rc == 0; it++) {
      build_input(&pl, it, &w);
      rc = run_one(it, &w);
    }
  } else {
    long long batch_start = 0;
    for (long long it = 0; it < pl.total && rc == 0; it++) {
      build_input(&pl, it, &w);
      rc = run_one(it, &w);
      if (rc == 0 && __lsan_do_recoverable_leak_check && (it + 1 == pl.total || (it + 1) % 4096 == 0)) {
        if (__lsan_do_recoverable_leak_check()) {
          find_leak(&pl, batch_start, it + 1, &w);
          rc = 1;
          leaked = true;
        }
        batch_start = it + 1;
      }
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (rc == 0 && g.only >= 0)
    printf("%s: iterations %lld..%lld (-seed=%llu) passed\n", g.target, g.only, g.only + g.count - 1,
           (unsigned long long)g.seed);
  else if (rc == 0)
    printf("%s: %d seeds, %lld truncations, %lld mutations (-seed=%llu): all passed in %.1f s\n", g.target,
           g.n_seeds, pl.n_trunc, pl.total - g.n_seeds - pl.n_trunc, (unsigned long long)g.seed, secs);
  fflush(NULL);
  /* after a leak, skip the exit-time leak report: the one above named it */
  if (leaked) _exit(1);
  for (int i = 0; i < g.n_seeds; i++) {
    free(g.seeds[i].p);
    free(g.seeds[i].name);
  }
  free(g.seeds);
  free(w.p);
  return rc == 0 ? 0 : 1;
}

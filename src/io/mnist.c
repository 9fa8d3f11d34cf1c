/* paddle.vision.datasets.MNIST and FashionMNIST from idx files. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "io_internal.h"
#include "paddlec/creation.h"

typedef struct mnist {
  pd_tensor *images; /* uint8 [n, rows, cols] */
  pd_tensor *labels; /* uint8 [n] */
  pd_dtype dtype;
  pd_vision_transform_fn transform;
  void *transform_user;
  const char *cls;
} mnist;

static int64_t mnist_len(void *user) { return ((mnist *)user)->labels->shape[0]; }

static int mnist_get_item(void *user, int64_t index, pd_tensor **out, int max_out) {
  mnist *m = user;
  if (max_out < 2) return pd_set_error(PD_ERR_INVALID, "%s: 2 fields for room of %d", m->cls, max_out);
  if (index < 0 || index >= m->labels->shape[0])
    return pd_set_error(PD_ERR_INDEX, "%s: index %lld out of range [0, %lld)", m->cls, (long long)index,
                        (long long)m->labels->shape[0]);
  const pd_tensor *im = m->images;
  pd_tensor *row =
      pd_tensor_new_view(im, 2, im->shape + 1, im->strides + 1, im->offset + index * im->strides[0]);
  if (!row) return pd_last_status();
  pd_tensor *image = pd_clone(row, m->dtype);
  if (!image) return pd_last_status();
  int64_t label = ((const uint8_t *)pd_tensor_data(m->labels))[index];
  out[1] = pd_to_tensor(&label, PD_INT64, 1, (const int64_t[]){1});
  if (!out[1]) return pd_last_status();
  if (m->transform) {
    pd_tensor *tr = NULL;
    int k = m->transform(image, &tr, m->transform_user);
    if (k < 0) {
      char msg[2048];
      pd_io_error_copy(msg, sizeof msg);
      return pd_set_error(pd_last_status() != PD_OK ? pd_last_status() : k, "%s: transform: %s", m->cls,
                          msg[0] ? msg : "failed with no message");
    }
    if (k != 1 || !tr)
      return pd_set_error(PD_ERR_INVALID, "%s: transform returned %d with %s output (want 1 and an image)",
                          m->cls, k, tr ? "an" : "no");
    image = tr;
  }
  out[0] = image;
  return 2;
}

static void mnist_destroy(void *user) {
  mnist *m = user;
  pd_tensor_release(m->images);
  pd_tensor_release(m->labels);
  free(m);
}

/* <root>/<base>.gz, else <root>/<base> */
static char *find_file(const char *root, const char *base) {
  size_t n = strlen(root) + strlen(base) + 8;
  char *p = malloc(n);
  if (!p) return NULL;
  snprintf(p, n, "%s/%s.gz", root, base);
  if (access(p, R_OK) == 0) return p;
  snprintf(p, n, "%s/%s", root, base);
  if (access(p, R_OK) == 0) return p;
  snprintf(p, n, "%s/%s.gz", root, base); /* named in the error */
  return p;
}

static pd_tensor *load_checked(const char *cls, const char *path, int want_ndim, const char *kind,
                               uint32_t want_magic) {
  pd_tensor *t = pd_io_load_idx(path);
  if (!t) {
    char msg[2048];
    pd_io_error_copy(msg, sizeof msg);
    pd_set_error(pd_last_status(), "%s: %s", cls, msg);
    return NULL;
  }
  if (t->dtype != PD_UINT8 || t->ndim != want_ndim) {
    static const unsigned char code[PD_NUM_DTYPES] = {0, 0x08, 0x09, 0x0B, 0x0C, 0, 0, 0, 0x0D, 0x0E};
    pd_set_error(PD_ERR_IO, "%s: '%s' is not an %s file: magic number 0x%08x, want 0x%08x", cls, path, kind,
                 (unsigned)(code[t->dtype] << 8 | t->ndim), want_magic);
    pd_tensor_release(t);
    return NULL;
  }
  return t;
}

static pd_io_dataset *mnist_new(const pd_vision_datasets_mnist_opts *opts, const char *cls,
                                const char *default_root) {
  static const pd_vision_datasets_mnist_opts defaults = {0};
  const pd_vision_datasets_mnist_opts *o = opts ? opts : &defaults;
  const char *mode = o->mode ? o->mode : "train";
  bool train = !strcasecmp(mode, "train");
  if (!train && strcasecmp(mode, "test") != 0) {
    pd_set_error(PD_ERR_INVALID, "%s: mode should be 'train' or 'test', but got %s", cls, mode);
    return NULL;
  }
  pd_dtype dt = o->dtype == 0 ? pd_get_default_dtype() : o->dtype;
  if ((unsigned)dt >= PD_NUM_DTYPES) {
    pd_set_error(PD_ERR_DTYPE, "%s: invalid dtype %d", cls, (int)dt);
    return NULL;
  }
  char home_root[4096];
  const char *root = o->root;
  if (!root && default_root) root = default_root;
  if (!root) {
    const char *home = getenv("HOME");
    snprintf(home_root, sizeof home_root, "%s/.cache/paddle/dataset/mnist", home ? home : ".");
    root = home_root;
  }
  char *ipath = o->image_path ? strdup(o->image_path)
                              : find_file(root, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte");
  char *lpath = o->label_path ? strdup(o->label_path)
                              : find_file(root, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte");
  pd_io_dataset *ds = NULL;
  mnist *m = calloc(1, sizeof *m);
  if (!ipath || !lpath || !m) {
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", cls);
    goto done;
  }
  pd_internal_enter();
  m->images = load_checked(cls, ipath, 3, "idx3-ubyte image", 0x00000803u);
  m->labels = m->images ? load_checked(cls, lpath, 1, "idx1-ubyte label", 0x00000801u) : NULL;
  pd_internal_leave();
  if (!m->images || !m->labels) goto done;
  if (m->images->shape[0] != m->labels->shape[0]) {
    pd_set_error(PD_ERR_IO, "%s: '%s' holds %lld images but '%s' holds %lld labels", cls, ipath,
                 (long long)m->images->shape[0], lpath, (long long)m->labels->shape[0]);
    goto done;
  }
  m->dtype = dt;
  m->transform = o->transform;
  m->transform_user = o->transform_user;
  m->cls = cls;
  pd_io_dataset_fns fns = {.len = mnist_len, .get_item = mnist_get_item, .destroy = mnist_destroy};
  ds = pd_io_dataset_new(&fns, m);
  if (ds) m = NULL;
done:
  if (m) mnist_destroy(m);
  free(ipath);
  free(lpath);
  return ds;
}

pd_io_dataset *pd_vision_datasets_mnist(const pd_vision_datasets_mnist_opts *opts) {
  return mnist_new(opts, "MNIST", NULL);
}

pd_io_dataset *pd_vision_datasets_fashion_mnist(const pd_vision_datasets_mnist_opts *opts) {
  return mnist_new(opts, "FashionMNIST", "/usr/share/datasets/fashion-mnist");
}

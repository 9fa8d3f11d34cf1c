/* paddle.c core: dtypes, places, errors, tensors, scopes, memory, random seed.
 *
 * Ownership (see docs/architecture.md):
 *   - every function returning a pd_tensor * hands the caller one reference,
 *     unless a scope is open, in which case the scope owns it until
 *     pd_scope_end() (pd_keep() moves it out of the scope to the caller);
 *   - pd_tensor_release() drops one reference;
 *   - functions never take ownership of their tensor arguments.
 * Errors: a function returning a pointer returns NULL, one returning a
 * pd_status returns a negative value; pd_last_error() names the op and values.
 * A NULL tensor argument makes an op return NULL and keep the first error. */
#ifndef PADDLEC_CORE_H
#define PADDLEC_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PD_MAX_DIMS 9

/* ---- dtypes ------------------------------------------------------------ */
typedef enum pd_dtype {
  PD_BOOL = 0,
  PD_UINT8,
  PD_INT8,
  PD_INT16,
  PD_INT32,
  PD_INT64,
  PD_FLOAT16,
  PD_BFLOAT16,
  PD_FLOAT32,
  PD_FLOAT64,
  PD_NUM_DTYPES
} pd_dtype;

/* Paddle's name of a dtype ("float32"); "invalid" for an out-of-range value. */
PD_API const char *pd_dtype_name(pd_dtype dt);
/* Size in bytes of one element; 0 for an invalid dtype. */
PD_API size_t pd_dtype_size(pd_dtype dt);
PD_API bool pd_dtype_is_floating(pd_dtype dt);
PD_API bool pd_dtype_is_integer(pd_dtype dt); /* excludes bool */
/* Parses "float32", "int64", ... ; returns -1 when unknown. */
PD_API int pd_dtype_from_name(const char *name);
/* Paddle's tensor-to-tensor promotion: equal dtypes stay; two floating
 * dtypes give the wider (float16 with bfloat16 gives float32); any other mix
 * has no common dtype and gives PD_NUM_DTYPES (binary ops then fail and ask
 * for an explicit cast, as Paddle does). */
PD_API pd_dtype pd_promote_types(pd_dtype a, pd_dtype b);

/* float16 / bfloat16 bit conversions, round to nearest even. */
PD_API uint16_t pd_f32_to_f16(float f);
PD_API float pd_f16_to_f32(uint16_t h);
PD_API uint16_t pd_f32_to_bf16(float f);
PD_API float pd_bf16_to_f32(uint16_t h);

/* ---- places ------------------------------------------------------------ */
typedef enum pd_place_kind { PD_PLACE_CPU = 0, PD_NUM_PLACES } pd_place_kind;
typedef struct pd_place {
  pd_place_kind kind;
  int device_id;
} pd_place;
#define PD_CPU ((pd_place){PD_PLACE_CPU, 0})

/* ---- errors ------------------------------------------------------------ */
typedef enum pd_status {
  PD_OK = 0,
  PD_ERR_INVALID = -1, /* invalid argument (NULL, bad attribute) */
  PD_ERR_SHAPE = -2,   /* incompatible shapes */
  PD_ERR_DTYPE = -3,   /* unsupported dtype */
  PD_ERR_INDEX = -4,   /* axis or index out of range */
  PD_ERR_MEMORY = -5,  /* out of memory */
  PD_ERR_STATE = -6,   /* wrong state (graph freed, inplace version moved) */
  PD_ERR_IO = -7,      /* file or network failure */
  PD_ERR_UNIMPLEMENTED = -8,
  PD_ERR_COMM = -9, /* collective communication failure */
} pd_status;

/* The status code's constant as a string ("PD_ERR_SHAPE"), and a one-line
 * description of it in lower case without a final period ("incompatible
 * shapes"), like sqlite3_errstr. A value that is no pd_status gives
 * "PD_ERR_UNKNOWN" and "unknown status code". The strings are static. */
PD_API const char *pd_status_name(pd_status code);
PD_API const char *pd_status_string(pd_status code);

/* The message of the last error on this thread ("" when none). */
PD_API const char *pd_last_error(void);
/* The status of the last error on this thread (PD_OK when none). */
PD_API pd_status pd_last_status(void);
PD_API void pd_clear_error(void);
/* Records an error (printf-style). Returns `code` so callers can
 * `return pd_set_error(PD_ERR_SHAPE, "...")`. With PADDLEC_ABORT_ON_ERROR=1
 * in the environment it prints the message and a backtrace and aborts. */
PD_API pd_status pd_set_error(pd_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- dtype limits and the default dtype --------------------------------- */
/* paddle.finfo: the numeric limits of a floating dtype, Paddle's fields.
 * min is -max (the lowest finite value), tiny == smallest_normal (the
 * smallest positive normal number), eps the gap between 1 and the next
 * value, resolution 10^-(decimal digits of precision); dtype is the static
 * name ("float32"). The seed's paddle.finfo(dtype).min:
 *   pd_dtype_finfo fi;
 *   if (pd_finfo(PD_FLOAT32, &fi) == PD_OK) mask_value = fi.min;
 * A non-floating dtype is PD_ERR_DTYPE (Paddle raises too). */
typedef struct pd_dtype_finfo {
  int bits;
  double min, max, eps, tiny, smallest_normal, resolution;
  const char *dtype;
} pd_dtype_finfo;
PD_API pd_status pd_finfo(pd_dtype dt, pd_dtype_finfo *out);
/* paddle.iinfo: bits, min, max and name of uint8, int8, int16, int32 or
 * int64; any other dtype (bool, floating) is PD_ERR_DTYPE. */
typedef struct pd_dtype_iinfo {
  int bits;
  int64_t min, max;
  const char *dtype;
} pd_dtype_iinfo;
PD_API pd_status pd_iinfo(pd_dtype dt, pd_dtype_iinfo *out);

/* paddle.set_default_dtype / get_default_dtype: the floating dtype used
 * where none is given (float32 at start; process-wide). Accepts float16,
 * bfloat16, float32, float64 (Paddle's list); any other is PD_ERR_DTYPE and
 * leaves the default unchanged. It applies to: the creation ops given
 * PD_NUM_DTYPES (full, zeros, ones, empty, rand, randn, uniform, linspace,
 * eye; arange with a non-integral bound; normal always), the layers whose
 * options leave dtype 0 and pd_layer_create_parameter given PD_NUM_DTYPES
 * (their parameters, buffers and initializers follow), and the masks
 * layers build (generate_square_subsequent_mask). */
PD_API pd_status pd_set_default_dtype(pd_dtype dt);
PD_API pd_dtype pd_get_default_dtype(void);

/* ---- tensors ----------------------------------------------------------- */
typedef struct pd_tensor pd_tensor;

PD_API pd_tensor *pd_tensor_retain(pd_tensor *t);
/* NULL is a no-op. Releasing a tensor once too often is a use after free;
 * while its struct waits in the library's cache (until a new tensor reuses
 * it) the release, a retain or an op given it sets an error saying so. */
PD_API void pd_tensor_release(pd_tensor *t);

PD_API int pd_tensor_ndim(const pd_tensor *t);
PD_API const int64_t *pd_tensor_shape(const pd_tensor *t);
PD_API const int64_t *pd_tensor_strides(const pd_tensor *t); /* in elements */
PD_API int64_t pd_tensor_numel(const pd_tensor *t);
PD_API pd_dtype pd_tensor_dtype(const pd_tensor *t);
PD_API pd_place pd_tensor_place(const pd_tensor *t);
PD_API bool pd_tensor_is_contiguous(const pd_tensor *t);
/* Pointer to the first element (storage + offset). Writable. */
PD_API void *pd_tensor_data(const pd_tensor *t);
/* Element i of a tensor (row-major logical index, views honoured), as double. */
PD_API double pd_tensor_item_at(const pd_tensor *t, int64_t i);
/* The single value of a 1-element tensor as double; NAN and an error otherwise. */
PD_API double pd_tensor_item(const pd_tensor *t);
/* Copies the tensor's elements, row-major, converted to `dt`, into buf
 * (capacity `n` elements). Returns the number of elements or a negative status. */
PD_API int64_t pd_tensor_copy_to(const pd_tensor *t, void *buf, int64_t n, pd_dtype dt);

/* stop_gradient as in Paddle: true for user tensors, false for parameters. */
PD_API bool pd_tensor_stop_gradient(const pd_tensor *t);
PD_API void pd_tensor_set_stop_gradient(pd_tensor *t, bool stop);
PD_API bool pd_tensor_is_leaf(const pd_tensor *t);
/* The accumulated gradient (borrowed; NULL when none). */
PD_API pd_tensor *pd_tensor_grad(const pd_tensor *t);
/* Replaces the gradient (retains g; NULL clears it). g must have t's shape
 * and dtype: otherwise an error naming both, and t keeps its gradient. */
PD_API pd_status pd_tensor_set_grad(pd_tensor *t, pd_tensor *g);
/* clear_grad: set_to_zero keeps the buffer and fills it with zeros. */
PD_API void pd_tensor_clear_grad(pd_tensor *t, bool set_to_zero);
/* Inplace version counter (shared by views of one storage). */
PD_API uint32_t pd_tensor_version(const pd_tensor *t);
/* Optional name (copied); NULL clears it. */
PD_API void pd_tensor_set_name(pd_tensor *t, const char *name);
PD_API const char *pd_tensor_name(const pd_tensor *t);
/* True when two tensors share one storage. */
PD_API bool pd_tensor_shares_storage(const pd_tensor *a, const pd_tensor *b);

/* Printing like Paddle:
 * Tensor(shape=[2, 3], dtype=float32, place=Place(cpu), stop_gradient=True,
 *        [[1., 2., 3.],
 *         [4., 5., 6.]])
 * pd_tensor_to_string returns a malloc'ed string the caller frees. */
PD_API char *pd_tensor_to_string(const pd_tensor *t);
PD_API pd_status pd_tensor_print(const pd_tensor *t, FILE *f);
/* Print precision (digits after the point; Paddle's default 8). */
PD_API void pd_set_print_precision(int digits);

/* ---- scopes ------------------------------------------------------------ */
/* Between begin and end every tensor returned by an op belongs to the scope
 * and is released at its end, unless moved out with pd_keep. Scopes nest. */
PD_API void pd_scope_begin(void);
PD_API void pd_scope_end(void);
/* Moves t out of the innermost scope to the caller (or to the enclosing
 * scope when one is open). Returns t. */
PD_API pd_tensor *pd_keep(pd_tensor *t);

/* ---- memory ------------------------------------------------------------ */
/* Bytes handed out to live tensors now / at most since start or reset. */
PD_API size_t pd_memory_allocated(void);
PD_API size_t pd_memory_peak(void);
/* Bytes held by the caching allocator (live + cached). */
PD_API size_t pd_memory_reserved(void);
PD_API void pd_memory_reset_peak(void);
/* Gives cached blocks back to the system: the shared cache and the calling
 * thread's. Other live threads give theirs back at their next allocation
 * (a thread's cache holds at most 16 blocks of each size up to 64 KiB). */
PD_API void pd_memory_empty_cache(void);

/* ---- random ------------------------------------------------------------ */
/* Seeds the global generator (Philox 4x32-10): every random op is then
 * reproducible, whatever the number of threads. */
PD_API void pd_seed(uint64_t seed);
PD_API uint64_t pd_get_seed(void);

/* ---- threads ----------------------------------------------------------- */
/* Threads of the one OpenMP pool shared with oneDNN. A process forked
 * (fork(), pd_dist_spawn) after its parent ran ops on more than one thread
 * computes on one thread, whatever is asked here: libgomp's pool does not
 * survive a fork, and a parallel region of more threads would hang. Start
 * ranks by exec (fleetrun) to give each its own threads. */
PD_API void pd_set_num_threads(int n);
PD_API int pd_get_num_threads(void);
/* Deterministic mode for float32 matrix products and convolutions (like
 * torch.use_deterministic_algorithms). Every other kernel gives the same bits
 * on any number of threads always; these two run oneDNN's own threading by
 * default, whose bits depend on the thread count for some shapes. When on,
 * they give the same bits on any number of threads too, at some cost in
 * speed (docs/determinism.md). Off by default; affects every thread. */
PD_API void pd_set_deterministic(bool on);
PD_API bool pd_get_deterministic(void);

/* ---- CPU variant ------------------------------------------------------- */
/* The instruction set the hot kernels run with: "baseline" (any x86-64),
 * "avx2" (AVX2, FMA, F16C) or "avx512" (AVX-512 F/VL/BW/DQ), chosen when the
 * library is loaded as the best the CPU supports; PADDLEC_CPU=baseline|avx2|
 * avx512 in the environment asks for one (a name it does not know, or a
 * variant the CPU lacks, is reported once on stderr and the best supported
 * one is used). "native" for a build made with -DPADDLEC_NATIVE=ON, which
 * is tuned for its build machine and ignores PADDLEC_CPU. See docs/cpu.md. */
PD_API const char *pd_cpu_variant(void);

#ifdef __cplusplus
}
#endif
#endif

/* Gradcheck samples for the manipulation ops. */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define IDX(nd, shape, ...) pd_tensor_from_f64((const double[]){__VA_ARGS__}, PD_INT64, (nd), (shape))

static int s_flatten(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 3, 2, 2), -1, 1);
  a->i[0] = 1;
  a->i[1] = -2;
  return 1;
}
static int s_squeeze(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 1, 3, 1), -1, 1);
  sample_set_list(a, 0, 1, S(-1));
  return 1;
}
static int s_unsqueeze(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  sample_set_list(a, 0, 2, S(0, -1));
  return 1;
}
static int s_broadcast_to(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 1), -1, 1);
  sample_set_list(a, 0, 3, S(2, 3, 4));
  return 1;
}
static int s_expand_as(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(1, 3), -1, 1);
  in[1] = sample_uniform(3, S(2, 2, 3), -1, 1);
  return 2;
}
static int s_tile(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  sample_set_list(a, 0, 3, S(2, 1, 2));
  return 1;
}
static int s_concat(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(2, 1), -1, 1);
  in[2] = sample_uniform(2, S(2, 2), -1, 1);
  a->i[0] = -1;
  return 3;
}
static int s_stack(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(2, 3), -1, 1);
  a->i[0] = 1;
  return 2;
}
static int s_split_sections(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 6), -1, 1);
  a->i[0] = 1;
  a->i[2] = 3;
  sample_set_list(a, 0, 3, S(1, -1, 2));
  return 1;
}
static int s_split_num(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 3), -1, 1);
  a->i[1] = 2;
  return 1;
}
static int s_chunk(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 6), -1, 1);
  a->i[0] = -1;
  a->i[1] = 3;
  return 1;
}
static int s_unbind(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 2), -1, 1);
  a->i[0] = 1;
  return 1;
}
static int s_slice(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(3, 4, 5), -1, 1);
  sample_set_list(a, 0, 2, S(1, -1));
  sample_set_list(a, 1, 2, S(-3, 1));
  sample_set_list(a, 2, 2, S(100, 4));
  return 1;
}
static int s_strided_slice(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(3, 4, 5), -1, 1);
  sample_set_list(a, 0, 3, S(0, 1, 2));
  sample_set_list(a, 1, 3, S(2, 0, 4));
  sample_set_list(a, 2, 3, S(-1, 4, -1));
  sample_set_list(a, 3, 3, S(-1, 2, -2));
  return 1;
}
static int s_slice_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 2), -1, 1);
  sample_set_list(a, 0, 2, S(4, 5));
  sample_set_list(a, 1, 2, S(1, 4));
  sample_set_list(a, 2, 2, S(2, -3));
  return 1;
}
static int s_roll(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  sample_set_list(a, 0, 2, S(1, -5));
  sample_set_list(a, 1, 2, S(0, 1));
  return 1;
}
static int s_roll_flat(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  sample_set_list(a, 0, 1, S(5));
  return 1;
}
static int s_flip(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 2), -1, 1);
  sample_set_list(a, 0, 2, S(0, -1));
  return 1;
}
static int s_tril(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -1, 1);
  a->i[0] = 1;
  return 1;
}
static int s_triu(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 3), -1, 1);
  a->i[0] = -1;
  return 1;
}
static int s_assign(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  return 1;
}
static int s_gather(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 4, 3), -1, 1);
  in[1] = IDX(1, S(5), 3, 0, -1, 3, 1); /* duplicates and a negative index */
  a->i[0] = 1;
  return 2;
}
static int s_gather_scalar(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  in[1] = IDX(0, NULL, 2);
  a->i[0] = -1;
  return 2;
}
static int s_index_select(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 3), -1, 1);
  in[1] = sample_indices(1, S(6), 4);
  a->i[0] = 0;
  return 2;
}
static int s_index_add(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  in[1] = IDX(1, S(3), 1, 3, 1);
  in[2] = sample_uniform(2, S(3, 3), -1, 1);
  a->i[0] = 1;
  return 3;
}
static int s_gather_nd(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(3, S(3, 4, 2), -1, 1);
  in[1] = IDX(2, S(3, 2), 0, 1, 2, -1, 0, 1);
  return 2;
}
static int s_scatter_nd_add(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  in[1] = IDX(3, S(2, 2, 1), 1, 2, 1, 0);
  in[2] = sample_uniform(3, S(2, 2, 4), -1, 1);
  return 3;
}
static int s_index_sample(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  in[1] = IDX(2, S(3, 3), 0, 3, 0, 2, 2, 1, 1, 0, 3);
  return 2;
}
static int s_scatter_overwrite(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 3), -1, 1);
  in[1] = IDX(1, S(2), 2, 0); /* distinct indices */
  in[2] = sample_uniform(2, S(2, 3), -1, 1);
  a->i[0] = 1;
  return 3;
}
static int s_scatter_add(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 3), -1, 1);
  in[1] = IDX(1, S(3), 1, 3, 1); /* duplicates accumulate */
  in[2] = sample_uniform(2, S(3, 3), -1, 1);
  a->i[0] = 0;
  return 3;
}
static int s_masked_select(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = pd_tensor_from_f64((const double[]){1, 0, 1, 1, 0, 0}, PD_BOOL, 3, S(2, 1, 3));
  return 2;
}
static int s_embedding(pd_tensor **in, pd_attrs *a) {
  in[0] = IDX(2, S(2, 3), 1, 4, 1, 0, 2, 4);
  in[1] = sample_uniform(2, S(5, 3), -1, 1);
  a->i[0] = -1; /* row 4 is padding */
  a->i[1] = 1;
  return 2;
}
static int s_embedding_nopad(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = IDX(1, S(4), 3, 0, 3, 2);
  in[1] = sample_uniform(2, S(4, 2), -1, 1);
  return 2;
}
static int s_embedding_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = IDX(2, S(2, 2), 2, 0, 2, 1);
  in[1] = sample_uniform(3, S(2, 2, 3), -1, 1);
  a->i[0] = 4;
  a->i[1] = 1;
  a->i[2] = 1;
  return 2;
}
/* A vocab shard: rows [2, 5) of a table of 8; the ids outside read zeros. */
static int s_c_embedding(pd_tensor **in, pd_attrs *a) {
  in[0] = IDX(2, S(2, 3), 1, 4, 7, 2, 3, 2);
  in[1] = sample_uniform(2, S(3, 3), -1, 1);
  a->i[2] = 2; /* start_index */
  a->i[3] = 8; /* vocab_size */
  return 2;
}
static int s_c_embedding_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = IDX(2, S(2, 2), 2, 0, 4, 3);
  in[1] = sample_uniform(3, S(2, 2, 3), -1, 1);
  a->i[0] = 3; /* the shard's rows */
  a->i[3] = 2;
  a->i[4] = 8;
  return 2;
}

/* copy_: src broadcast to x, and src of another dtype. */
static int s_copy_bcast(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  in[1] = sample_uniform(1, S(2), -1, 1);
  return 2;
}
static int s_copy_cast(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  in[1] = sample_indices(2, S(3, 2), 5);
  return 2;
}

/* The index ops without gradients. */
static int s_nonzero(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = pd_tensor_from_f64((const double[]){1, 0, 2, 0, 0, 3}, PD_FLOAT64, 2, S(2, 3));
  return 1;
}
static int s_one_hot(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_indices(2, S(3, 2), 4);
  a->i[0] = 4;
  return 1;
}

const pd_op_sample pd_samples_manipulation[] = {
    {"flatten", s_flatten, 0},
    {"squeeze", s_squeeze, 0},
    {"unsqueeze", s_unsqueeze, 0},
    {"broadcast_to", s_broadcast_to, 0},
    {"expand_as", s_expand_as, 0},
    {"tile", s_tile, 0},
    {"concat", s_concat, 0},
    {"stack", s_stack, 0},
    {"split", s_split_sections, 0},
    {"split", s_split_num, 0},
    {"chunk", s_chunk, 0},
    {"unbind", s_unbind, 0},
    {"slice", s_slice, 0},
    {"strided_slice", s_strided_slice, 0},
    {"slice_grad", s_slice_grad, 0},
    {"roll", s_roll, 0},
    {"roll", s_roll_flat, 0},
    {"flip", s_flip, 0},
    {"tril", s_tril, 0},
    {"triu", s_triu, 0},
    {"assign", s_assign, 0},
    {"gather", s_gather, 0},
    {"gather", s_gather_scalar, 0},
    {"index_select", s_index_select, 0},
    {"index_add", s_index_add, 0},
    {"gather_nd", s_gather_nd, 0},
    {"scatter_nd_add", s_scatter_nd_add, 0},
    {"index_sample", s_index_sample, 0},
    {"scatter", s_scatter_overwrite, 0},
    {"scatter", s_scatter_add, 0},
    {"masked_select", s_masked_select, 0},
    {"embedding", s_embedding, 0},
    {"embedding", s_embedding_nopad, 0},
    {"embedding_grad", s_embedding_grad, 0},
    {"c_embedding", s_c_embedding, 0},
    {"c_embedding_grad", s_c_embedding_grad, 0},
    {"nonzero", s_nonzero, 0},
    {"copy_", s_copy_bcast, 0},
    {"copy_", s_copy_cast, 0},
    {"one_hot", s_one_hot, 0},
    {NULL, NULL, 0},
};

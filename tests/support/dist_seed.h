/* Seed 000 of dist.to_static for the tests: its RandomDataset (SN batches
 * of SB images of IMG values, labels of CLS values), DemoNet, and the
 * global values of a DemoNet's parameters. */
#ifndef PADDLEC_TEST_DIST_SEED_H
#define PADDLEC_TEST_DIST_SEED_H

#include "paddlec.h"

enum { SB = 4, SN = 4, IMG = 16, CLS = 8, SEED_MAX_PARAM = IMG * IMG };

/* Batch b of the seed's RandomDataset: images [SB, IMG], labels [SB, CLS]. */
void seed_batch(int b, pd_tensor **x, pd_tensor **y);
/* DemoNet: Linear(16, 16), ReLU, Linear(16, 8), the same weights on every
 * rank; with a mesh, the weights placed as w0 and w1 say. */
pd_layer *demo_net(pd_dist_process_mesh *mesh, const pd_dist_placement *w0, const pd_dist_placement *w1);
/* The whole RandomDataset of the seed: SN * SB images and labels. */
pd_io_dataset *seed_dataset(void);
/* A ShardDataloader of the seed's dataset, its global batch of SB split
 * along mesh dim shard_dim. */
pd_dist_shard_dataloader *seed_shard_loader(pd_io_dataset *ds, pd_dist_process_mesh *mesh,
                                            const char *shard_dim);
/* The global values of DemoNet net's 4 parameters (unsharded: a
 * collective, so every rank calls it in the same order), in layer order,
 * and their sizes n. 0, or a status for DIST_CHECK's caller. */
int seed_param_values(int rank, pd_layer *net, double (*v)[SEED_MAX_PARAM], int *n);
/* 0 when the parameters a and b (sizes n) agree to 1e-6, else prints the
 * first difference and returns 62. */
int seed_values_equal(int rank, const char *what, double (*a)[SEED_MAX_PARAM], double (*b)[SEED_MAX_PARAM],
                      const int *n);
/* The SN global batches of a ShardDataloader of the seed's dataset split
 * along shard_dim (unsharded: every rank gathers them, in the same order;
 * the caller's scope holds them). 0, or a status having printed why. */
int seed_global_batches(int rank, pd_dist_process_mesh *mesh, const char *shard_dim, pd_tensor **xs,
                        pd_tensor **ys);
/* The op types of p's global block, space-separated (malloc'ed; NULL when
 * p is NULL). */
char *seed_op_list(pd_program *p);

#endif

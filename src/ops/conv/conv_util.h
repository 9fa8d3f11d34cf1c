/* Option parsing shared by the convolution and pooling wrappers. */
#ifndef PADDLEC_OP_CONV_UTIL_H
#define PADDLEC_OP_CONV_UTIL_H

#include "../op_registry.h"

/* Case-insensitive string equality. */
bool pd_conv_str_ieq(const char *a, const char *b);

/* data_format: NULL or the channels-first name of nsp spatial dims ("NCL",
 * "NCHW", "NCDHW") gives *cl = false, the channels-last name true. */
pd_status pd_conv_parse_format(const char *op, const char *fmt, int nsp, bool *cl);

/* Paddings [before_0, after_0, ...] (2 * nsp values) from a list of 0, 1,
 * nsp or 2 * nsp values or an algorithm ("EXPLICIT", "SAME", "VALID").
 * SAME pads so that out = ceil(in / stride) and, when dil is given, resets
 * the dilations to 1. */
pd_status pd_conv_parse_padding(const char *op, const char *algo, int n, const int64_t *v, int nsp,
                                const int64_t *in, const int64_t *k, const int64_t *stride, int64_t *dil,
                                int64_t *pads);

#endif

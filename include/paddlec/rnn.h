/* paddle.nn recurrent layers: SimpleRNNCell, LSTMCell, GRUCell, the RNN and
 * BiRNN wrappers, and the multi-layer SimpleRNN, LSTM and GRU networks.
 *
 * Cells are layers called with (inputs[, states...]) and returning
 * (outputs, new_states...): SimpleRNNCell and GRUCell take and return one
 * state h [batch, hidden]; LSTMCell takes and returns two, h and c. Missing
 * states are zeros.
 *
 * The sequence layers (RNN, BiRNN, SimpleRNN, LSTM, GRU) are called with
 * (inputs[, initial_states...][, sequence_length]): the sequence_length,
 * when given, is the last input and is recognised by its integer dtype
 * (int32 or int64, shape [batch]). They return (outputs, final_states...).
 * pd_nn_rnn_call does the argument packing for C callers.
 *
 * With a sequence_length, steps at or past a sequence's length keep the
 * previous state and give zero outputs (Paddle's fused rnn kernel); the
 * backward direction runs over the whole padded sequence reversed, as
 * Paddle does. */
#ifndef PADDLEC_RNN_H
#define PADDLEC_RNN_H

#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of the cells; NULL or all-zero = Paddle's defaults. Every weight
 * and bias defaults to Uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). */
typedef struct pd_nn_rnn_cell_opts {
  const pd_param_attr *weight_ih_attr, *weight_hh_attr;
  const pd_param_attr *bias_ih_attr, *bias_hh_attr;
  const char *activation; /* SimpleRNNCell only: "tanh" (NULL) or "relu" */
  int64_t proj_size;      /* LSTMCell only: must be 0 (projection is not supported) */
  pd_dtype dtype;         /* 0: pd_get_default_dtype() */
} pd_nn_rnn_cell_opts;
typedef pd_nn_rnn_cell_opts pd_nn_simple_rnn_cell_opts;
typedef pd_nn_rnn_cell_opts pd_nn_lstm_cell_opts;
typedef pd_nn_rnn_cell_opts pd_nn_gru_cell_opts;

/* paddle.nn.SimpleRNNCell: h = act(x W_ih^T + b_ih + h W_hh^T + b_hh).
 * weight_ih [hidden, input], weight_hh [hidden, hidden], bias_ih/bias_hh [hidden]. */
PD_API pd_layer *pd_nn_simple_rnn_cell(int64_t input_size, int64_t hidden_size,
                                       const pd_nn_simple_rnn_cell_opts *opts);
/* paddle.nn.LSTMCell: gates in the order i, f, g (cell candidate), o;
 * c = f * c + i * tanh(g), h = o * tanh(c). weight_ih [4 hidden, input],
 * weight_hh [4 hidden, hidden], biases [4 hidden]. Returns (h, h, c). */
PD_API pd_layer *pd_nn_lstm_cell(int64_t input_size, int64_t hidden_size, const pd_nn_lstm_cell_opts *opts);
/* paddle.nn.GRUCell: gates r, z, c; r and z from x and h, then
 * c = tanh(x_c + r * (h W_hc^T + b_hc)), h = (h - c) * z + c.
 * weight_ih [3 hidden, input], weight_hh [3 hidden, hidden], biases [3 hidden]. */
PD_API pd_layer *pd_nn_gru_cell(int64_t input_size, int64_t hidden_size, const pd_nn_gru_cell_opts *opts);

/* paddle.nn.RNN(cell, is_reverse, time_major): runs `cell` (its reference is
 * taken over; registered as sublayer "cell") over the time steps. Inputs
 * [batch, time, input] ([time, batch, input] when time_major). The three
 * cells above run with one matmul for all steps' input projections; any
 * other cell is called step by step (then initial states are optional only
 * if the cell defaults them itself). */
PD_API pd_layer *pd_nn_rnn(pd_layer *cell, bool is_reverse, bool time_major);
/* paddle.nn.BiRNN(cell_fw, cell_bw, time_major): outputs of both directions
 * concatenated on the last axis; states in as (fw states..., bw states...)
 * and out in the same order. */
PD_API pd_layer *pd_nn_bi_rnn(pd_layer *cell_fw, pd_layer *cell_bw, bool time_major);

/* Options of the multi-layer networks; NULL or all-zero = Paddle's defaults. */
typedef struct pd_nn_rnn_net_opts {
  int num_layers;         /* 0: 1 */
  const char *direction;  /* "forward" (NULL), "bidirect" or "bidirectional" */
  bool time_major;        /* inputs [time, batch, input] */
  double dropout;         /* on the inputs of every layer but the first, in training */
  const char *activation; /* SimpleRNN only: "tanh" (NULL) or "relu" */
  const pd_param_attr *weight_ih_attr, *weight_hh_attr;
  const pd_param_attr *bias_ih_attr, *bias_hh_attr;
  int64_t proj_size; /* LSTM only: must be 0 (projection is not supported) */
  pd_dtype dtype;    /* 0: pd_get_default_dtype() */
} pd_nn_rnn_net_opts;
typedef pd_nn_rnn_net_opts pd_nn_simple_rnn_opts;
typedef pd_nn_rnn_net_opts pd_nn_lstm_opts;
typedef pd_nn_rnn_net_opts pd_nn_gru_opts;

/* paddle.nn.SimpleRNN / LSTM / GRU. Sublayers "0", "1", ... (RNN or BiRNN
 * wrappers of the cells, as Paddle); the parameters are also registered on
 * the network as weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}
 * (suffix "_reverse" for the backward direction), which are the names
 * named_parameters and state_dict report. Layer k > 0 has input size
 * num_directions * hidden_size. Initial and final states have shape
 * [num_layers * num_directions, batch, hidden] (LSTM: two of them, h and c;
 * index layer * num_directions + direction). Outputs
 * [batch, time, num_directions * hidden] (time first when time_major). */
PD_API pd_layer *pd_nn_simple_rnn(int64_t input_size, int64_t hidden_size, const pd_nn_simple_rnn_opts *opts);
PD_API pd_layer *pd_nn_lstm(int64_t input_size, int64_t hidden_size, const pd_nn_lstm_opts *opts);
PD_API pd_layer *pd_nn_gru(int64_t input_size, int64_t hidden_size, const pd_nn_gru_opts *opts);

/* Calls a sequence layer (RNN, BiRNN, SimpleRNN, LSTM, GRU) with explicit
 * arguments: initial_states (n_states tensors, or NULL / 0 for zeros) and
 * sequence_length (NULL: every sequence is full length). Writes the outputs
 * to *outputs and up to max_states final states to final_states; returns
 * the number of final states, or a negative status. */
PD_API int pd_nn_rnn_call(pd_layer *rnn, pd_tensor *inputs, pd_tensor *const *initial_states, int n_states,
                          pd_tensor *sequence_length, pd_tensor **outputs, pd_tensor **final_states,
                          int max_states);

#ifdef __cplusplus
}
#endif
#endif
